"""The symmetric half: tools the user can run, through the dispatchers the agent's calls use.

docs/specs.md, The symmetric half: "The user can run the same tools the agent calls (read,
write, call), with forms generated from each tool's JSON Schema. The call and its result land
on the log as ``actor: user`` events." A :class:`Tool` is a name, a description, the JSON
Schema of its input and a dispatcher. The registry holds the built-in workspace tools
(``read_file``, ``write_file``, ``list_dir``, confined to a workspace root) and any tool a
package offers through the ``agenttrail.tools`` entry point group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import jsonschema

from agenttrail.errors import InputError, ToolError
from agenttrail.limits import byte_limit
from agenttrail.server.workspace import Workspace

__all__ = [
    "ENTRY_POINT_GROUP",
    "MAX_READ_BYTES",
    "Tool",
    "ToolRegistry",
    "read_limit",
    "workspace_tools",
]

ENTRY_POINT_GROUP = "agenttrail.tools"
"""Entry point group of extra tools: each entry point is a callable ``(workspace) -> Tool``."""

MAX_READ_BYTES = 1024 * 1024
"""Largest file ``read_file`` returns by default (bytes): a user's palette is not a bulk
transfer. ``AGENTTRAIL_MAX_READ_BYTES`` sets another (:func:`read_limit`)."""


@dataclass(frozen=True)
class Tool:
    """A tool anyone in the session can call: agent or user."""

    name: str
    description: str
    input_schema: dict[str, Any]
    """JSON Schema (draft 2020-12) of the input; the palette builds its form from it."""
    dispatch: Callable[[dict[str, Any]], Any]
    """Runs the tool on a validated input and returns its output (JSON-shaped)."""

    def validate(self, value: Any) -> None:
        """Check an input against the schema; :class:`InputError` names the field."""
        validator = jsonschema.Draft202012Validator(self.input_schema)
        error = jsonschema.exceptions.best_match(validator.iter_errors(value))
        if error is not None:
            where = "/".join(str(p) for p in error.absolute_path) or "(input)"
            raise InputError(f"input field {where}: {error.message}")


class ToolRegistry:
    """Tools by name, for the agent's calls and the user's alike."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.add(tool)

    def add(self, tool: Tool) -> None:
        """Register a tool (a second tool with the same name replaces the first)."""
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool:
        """The tool, or :class:`InputError` naming the ones there are."""
        try:
            return self._tools[name]
        except KeyError:
            raise InputError(
                f"no tool {name!r} (tools: {', '.join(sorted(self._tools))})"
            ) from None

    def __iter__(self) -> Any:
        return iter(sorted(self._tools.values(), key=lambda t: t.name))

    def dispatch(self, name: str, value: Mapping[str, Any]) -> Any:
        """Validate and run a tool: the one path every call takes, the agent's or the user's."""
        tool = self.get(name)
        tool.validate(dict(value))
        return tool.dispatch(dict(value))

    @classmethod
    def with_entry_points(cls, workspace: Path) -> ToolRegistry:
        """The built-in workspace tools plus every ``agenttrail.tools`` entry point."""
        registry = cls(workspace_tools(workspace))
        for point in entry_points(group=ENTRY_POINT_GROUP):
            registry.add(point.load()(workspace))
        return registry


def read_limit(max_read_bytes: int | None = None) -> int:
    """The largest file ``read_file`` returns (bytes): the argument, else
    ``AGENTTRAIL_MAX_READ_BYTES``, else :data:`MAX_READ_BYTES`.

    Raises:
        InputError: the limit is not a positive integer.
    """
    return byte_limit(max_read_bytes, "AGENTTRAIL_MAX_READ_BYTES", MAX_READ_BYTES, "read limit")


def workspace_tools(root: Path, *, max_read_bytes: int | None = None) -> list[Tool]:
    """``read_file``, ``write_file`` and ``list_dir``, confined to ``root``
    (:class:`~agenttrail.server.workspace.Workspace` says how).

    Args:
        root: the workspace folder.
        max_read_bytes: the largest file ``read_file`` returns (:func:`read_limit`).

    Raises:
        InputError: the read limit is not a positive integer.
    """
    workspace = Workspace(root)
    limit = read_limit(max_read_bytes)
    path_schema = {"type": "string", "minLength": 1, "description": "Path inside the workspace."}

    def read_file(value: dict[str, Any]) -> dict[str, Any]:
        data = workspace.read_bytes(value["path"], limit=limit)
        return {"path": value["path"], "content": data.decode("utf-8", "replace")}

    def write_file(value: dict[str, Any]) -> dict[str, Any]:
        try:
            data = value["content"].encode("utf-8")
        except UnicodeEncodeError as e:  # JSON text may hold a lone surrogate ("\ud800")
            raise ToolError(
                f"content: character {e.start} is a lone surrogate, which a file cannot hold "
                "as UTF-8"
            ) from None
        workspace.write_bytes(value["path"], data)
        return {"path": value["path"], "bytes": len(data)}

    def list_dir(value: dict[str, Any]) -> dict[str, Any]:
        path = value.get("path") or "."
        return {"path": path, "entries": workspace.entries(path)}

    return [
        Tool(
            "read_file",
            "Read a text file in the workspace.",
            {
                "type": "object",
                "properties": {"path": path_schema},
                "required": ["path"],
                "additionalProperties": False,
            },
            read_file,
        ),
        Tool(
            "write_file",
            "Write a text file in the workspace (creating folders as needed).",
            {
                "type": "object",
                "properties": {"path": path_schema, "content": {"type": "string"}},
                "required": ["path", "content"],
                "additionalProperties": False,
            },
            write_file,
        ),
        Tool(
            "list_dir",
            "List a folder in the workspace.",
            {
                "type": "object",
                "properties": {"path": path_schema},
                "additionalProperties": False,
            },
            list_dir,
        ),
    ]
