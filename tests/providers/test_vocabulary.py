"""Provider vocabulary (``agenttrail.providers``): the facts the importers, replay and the
validator share, each defined once.

The sets are checked against the provider documentation they cite (Messages API reference,
Chat Completions and Responses references); two source scans guard the layout rules of
docs/architecture.md: the vocabulary imports nothing of agenttrail, and no other module
defines a set of a provider's block or item types of its own.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from agenttrail.providers import anthropic, openai

SRC = Path(__file__).resolve().parents[2] / "src" / "agenttrail"


def test_anthropic_blocks() -> None:
    # Messages API reference, content of a message: the block types agenttrail knows
    assert {
        "text",
        "image",
        "document",
        "search_result",
        "container_upload",
        "thinking",
        "redacted_thinking",
        "tool_use",
        "server_tool_use",
        "mcp_tool_use",
        "tool_result",
    } == anthropic.BLOCKS
    assert {"tool_use", "server_tool_use", "mcp_tool_use"} == anthropic.TOOL_CALL_BLOCKS
    assert not anthropic.CLIENT_TOOL_CALL_BLOCKS & anthropic.SERVER_TOOL_CALL_BLOCKS
    assert anthropic.TOOL_CALL_BLOCKS <= anthropic.BLOCKS
    # text is every provider's; image is Anthropic's only with a source
    assert "text" not in anthropic.DISTINCT_BLOCKS and "image" not in anthropic.DISTINCT_BLOCKS
    assert anthropic.SERVER_TOOL_RESULT_BLOCKS <= anthropic.DISTINCT_BLOCKS
    assert not anthropic.DISTINCT_BLOCKS & (openai.TEXT_PARTS | openai.CHAT_USER_PARTS)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("tool_result", True),
        ("web_search_tool_result", True),
        ("code_execution_tool_result", True),
        ("tool_use", False),
        ("text", False),
        ("tool_result_error", False),
    ],
)
def test_anthropic_tool_results(kind: str, expected: bool) -> None:
    assert anthropic.is_tool_result(kind) is expected


def test_anthropic_server_tool_errors() -> None:
    # code execution tool docs: failure is content {"type": "<tool>_tool_result_error", ...}
    error = {"type": "code_execution_tool_result_error", "error_code": "unavailable"}
    assert anthropic.is_server_tool_error(error)
    assert not anthropic.is_server_tool_error({"type": "code_execution_result", "stdout": ""})
    assert not anthropic.is_server_tool_error([error])
    assert not anthropic.is_server_tool_error({"type": ["x_error"]})


@pytest.mark.parametrize(
    ("tool_id", "valid"),
    [
        ("toolu_01A09q90qw90lq917835lq9", True),
        ("call-1_A", True),
        ("", False),
        ("call.1", False),
        ("call 1", False),
        ("toolu_é", False),
        ("a\n", False),
    ],
)
def test_anthropic_tool_id_pattern(tool_id: str, valid: bool) -> None:
    # API error "String should match pattern '^[a-zA-Z0-9_-]+$'"
    assert (anthropic.TOOL_ID.fullmatch(tool_id) is not None) is valid


def test_openai_vocabulary() -> None:
    assert {"text", "input_text", "output_text"} == openai.TEXT_PARTS
    assert anthropic.ROLES < openai.CHAT_ROLES
    assert openai.RESPONSES_ROLES < openai.CHAT_ROLES
    assert {"custom", "custom_tool_call"} == openai.CUSTOM_TOOL_TYPES
    # the items that mark a bare list as Responses input are input items a request takes
    assert openai.INPUT_ITEM_MARKS - {
        "function_call",
        "function_call_output",
        "custom_tool_call",
    } <= (openai.OUTPUT_ITEMS_AS_INPUT)
    assert not openai.OUTPUT_ITEMS_AS_INPUT & {"function_call", "custom_tool_call"}  # have call_id
    assert [
        k
        for k in ("function_call_output", "computer_call_output", "function_call", None, 3)
        if openai.is_output_item(k)
    ] == ["function_call_output", "computer_call_output"]


def _imports(path: Path) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module is not None:
            found.add(node.module)
    return found


def test_the_vocabulary_imports_nothing_of_agenttrail() -> None:
    for path in sorted((SRC / "providers").glob("*.py")):
        ours = {m for m in _imports(path) if m.startswith("agenttrail")}
        assert ours <= {"agenttrail.providers"}, f"{path.name} imports {sorted(ours)}"


VOCABULARY = (
    anthropic.BLOCKS
    | anthropic.SERVER_TOOL_RESULT_BLOCKS
    | openai.TEXT_PARTS
    | openai.CHAT_USER_PARTS
    | openai.RESPONSES_USER_PARTS
    | openai.OUTPUT_ITEMS_AS_INPUT
    | openai.INPUT_ITEM_MARKS
    | openai.CUSTOM_TOOL_TYPES
) - {"message"}
"""Block, part and item types; ``message`` is also agenttrail's own payload type."""


def _literal_strings(node: ast.expr) -> set[str]:
    if isinstance(node, ast.Call) and node.args:  # frozenset({...}), set((...))
        node = node.args[0]
    if isinstance(node, ast.Dict):
        items = [k for k in node.keys if k is not None]
    elif isinstance(node, ast.Set | ast.Tuple | ast.List):
        items = list(node.elts)
    else:
        return set()
    return {i.value for i in items if isinstance(i, ast.Constant) and isinstance(i.value, str)}


def test_no_module_defines_provider_types_of_its_own() -> None:
    # each provider's vocabulary has one home (docs/architecture.md): a module-level set of
    # two or more block or item types outside providers/ is a copy that will drift
    copies = []
    for path in sorted(SRC.rglob("*.py")):
        if path.parent.name == "providers":
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in targets):
                continue  # names of functions (tool_call, output_text), not types
            if len(_literal_strings(node.value) & VOCABULARY) >= 2:
                copies.append(f"{path.relative_to(SRC)}:{node.lineno}")
    assert copies == []
