"""Check a message list against the providers' documented structural rules.

:func:`validate` is re-exported by :mod:`agenttrail.replay`. It checks structure only (roles,
tool call / result adjacency and order, non-empty content, id shape and uniqueness), never
what a model or tool said, and it does not call any API. Each rule names its source: the
provider's documentation, or the exact text of the HTTP 400 the API returns for it (quoted
from public bug reports where the documentation states no rule). ``docs/replay.md`` lists
them all.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from agenttrail.errors import InputError
from agenttrail.providers import anthropic, openai

__all__ = ["PROVIDERS", "Violation", "validate"]

PROVIDERS = ("openai", "anthropic", "responses")
"""Replay and validation targets: OpenAI Chat Completions, Anthropic Messages, OpenAI
Responses."""


@dataclass(frozen=True)
class Violation:
    """One broken rule, and where."""

    index: int
    """Position of the message (or Responses input item) in the list given, 0-based; ``-1``
    for the list as a whole."""
    block: int | None
    """Position within that message: its content block, or its ``tool_calls`` entry (OpenAI
    Chat); ``None`` for the message itself or a string content."""
    rule: str
    """A stable code (``tool_result_without_tool_use``, ``empty_content``, …)."""
    message: str
    """One line, in the provider's words where it has some."""
    provider_path: str
    """Where the provider's error names it: ``messages.0.content.1`` (Anthropic, after it
    combines consecutive same-role messages), ``messages[3].tool_calls[0]``, ``input[2]``."""

    def __str__(self) -> str:
        return f"{self.provider_path}: {self.message}"


def validate(
    messages: Sequence[Any], provider: str, *, previous_response_id: str | None = None
) -> list[Violation]:
    """The structural rules ``messages`` breaks for ``provider``; ``[]`` when it is valid.

    Rules, by provider (codes in brackets):

    ``openai`` (Chat Completions, https://platform.openai.com/docs/api-reference/chat/create
    and https://platform.openai.com/docs/guides/function-calling):
        - a ``tool`` message answers a ``tool_calls`` id of the assistant message right before
          its run of tool messages [tool_without_call] ("messages with role 'tool' must be a
          response to a preceeding message with 'tool_calls'", API error);
        - every ``tool_calls`` id is answered in that run [tool_call_without_result] ("An
          assistant message with 'tool_calls' must be followed by tool messages responding to
          each 'tool_call_id'", API error), once [duplicate_tool_result];
        - tool calls have a non-empty unique ``id``, a ``function`` with string ``name`` and
          ``arguments`` [tool_call_shape, duplicate_tool_call_id], and the arguments are JSON
          text [arguments_not_json] ("The arguments to call the function with, as generated
          by the model in JSON format", ``function.arguments``; the replay of a call whose
          recorded arguments never were JSON, e.g. a stream cut short, breaks it);
        - user, system, developer and tool messages have ``content`` ("Required") and, by the
          replay rule, not an empty one [empty_content]; an assistant message has content or
          tool calls (docs/replay.md: never an empty assistant message) [empty_assistant];
        - roles are system, developer, user, assistant, tool, function [unknown_role].

    ``anthropic`` (Messages, https://platform.claude.com/docs/en/api/messages). Consecutive
    same-role messages are checked as one turn, as the API combines them ("Consecutive user
    or assistant turns in your request will be combined into a single turn"):
        - roles are user and assistant [unknown_role]; the system prompt is the top-level
          ``system`` parameter [system_role];
        - each ``tool_result`` answers a ``tool_use`` of the assistant turn right before
          [tool_result_without_tool_use] ("unexpected `tool_use_id` found in `tool_result`
          blocks: … Each `tool_result` block must have a corresponding `tool_use` block in the
          previous message", API error), once [duplicate_tool_result], and the results come
          first in the user turn [tool_result_not_first] ("the tool_result blocks must come
          FIRST in the content array. Any text must come AFTER all tool results",
          https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls);
        - every ``tool_use`` is answered in the next user turn [tool_use_without_result]
          ("`tool_use` ids were found without `tool_result` blocks immediately after", API
          error); tool_use blocks only in assistant turns and tool_result blocks only in user
          turns [tool_use_in_user, tool_result_in_assistant];
        - tool ids are unique in the conversation [duplicate_tool_use_id] ("`tool_use` ids
          must be unique", API error, https://github.com/anthropics/claude-code/issues/28515)
          and match ``^[a-zA-Z0-9_-]+$`` [tool_use_id_pattern];
        - every message has non-empty content except a final assistant message
          [empty_content] ("all messages must have non-empty content except for the optional
          final assistant message", API error); text blocks hold non-whitespace text
          [empty_text_block] ("text content blocks must contain non-whitespace text", API
          error, https://github.com/anthropics/claude-code/issues/23440); blocks are objects
          with a string ``type`` [block_shape].

    ``responses`` (https://platform.openai.com/docs/api-reference/responses/create):
        - every call item (``function_call``, ``custom_tool_call``, …) has a later output with
          its ``call_id`` [call_without_output] ("No tool output found for function call …",
          API error), once [duplicate_output];
        - every output answers an earlier call item [output_without_call] ("No tool call found
          for function call output with call_id …", API error), unless the input continues a
          stored response (``previous_response_id``), whose calls are not in the list;
        - call ids are non-empty and unique, function calls have string ``name`` and
          ``arguments`` [call_shape, duplicate_call_id] that are JSON text
          [arguments_not_json] ("A JSON string of the arguments to pass to the function",
          ``function_call`` item); message items have a known role
          [unknown_role] and non-empty content [empty_content, empty_assistant].

    All providers: the list is not empty [empty_request] (OpenAI and Anthropic require at
    least one message; a Responses input may be empty only when it continues a response),
    and each entry is an object [not_an_object].

    Args:
        messages: the list sent as ``messages`` (or Responses ``input`` items).
        provider: ``openai``, ``anthropic`` or ``responses``.
        previous_response_id: Responses only: the stored response the input continues.

    Returns:
        The violations, in list order.

    Raises:
        InputError: an unknown provider, or ``messages`` is not a list.
    """
    if provider not in PROVIDERS:
        raise InputError(f"unknown provider {provider!r} (use {', '.join(PROVIDERS)})")
    if not isinstance(messages, list | tuple):
        raise InputError(f"expected a list of messages, not {type(messages).__name__}")
    if provider == "openai":
        return _Chat(list(messages)).check()
    if provider == "anthropic":
        return _Anthropic(list(messages)).check()
    return _Responses(list(messages), previous_response_id is not None).check()


def _empty(content: Any) -> bool:
    return content is None or content == "" or content == []


_NOT_JSON = "function arguments must be a JSON string (the arguments to call the function with)"


def _json(text: str) -> bool:
    """``text`` parses as JSON, as the API's JSON-string arguments must."""
    try:
        json.loads(text)
    except (ValueError, RecursionError):
        return False
    return True


class _Chat:
    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.out: list[Violation] = []
        self.expected: dict[str, tuple[int, int]] = {}
        """Open run of tool messages: call id → (assistant index, call position)."""
        self.answered: set[str] = set()

    def add(self, index: int, block: int | None, rule: str, message: str) -> None:
        path = f"messages[{index}]" if index >= 0 else "messages"
        if block is not None:
            path += f".tool_calls[{block}]"
        self.out.append(Violation(index, block, rule, message, path))

    def close_run(self) -> None:
        for call_id, (index, block) in self.expected.items():
            if call_id not in self.answered:
                self.add(
                    index,
                    block,
                    "tool_call_without_result",
                    "An assistant message with 'tool_calls' must be followed by tool messages "
                    f"responding to each 'tool_call_id'; no response for {call_id}",
                )
        self.expected, self.answered = {}, set()

    def check(self) -> list[Violation]:
        if not self.messages:
            self.add(-1, None, "empty_request", "messages must hold at least one message")
        in_run = False
        for i, message in enumerate(self.messages):
            if not isinstance(message, dict):
                self.close_run()
                in_run = False
                self.add(i, None, "not_an_object", "a message must be an object")
                continue
            role = message.get("role")
            if role == "tool":
                self.tool(i, message, in_run)
                continue
            self.close_run()
            in_run = False
            if role == "assistant":
                in_run = self.assistant(i, message)
            elif role in openai.CHAT_ROLES:
                if role != "function" and _empty(message.get("content")):
                    self.add(i, None, "empty_content", f"a {role} message needs content")
            else:
                self.add(i, None, "unknown_role", f"unknown role {role!r}")
        self.close_run()
        return self.out

    def tool(self, i: int, message: dict[str, Any], in_run: bool) -> None:
        call_id = message.get("tool_call_id")
        if not in_run or call_id not in self.expected:
            self.add(
                i,
                None,
                "tool_without_call",
                "messages with role 'tool' must be a response to a preceding message with "
                f"'tool_calls' (tool_call_id {call_id!r})",
            )
        elif call_id in self.answered:
            self.add(i, None, "duplicate_tool_result", f"a second tool message for {call_id}")
        else:
            self.answered.add(call_id)
        if message.get("content") is None:
            self.add(i, None, "empty_content", "a tool message needs content")

    def assistant(self, i: int, message: dict[str, Any]) -> bool:
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            self.add(i, None, "tool_call_shape", "tool_calls must be a list")
            calls = None
        has_other = any(
            not _empty(message.get(k)) for k in ("content", "refusal", "function_call", "audio")
        )
        if not calls and not has_other:
            self.add(
                i, None, "empty_assistant", "an assistant message with no content and no tool calls"
            )
        for j, call in enumerate(calls or []):
            call_id = call.get("id") if isinstance(call, dict) else None
            if not isinstance(call_id, str) or not call_id:
                self.add(i, j, "tool_call_shape", "a tool call needs a non-empty string id")
                continue
            if call_id in self.expected:
                self.add(i, j, "duplicate_tool_call_id", f"tool call id {call_id} is repeated")
                continue
            self.expected[call_id] = (i, j)
            kind = call.get("type", "function")
            spec = call.get(kind) if isinstance(kind, str) else None
            if kind == "function" and not (
                isinstance(spec, dict)
                and isinstance(spec.get("name"), str)
                and isinstance(spec.get("arguments"), str)
            ):
                self.add(
                    i,
                    j,
                    "tool_call_shape",
                    "a function call needs function.name and function.arguments strings",
                )
            elif kind == "function" and isinstance(spec, dict) and not _json(spec["arguments"]):
                self.add(i, j, "arguments_not_json", _NOT_JSON)
        return bool(self.expected)


class _Anthropic:
    def __init__(self, messages: list[Any]) -> None:
        self.messages = messages
        self.out: list[Violation] = []
        self.turn_of: dict[int, tuple[int, int]] = {}
        """Message index → (turn number, offset of its first block in the turn)."""
        self.ids: set[str] = set()

    def add(self, index: int, block: int | None, rule: str, message: str) -> None:
        if index < 0:
            path = "messages"
        else:
            turn, offset = self.turn_of.get(index, (index, 0))
            path = f"messages.{turn}"
            if block is not None:
                path += f".content.{offset + block}"
        self.out.append(Violation(index, block, rule, message, path))

    def turns(self) -> list[tuple[str, list[tuple[int, int | None, dict[str, Any]]]]]:
        """Consecutive same-role messages combined: ``(role, [(index, block, block)])``;
        a string content is one text block with position ``None``."""
        turns: list[tuple[str, list[tuple[int, int | None, dict[str, Any]]]]] = []
        for i, message in enumerate(self.messages):
            if not isinstance(message, dict):
                self.add(i, None, "not_an_object", "a message must be an object")
                continue
            role = message.get("role")
            if role == "system":
                self.add(
                    i, None, "system_role", "the system prompt goes in the top-level system field"
                )
                continue
            if role not in ("user", "assistant"):
                self.add(i, None, "unknown_role", f"unexpected role {role!r}")
                continue
            content = message.get("content")
            blocks: list[tuple[int, int | None, dict[str, Any]]] = []
            if isinstance(content, str) and content:
                blocks.append((i, None, {"type": "text", "text": content}))
            elif isinstance(content, list):
                for j, block in enumerate(content):
                    if isinstance(block, dict) and isinstance(block.get("type"), str):
                        blocks.append((i, j, block))
                    else:
                        self.add(i, j, "block_shape", "a content block needs a string type")
            if not turns or turns[-1][0] != role:
                turns.append((role, []))
            self.turn_of[i] = (len(turns) - 1, len(turns[-1][1]))
            final_assistant = role == "assistant" and i == len(self.messages) - 1
            if _empty(content) and not final_assistant:
                self.add(
                    i,
                    None,
                    "empty_content",
                    "all messages must have non-empty content except for the optional final "
                    "assistant message",
                )
            turns[-1][1].extend(blocks)
        return turns

    def check(self) -> list[Violation]:
        if not self.messages:
            self.add(-1, None, "empty_request", "messages must hold at least one message")
        previous: dict[str, tuple[int, int | None]] = {}
        """tool_use ids of the assistant turn before → where they are."""
        for role, blocks in self.turns():
            for i, j, block in blocks:
                self.block(role, i, j, block)
            if role == "assistant":  # turns alternate: the one before was a user turn
                previous = {
                    b["id"]: (i, j)
                    for i, j, b in blocks
                    if b["type"] in anthropic.CLIENT_TOOL_CALL_BLOCKS
                    and isinstance(b.get("id"), str)
                }
            else:
                answered = self.results(blocks, previous)
                self.unanswered(
                    {k: v for k, v in previous.items() if k not in answered},
                    "no tool_result for it in the next message",
                )
                previous = {}
        self.unanswered(previous, "no user message after it")
        return sorted(self.out, key=lambda v: (v.index, -1 if v.block is None else v.block))

    def block(self, role: str, i: int, j: int | None, block: dict[str, Any]) -> None:
        kind = block["type"]
        if kind == "text":
            text = block.get("text")
            if not isinstance(text, str) or not text.strip():
                self.add(
                    i,
                    j,
                    "empty_text_block",
                    "text content blocks must contain non-whitespace text",
                )
        elif kind in anthropic.TOOL_CALL_BLOCKS:
            if role != "assistant":
                self.add(i, j, "tool_use_in_user", f"a {kind} block in a user message")
            call_id = block.get("id")
            if not isinstance(call_id, str) or not anthropic.TOOL_ID.fullmatch(call_id):
                self.add(
                    i,
                    j,
                    "tool_use_id_pattern",
                    f"tool_use id {call_id!r} must match ^{anthropic.TOOL_ID.pattern}$",
                )
            elif call_id in self.ids:
                self.add(i, j, "duplicate_tool_use_id", "`tool_use` ids must be unique")
            else:
                self.ids.add(call_id)
        elif kind == anthropic.TOOL_RESULT_BLOCK and role != "user":
            self.add(i, j, "tool_result_in_assistant", "a tool_result block in an assistant turn")

    def results(
        self,
        blocks: list[tuple[int, int | None, dict[str, Any]]],
        previous: dict[str, tuple[int, int | None]],
    ) -> set[str]:
        answered: set[str] = set()
        other_first = False
        for i, j, block in blocks:
            if block["type"] != anthropic.TOOL_RESULT_BLOCK:
                other_first = True
                continue
            call_id = block.get("tool_use_id")
            if not isinstance(call_id, str) or call_id not in previous:
                self.add(
                    i,
                    j,
                    "tool_result_without_tool_use",
                    f"unexpected `tool_use_id` found in `tool_result` blocks: {call_id}. Each "
                    "`tool_result` block must have a corresponding `tool_use` block in the "
                    "previous message.",
                )
            elif call_id in answered:
                self.add(i, j, "duplicate_tool_result", f"a second tool_result for {call_id}")
            else:
                answered.add(call_id)
                if other_first:
                    self.add(
                        i,
                        j,
                        "tool_result_not_first",
                        "tool_result blocks must come first in the user message, before any "
                        "other content",
                    )
        return answered

    def unanswered(self, calls: dict[str, tuple[int, int | None]], why: str) -> None:
        for call_id, (i, j) in calls.items():
            self.add(
                i,
                j,
                "tool_use_without_result",
                f"`tool_use` ids were found without `tool_result` blocks immediately after: "
                f"{call_id} ({why})",
            )


class _Responses:
    def __init__(self, items: list[Any], continued: bool) -> None:
        self.items = items
        self.continued = continued
        self.out: list[Violation] = []

    def add(self, index: int, rule: str, message: str) -> None:
        path = f"input[{index}]" if index >= 0 else "input"
        self.out.append(Violation(index, None, rule, message, path))

    def check(self) -> list[Violation]:
        if not self.items and not self.continued:
            self.add(-1, "empty_request", "input must hold at least one item")
        calls: dict[str, int] = {}
        answered: set[str] = set()
        for i, item in enumerate(self.items):
            if not isinstance(item, dict):
                self.add(i, "not_an_object", "an input item must be an object")
                continue
            kind = item.get("type")
            if kind is None or kind == "message":
                self.message(i, item)
            elif openai.is_output_item(kind):
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or (call_id not in calls and not self.continued):
                    self.add(
                        i,
                        "output_without_call",
                        f"No tool call found for function call output with call_id {call_id}.",
                    )
                elif call_id in answered:
                    self.add(i, "duplicate_output", f"a second output for call_id {call_id}")
                else:
                    answered.add(call_id)
            elif "call_id" in item:
                call_id = item.get("call_id")
                if not isinstance(call_id, str) or not call_id:
                    self.add(i, "call_shape", "a call item needs a non-empty call_id")
                    continue
                if call_id in calls:
                    self.add(i, "duplicate_call_id", f"call_id {call_id} is repeated")
                    continue
                calls[call_id] = i
                if kind == "function_call" and not (
                    isinstance(item.get("name"), str) and isinstance(item.get("arguments"), str)
                ):
                    self.add(i, "call_shape", "a function_call needs name and arguments strings")
                elif kind == "function_call" and not _json(item["arguments"]):
                    self.add(i, "arguments_not_json", _NOT_JSON)
        for call_id, i in calls.items():
            if call_id not in answered:
                self.add(
                    i, "call_without_output", f"No tool output found for function call {call_id}."
                )
        return sorted(self.out, key=lambda v: v.index)

    def message(self, i: int, item: dict[str, Any]) -> None:
        role = item.get("role")
        if role not in openai.RESPONSES_ROLES:
            self.add(i, "unknown_role", f"unknown role {role!r}")
        elif _empty(item.get("content")):
            rule = "empty_assistant" if role == "assistant" else "empty_content"
            self.add(i, rule, f"a {role} message needs content")
