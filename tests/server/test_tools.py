"""The user's tools (agenttrail.server.tools): input validated against each tool's JSON Schema
with errors naming the field, the workspace tools confined to their folder, and the registry
with the tools packages add through entry points. Over HTTP: tests/server/test_server.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import InputError, ToolError
from agenttrail.server.tools import MAX_READ_BYTES, Tool, ToolRegistry, workspace_tools


def _registry(root: Path) -> ToolRegistry:
    return ToolRegistry(workspace_tools(root))


@pytest.mark.parametrize(
    ("name", "value", "message"),
    [
        ("write_file", {"path": "a.txt"}, "input field (input): 'content' is a required property"),
        ("read_file", {"path": 5}, "input field path: 5 is not of type 'string'"),
        ("read_file", {"path": ""}, "input field path: '' should be non-empty"),
        (
            "list_dir",
            {"path": ".", "recursive": True},
            "input field (input): Additional properties are not allowed ('recursive' was "
            "unexpected)",
        ),
        ("list_dir", ["."], "input field (input): ['.'] is not of type 'object'"),
    ],
)
def test_input_that_does_not_fit_the_schema_names_the_field(
    tmp_path: Path, name: str, value: Any, message: str
) -> None:
    with pytest.raises(InputError) as refused:
        _registry(tmp_path).get(name).validate(value)
    assert str(refused.value) == message


def test_a_nested_field_is_named_by_its_path() -> None:
    schema = {
        "type": "object",
        "properties": {
            "rows": {"type": "array", "items": {"type": "object", "required": ["id"]}},
        },
    }
    tool = Tool("bulk", "Bulk insert.", schema, lambda value: value)
    with pytest.raises(InputError, match=r"^input field rows/1: 'id' is a required property$"):
        tool.validate({"rows": [{"id": 1}, {"name": "no id"}]})


def test_dispatch_validates_before_it_runs_the_tool() -> None:
    calls: list[dict[str, Any]] = []

    def count(value: dict[str, Any]) -> int:
        calls.append(value)
        return len(value)

    schema = {"type": "object", "required": ["n"], "properties": {"n": {"type": "integer"}}}
    registry = ToolRegistry([Tool("count", "Count.", schema, count)])
    with pytest.raises(InputError, match="input field n: 'x' is not of type 'integer'"):
        registry.dispatch("count", {"n": "x"})
    assert calls == []
    assert registry.dispatch("count", {"n": 2}) == 1 and calls == [{"n": 2}]


def test_the_registry_names_the_tools_it_has(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    assert [t.name for t in registry] == ["list_dir", "read_file", "write_file"]
    with pytest.raises(InputError) as refused:
        registry.get("rm")
    assert str(refused.value) == "no tool 'rm' (tools: list_dir, read_file, write_file)"
    ours = Tool("read_file", "Our own reader.", {"type": "object"}, lambda value: "ours")
    registry.add(ours)  # a tool of the same name replaces the first
    assert registry.get("read_file") is ours and len(list(registry)) == 3


def test_the_workspace_tools_read_write_and_list_inside_their_folder(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    wrote = registry.dispatch("write_file", {"path": "sub/deep/new.txt", "content": "héllo"})
    assert wrote == {"path": "sub/deep/new.txt", "bytes": 6}
    assert (tmp_path / "sub" / "deep" / "new.txt").read_text(encoding="utf-8") == "héllo"
    (tmp_path / "bad.bin").write_bytes(b"ok \xff\n")
    read = registry.dispatch("read_file", {"path": "bad.bin"})
    assert read == {"path": "bad.bin", "content": "ok \ufffd\n"}
    assert registry.dispatch("list_dir", {}) == {"path": ".", "entries": ["bad.bin", "sub/"]}
    assert registry.dispatch("list_dir", {"path": "sub"})["entries"] == ["deep/"]
    (tmp_path / "inner-link").symlink_to(tmp_path / "bad.bin")  # a link that stays inside
    assert registry.dispatch("read_file", {"path": "inner-link"})["content"] == "ok \ufffd\n"


def test_the_workspace_tools_refuse_every_way_out(tmp_path: Path) -> None:
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "secret.txt").write_text("outside")
    (root / "link").symlink_to(tmp_path / "secret.txt")
    (root / "folder-link").symlink_to(tmp_path)
    registry = _registry(root)
    ways_out = {
        "../secret.txt": "path '../secret.txt' leads outside the workspace",
        "sub/../../secret.txt": "path 'sub/../../secret.txt' leads outside the workspace",
        "link": "path 'link' leads outside the workspace",
        "folder-link/secret.txt": "path 'folder-link/secret.txt' leads outside the workspace",
        str(tmp_path / "secret.txt"): f"path {str(tmp_path / 'secret.txt')!r}: absolute paths "
        "are refused; name a path in the workspace",
    }
    for path, message in ways_out.items():
        for name, value in (
            ("read_file", {"path": path}),
            ("write_file", {"path": path, "content": "x"}),
            ("list_dir", {"path": path}),
        ):
            with pytest.raises(ToolError) as refused:
                registry.dispatch(name, value)
            assert str(refused.value) == message, (name, path)
    assert (tmp_path / "secret.txt").read_text() == "outside"


def test_missing_and_oversized_files_are_tool_errors(tmp_path: Path) -> None:
    registry = _registry(tmp_path)
    with pytest.raises(ToolError, match=r"no file 'gone\.txt' in the workspace"):
        registry.dispatch("read_file", {"path": "gone.txt"})
    with pytest.raises(ToolError, match="no folder 'gone' in the workspace"):
        registry.dispatch("list_dir", {"path": "gone"})
    (tmp_path / "big.txt").write_bytes(b"x" * (MAX_READ_BYTES + 1))
    with pytest.raises(ToolError, match=rf"'big\.txt' is {MAX_READ_BYTES + 1:,} bytes, above"):
        registry.dispatch("read_file", {"path": "big.txt"})


def test_tools_from_an_entry_point_join_the_registry(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A real entry point: a dist-info folder on sys.path, found by importlib.metadata.
    (tmp_path / "weather_tool.py").write_text(
        "from agenttrail.server.tools import Tool\n"
        "SCHEMA = {'type': 'object', 'properties': {'city': {'type': 'string'}}}\n"
        "def make(workspace):\n"
        "    return Tool('weather', 'Weather in a city.', SCHEMA,\n"
        "                lambda v: {'city': v['city'], 'sky': 'clear'})\n"
    )
    info = tmp_path / "weather_tool-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: weather-tool\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[agenttrail.tools]\nweather = weather_tool:make\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    registry = ToolRegistry.with_entry_points(tmp_path)
    assert [t.name for t in registry] == ["list_dir", "read_file", "weather", "write_file"]
    assert registry.dispatch("weather", {"city": "Oslo"}) == {"city": "Oslo", "sky": "clear"}
