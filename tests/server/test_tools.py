"""The user's tools (agenttrail.server.tools): input validated against each tool's JSON Schema
with errors naming the field, the workspace tools confined to their folder, and the registry
with the tools packages add through entry points. Over HTTP (a real uvicorn on loopback, both
backends): every tool that ran has its call and its result in the log, and every failure is a
logged tool error answered with a 4xx problem; the rest of the API is in
tests/server/test_server.py."""

from __future__ import annotations

import errno
import json
import os
import tracemalloc
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from agenttrail.errors import InputError, ToolError
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewSession
from agenttrail.server import create_app, mint_token
from agenttrail.server.tools import MAX_READ_BYTES, Tool, ToolRegistry, workspace_tools
from agenttrail.server.workspace import Workspace
from tests.conftest import serving


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


# -- over HTTP: what ran is in the log, and every failure is a logged 4xx ----------------------

SECRET = b"test-secret-not-for-production-0123456789abcdef"
LOG_LIMIT = 64 * 1024
"""The log's payload limit in these tests (bytes of CBOR): small, so that going past it is cheap."""


@dataclass
class Served:
    """A server on a real uvicorn whose tools work in ``root``, and one session to call them in."""

    store: LogStore
    root: Path
    http: httpx.Client
    session_id: str

    def invoke(self, name: str, value: Any) -> httpx.Response:
        # json.dumps escapes a lone surrogate as "\\ud800" (valid JSON), which httpx's json=
        # cannot send.
        return self.http.post(
            f"/v1/sessions/{self.session_id}/tools/{name}/invoke",
            content=json.dumps(value),
            headers={"Content-Type": "application/json"},
        )

    def logged(self) -> list[dict[str, Any]]:
        """The session's payloads, each with its seq."""
        return [{"seq": e.seq, **e.payload} for e in self.store.read(self.session_id)]


@pytest.fixture
def workspace(tmp_path: Path, db_url: str) -> Iterator[Served]:
    """The workspace tools plus ``touch_then_turn``, a tool during whose run an agent turn
    begins: it writes ``touched.txt``, then takes the session's turn lock as an agent would."""
    store = open_store(db_url, max_payload_bytes=LOG_LIMIT)
    root = tmp_path / "workspace"
    root.mkdir()

    def touch_then_turn(value: dict[str, Any]) -> dict[str, Any]:
        (root / "touched.txt").write_text("ran")
        store.acquire_turn(value["session"], turn_id="t-agent", holder="agent", ttl_s=60)
        return {"touched": True}

    schema = {"type": "object", "properties": {"session": {"type": "string"}}}
    registry = ToolRegistry(
        [*workspace_tools(root), Tool("touch_then_turn", "Touch.", schema, touch_then_turn)]
    )
    store.create_session(NewSession(id="s1"))
    headers = {"Authorization": f"Bearer {mint_token(SECRET, rights=['read', 'invoke'])}"}
    try:
        with (
            serving(create_app(store, secret=SECRET, tools=registry)) as port,
            httpx.Client(base_url=f"http://127.0.0.1:{port}", headers=headers, timeout=60) as http,
        ):
            yield Served(store, root, http, "s1")
    finally:
        store.close()


def _logged_failure(ws: Served, response: httpx.Response, name: str, value: Any) -> str:
    """Check that ``response`` is a 422 problem for a tool that failed, and that its call and
    its result, with the same error, are the last two events in the log; returns the error."""
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    call, result = ws.logged()[-2:]
    assert (call["type"], call["name"], call["input"], call["actor"]) == (
        "tool_call",
        name,
        value,
        "user",
    )
    assert (result["type"], result["toolCallId"], result["actor"]) == (
        "tool_result",
        call["id"],
        "user",
    )
    assert "output" not in result and result["error"] == problem["detail"] == problem["error"]
    assert (problem["call_seq"], problem["result_seq"]) == (call["seq"], result["seq"])
    return str(result["error"])


def test_content_above_the_log_limit_is_refused_before_anything_is_written(
    workspace: Served,
) -> None:
    refused = workspace.invoke("write_file", {"path": "big.txt", "content": "x" * LOG_LIMIT})
    assert refused.status_code == 413 and refused.json()["limit"] == LOG_LIMIT
    assert "65,536 bytes" in refused.json()["detail"]
    assert not (workspace.root / "big.txt").exists()  # the tool did not run ...
    assert workspace.logged() == []  # ... and nothing is in the log


def test_an_output_too_large_for_the_log_is_logged_as_a_tool_error(workspace: Served) -> None:
    (workspace.root / "wide.txt").write_text("x" * (LOG_LIMIT + 1))  # under the read limit
    value = {"path": "wide.txt"}
    error = _logged_failure(workspace, workspace.invoke("read_file", value), "read_file", value)
    assert error.startswith("the output of 'read_file' cannot be logged: payload is ")
    assert error.endswith(
        f"above the limit of {LOG_LIMIT:,} bytes (max_payload_bytes / AGENTTRAIL_MAX_PAYLOAD_BYTES)"
    )


def test_every_tool_failure_is_logged_and_answered_with_a_422(
    workspace: Served, tmp_path: Path
) -> None:
    (workspace.root / "folder").mkdir()
    (workspace.root / "loop").symlink_to("loop")
    long_name = "n" * 5000
    failures: list[tuple[str, dict[str, Any], str]] = [
        ("read_file", {"path": "a\x00b"}, "path 'a\\x00b' holds a NUL character"),
        ("write_file", {"path": "a\x00b", "content": "x"}, "path 'a\\x00b' holds a NUL character"),
        (
            "write_file",
            {"path": long_name, "content": "x"},
            f"path {long_name[:60]!r}… (5,000 characters): File name too long",
        ),
        (
            "read_file",
            {"path": long_name},
            f"path {long_name[:60]!r}… (5,000 characters): File name too long",
        ),
        ("write_file", {"path": "folder", "content": "x"}, "path 'folder' is a folder, not a file"),
        ("write_file", {"path": ".", "content": "x"}, "path '.' is a folder, not a file"),
        ("read_file", {"path": "folder"}, "no file 'folder' in the workspace"),
        ("read_file", {"path": "loop"}, "path 'loop': Too many levels of symbolic links"),
        (
            "write_file",
            {"path": "t.txt", "content": "\ud800"},
            "content: character 0 is a lone surrogate, which a file cannot hold as UTF-8",
        ),
        (
            "read_file",
            {"path": "../outside.txt"},
            "path '../outside.txt' leads outside the workspace",
        ),
        ("list_dir", {"path": "gone"}, "no folder 'gone' in the workspace"),
    ]
    open_fds = []
    for _ in range(2):  # twice: the second round must leave no descriptor open (the server
        # runs in this process, so its descriptors are in /proc/self/fd)
        for name, value, message in failures:
            error = _logged_failure(workspace, workspace.invoke(name, value), name, value)
            assert error == message, (name, value)
        open_fds.append(len(os.listdir("/proc/self/fd")))
    assert open_fds[1] == open_fds[0]
    assert sorted(p.name for p in workspace.root.iterdir()) == ["folder", "loop"]
    assert len(workspace.logged()) == 2 * 2 * len(failures)


def test_a_hard_link_in_the_workspace_reaches_no_file_outside_it(
    workspace: Served, tmp_path: Path
) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("outside")
    os.link(secret, workspace.root / "linked.txt")
    value = {"path": "linked.txt"}
    error = _logged_failure(workspace, workspace.invoke("read_file", value), "read_file", value)
    assert error == (
        "path 'linked.txt' has 2 hard links: a file with another name may be outside the "
        "workspace, so it is not read"
    )
    wrote = workspace.invoke("write_file", {"path": "linked.txt", "content": "new"})
    assert wrote.status_code == 201 and wrote.json()["output"] == {"path": "linked.txt", "bytes": 3}
    assert secret.read_text() == "outside" and secret.stat().st_nlink == 1  # untouched
    assert (workspace.root / "linked.txt").read_text() == "new"
    read = workspace.invoke("read_file", value)  # the workspace's own file now: it reads
    assert read.status_code == 201 and read.json()["output"]["content"] == "new"
    assert [e["type"] for e in workspace.logged()] == ["tool_call", "tool_result"] * 3


def test_read_file_checks_the_size_before_it_reads(workspace: Served) -> None:
    # A sparse file far above the read limit: the size is known without reading a byte.
    with open(workspace.root / "sparse.bin", "wb") as sparse:
        sparse.truncate(64 * 1024 * 1024)
    value = {"path": "sparse.bin"}
    tracemalloc.start()  # the server runs in this process: its allocations are traced too
    try:
        response = workspace.invoke("read_file", value)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    error = _logged_failure(workspace, response, "read_file", value)
    assert error == (
        f"path 'sparse.bin' is 67,108,864 bytes, above the read limit of {MAX_READ_BYTES:,} "
        "bytes (AGENTTRAIL_MAX_READ_BYTES)"
    )
    assert peak < 8 * 1024 * 1024, f"{peak:,} bytes allocated to refuse the file"


def test_a_tool_that_ran_is_logged_even_when_a_turn_begins_while_it_runs(
    workspace: Served,
) -> None:
    ran = workspace.invoke("touch_then_turn", {"session": "s1"})
    assert (workspace.root / "touched.txt").read_text() == "ran"
    assert ran.status_code == 201, ran.text
    call, result = workspace.logged()
    assert (call["type"], call["name"], result["type"], result["output"]) == (
        "tool_call",
        "touch_then_turn",
        "tool_result",
        {"touched": True},
    )
    assert (ran.json()["call_seq"], ran.json()["result_seq"]) == (call["seq"], result["seq"])
    # The turn now holds the lock: the next call is refused before it runs.
    (workspace.root / "touched.txt").unlink()
    refused = workspace.invoke("touch_then_turn", {"session": "s1"})
    assert refused.status_code == 409 and refused.json()["turn_id"] == "t-agent"
    assert not (workspace.root / "touched.txt").exists() and len(workspace.logged()) == 2


def test_a_folder_swapped_for_a_link_after_the_check_is_not_followed(tmp_path: Path) -> None:
    # The tools resolve a path, check it stays inside, then open it one folder at a time with
    # O_NOFOLLOW. Here "sub" was a folder when the path was checked and is a link out when it
    # is opened: the opening refuses it rather than follow it.
    root = tmp_path / "workspace"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (root / "sub").symlink_to(tmp_path / "outside")
    workspace = Workspace(root)
    with pytest.raises(OSError) as refused, workspace._folder(root.resolve(), ("sub",)):
        pass
    # Linux: O_DIRECTORY | O_NOFOLLOW on a link is ENOTDIR; elsewhere ELOOP.
    assert refused.value.errno in (errno.ENOTDIR, errno.ELOOP)


def test_the_read_limit_is_set_by_its_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "eleven.txt").write_text("x" * 11)
    monkeypatch.setenv("AGENTTRAIL_MAX_READ_BYTES", "10")
    registry = _registry(tmp_path)
    with pytest.raises(ToolError) as refused:
        registry.dispatch("read_file", {"path": "eleven.txt"})
    assert str(refused.value) == (
        "path 'eleven.txt' is 11 bytes, above the read limit of 10 bytes "
        "(AGENTTRAIL_MAX_READ_BYTES)"
    )
    assert ToolRegistry(workspace_tools(tmp_path, max_read_bytes=11)).dispatch(
        "read_file", {"path": "eleven.txt"}
    ) == {"path": "eleven.txt", "content": "x" * 11}
    monkeypatch.setenv("AGENTTRAIL_MAX_READ_BYTES", "ten")
    with pytest.raises(InputError, match=r"^AGENTTRAIL_MAX_READ_BYTES='ten' is not an integer$"):
        workspace_tools(tmp_path)
