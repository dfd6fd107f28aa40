"""Reading a Claude Code transcript's lines into events (the mapping is in the docstring of
:mod:`agenttrail.formats.claude_code`).

:class:`Reader` gives every line its key and time, groups the lines of one API message, and
emits the events in file order; block vocabulary from :mod:`agenttrail.providers.anthropic`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.errors import FormatError
from agenttrail.formats.claude_code._records import (
    Line,
    Record,
    annotation,
    content_of,
    first_line,
    is_api_error,
    is_tool_block,
    message_of,
    own_time,
    str_or_none,
    text_of,
    user_actor,
)
from agenttrail.model import NewEvent, content_text, events
from agenttrail.providers import anthropic

__all__ = ["Reader"]


@dataclass
class Reader:
    """Turns a transcript's lines into events; keys, times and message groups first."""

    path: Path
    lines: list[Line]
    out: list[NewEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    title: str | None = None
    """The first prompt's first line, for the title when there is no summary."""
    started: str | None = None
    """The earliest line timestamp."""
    groups: dict[str, list[Line]] = field(default_factory=dict)
    """``message.id`` → the assistant lines that carry it, in file order."""
    uuids: set[str] = field(default_factory=set)
    """Every line's ``uuid``."""

    def __post_init__(self) -> None:
        self.uuids = {line.uuid for line in self.lines if line.uuid is not None}
        self._assign_keys()
        self._assign_times()
        for line in self.lines:
            if line.type == "assistant" and not is_api_error(line.record):
                msg_id = message_of(self.path, line).get("id")
                if msg_id is not None:
                    self.groups.setdefault(msg_id, []).append(line)

    def read(self) -> None:
        """Turn every line into events, in file order (mapping in the package docstring)."""
        uuids = self.uuids
        for line in self.lines:
            self._check_parent(line, uuids)
            kind = line.type
            if kind == "assistant":
                self._assistant(line)
            elif kind == "user":
                self._user(line)
            else:
                subtype = line.record.get("subtype")
                if kind == "system" and isinstance(subtype, str):
                    kind = f"system:{subtype}"
                self._emit(line, ":record", annotation(kind, data=line.record), line.source)

    # -- keys and times -------------------------------------------------------------------

    def _assign_keys(self) -> None:
        """uuid when unique so far, else ``line<N>``: stable when Claude Code appends lines."""
        seen: set[str] = set()
        for line in self.lines:
            uuid = line.uuid
            if uuid is not None and uuid not in seen:
                line.key = uuid
                seen.add(uuid)
            else:
                line.key = f"line{line.number}" if uuid is None else f"{uuid}@line{line.number}"

    def _assign_times(self) -> None:
        own = [own_time(line.record) for line in self.lines]
        previous: str | None = None
        for line, stamp in zip(self.lines, own, strict=True):
            previous = stamp or previous
            line.created_at = stamp or previous
        following: str | None = None
        for line, stamp in zip(reversed(self.lines), reversed(own), strict=True):
            following = stamp or following
            line.created_at = line.created_at or following
        self.started = min((s for s in own if s is not None), default=None)

    # -- records ----------------------------------------------------------------------------

    def _check_parent(self, line: Line, uuids: set[str]) -> None:
        parent = line.record.get("parentUuid")
        if parent is None:
            return
        if not isinstance(parent, str):
            raise self._error(line, "expected a string or null", "parentUuid")
        if parent in uuids:
            return
        text = (
            f"{self.path.name}:{line.number}: parentUuid {parent!r} names no line of this "
            "file; kept in file order"
        )
        self.warnings.append(text)
        self._emit(line, ":parent", annotation("import_warning", text=text), line.source)

    def _assistant(self, line: Line) -> None:
        message = message_of(self.path, line)
        if is_api_error(line.record):
            self._api_error(line, message)
            return
        msg_id = message.get("id")
        group = self.groups[msg_id] if msg_id is not None else [line]
        if group[0] is not line:
            return  # emitted with the group's first line
        blocks: list[Record] = []
        tools: list[tuple[Line, int, Record]] = []
        parts: list[tuple[str, int | str]] = []  # the order across all the group's lines
        for part in group:
            content = content_of(self.path, part)
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            for index, block in enumerate(content):
                if is_tool_block(block):
                    tools.append((part, index, block))
                    ref = (
                        "toolCall" if block["type"] in anthropic.TOOL_CALL_BLOCKS else "toolResult"
                    )
                    tool_id = block.get("id" if ref == "toolCall" else "tool_use_id")
                    parts.append((ref, tool_id if isinstance(tool_id, str) else ""))
                else:
                    parts.append(("block", len(blocks)))
                    blocks.append(block)
        order = events.block_order(parts)
        text, kept = text_of(blocks) if blocks else ("", None)
        if order is not None:
            kept = blocks  # the order refers to the blocks by index
        source: dict[str, Any]
        if len(group) == 1:
            source = line.source
        else:
            source = {"lines": [p.number for p in group], "uuids": [p.uuid for p in group]}
        payload = events.message(
            "assistant",
            text,
            meta=self._meta(group),
            blocks=kept,
            order=order,
            messageId=msg_id,
            requestId=str_or_none(line.record.get("requestId")),
        )
        # The key names every line merged in: when a live transcript is imported mid-message
        # and again once the message is whole, the whole message is written (after the part
        # seen first, which stays: the log is append-only) instead of being skipped as already
        # present. Readers show the two as one (agenttrail.model.parts, docs/log-format.md,
        # Reading a session); the tool calls are keyed by their own line, so written once.
        # surrogatepass: a record's id may hold a lone surrogate (JSON allows "\ud800"); the
        # key is still one per group, and the store refuses such an id with an InputError.
        joined = "\0".join(p.key for p in group).encode("utf-8", "surrogatepass")
        merged = hashlib.sha256(joined).hexdigest()[:16]
        suffix = ":message" if len(group) == 1 else f":message:{merged}"
        self._emit(line, suffix, payload, source)
        for part, index, block in tools:
            self._emit(part, f":{index}", self._tool_block(part, index, block, msg_id), part.source)

    def _meta(self, group: list[Line]) -> dict[str, Any]:
        """Meta of a merged message; usage from the line with the largest ``output_tokens``."""
        best: tuple[Line, Record] | None = None
        best_output = -1
        model: str | None = None
        for part in group:
            message = message_of(self.path, part)
            if model is None:
                model = str_or_none(message.get("model"))
            usage = message.get("usage")
            if usage is None:
                continue
            if not isinstance(usage, dict):
                raise self._error(part, "expected an object", "message.usage")
            output = self._count(part, usage, "output_tokens")
            output = -1 if output is None else output
            if best is None or output > best_output:
                best, best_output = (part, usage), output
        counts, raw = None, None
        if best is not None:
            part, usage = best
            counts = events.usage(
                input=self._count(part, usage, "input_tokens"),
                output=self._count(part, usage, "output_tokens"),
                cache_read=self._count(part, usage, "cache_read_input_tokens"),
                cache_write=self._count(part, usage, "cache_creation_input_tokens"),
            )
            raw = usage
        return events.meta(
            model=model,
            provider="anthropic",
            usage=counts,
            usage_raw=raw,
            location="remote",
        )

    def _count(self, line: Line, usage: Record, name: str) -> int | None:
        """A token count of ``usage``; ``None`` when not reported (a reported 0 stays 0)."""
        value = usage.get(name)
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self._error(line, "expected an integer token count", f"message.usage.{name}")
        return value

    def _tool_block(self, line: Line, index: int, block: Record, msg_id: str | None) -> Record:
        field_name = f"message.content[{index}]"
        if block["type"] in anthropic.TOOL_CALL_BLOCKS:
            call_id = block.get("id", "")
            name = block.get("name", "")
            if not isinstance(call_id, str) or not isinstance(name, str):
                raise self._error(line, "expected string id and name", field_name)
            return events.tool_call(
                call_id,
                name,
                block.get("input"),
                messageId=msg_id,
                caller=block.get("caller"),
                server=True if block["type"] in anthropic.SERVER_TOOL_CALL_BLOCKS else None,
            )
        # a tool result inside an assistant message: a server tool's (web_search_tool_result)
        return self._tool_result(
            line, block, field_name, server=block["type"] != anthropic.TOOL_RESULT_BLOCK
        )

    def _tool_result(
        self, line: Line, block: Record, field_name: str, *, server: bool = False
    ) -> Record:
        call_id = block.get("tool_use_id")
        if call_id is not None and not isinstance(call_id, str):
            raise self._error(line, "expected a string", f"{field_name}.tool_use_id")
        extra: dict[str, Any] = {}
        if "is_error" in block:
            extra["is_error"] = block["is_error"]
        if "toolUseResult" in line.record and not server:
            extra["toolUseResult"] = line.record["toolUseResult"]
        if server:
            extra["server"] = True
            extra["resultType"] = block["type"]
        return events.tool_result(call_id, output=block.get("content"), **extra)

    def _api_error(self, line: Line, message: Record) -> None:
        content = content_of(self.path, line)
        text = content_text(content)
        status = line.record.get("apiErrorStatus")
        kind = line.record.get("error")
        payload = events.error(
            text,
            code=status if isinstance(status, int) and not isinstance(status, bool) else None,
            errorType=kind,
            messageId=str_or_none(message.get("id")),
        )
        self._emit(line, ":error", payload, line.source)

    def _user(self, line: Line) -> None:
        content = content_of(self.path, line)
        if isinstance(content, str):
            self._user_message(line, content, None, index=0, has_results=False)
            return
        has_results = any(block["type"] == anthropic.TOOL_RESULT_BLOCK for block in content)
        run: list[Record] = []
        run_start = 0
        for index, block in enumerate(content):
            if block["type"] != anthropic.TOOL_RESULT_BLOCK:
                run_start = index if not run else run_start
                run.append(block)
                continue
            if run:
                self._user_message(line, *text_of(run), index=run_start, has_results=True)
                run = []
            result = self._tool_result(line, block, f"message.content[{index}]")
            self._emit(line, f":{index}", result, line.source)
        if run or not content:
            self._user_message(line, *text_of(run), index=run_start, has_results=has_results)

    def _user_message(
        self,
        line: Line,
        text: str,
        blocks: list[Record] | None,
        *,
        index: int,
        has_results: bool,
    ) -> None:
        """One user-role message: a string content, or a run of blocks that are not results."""
        actor = user_actor(line.record, text)
        if actor != events.Actor.SYSTEM.value and self.title is None and text.strip():
            self.title = first_line(text)
        extra: dict[str, Any] = {}
        if "toolUseResult" in line.record and not has_results:
            extra["toolUseResult"] = line.record["toolUseResult"]
        payload = events.message("user", text, actor=actor, blocks=blocks, **extra)
        self._emit(line, f":{index}", payload, line.source)

    # -- output -----------------------------------------------------------------------------

    def _emit(self, line: Line, suffix: str, payload: Record, source: dict[str, Any]) -> None:
        payload.update((k, v) for k, v in line.sidechain_fields.items() if v is not None)
        payload["source"] = source
        self.out.append(NewEvent(payload, line.created_at, f"{line.key}{suffix}"))

    def _error(self, line: Line, message: str, field_name: str) -> FormatError:
        return FormatError(message, path=str(self.path), line=line.number, field=field_name)
