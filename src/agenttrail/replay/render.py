"""Rendering a replay plan as one provider's messages (see :mod:`agenttrail.replay`).

One :class:`Renderer` method per target and per kind of plan item: ``chat*`` for OpenAI Chat
Completions, ``anthropic*`` / ``tool_use`` for Anthropic Messages, ``responses*`` for the
OpenAI Responses API. Each rule is cited in the public function's docstring in
:mod:`agenttrail.replay` and in ``docs/replay.md``; the methods add a :class:`Note` for every
thing they leave out or fill in.
"""

from __future__ import annotations

import html
from dataclasses import dataclass, field
from typing import Any

from agenttrail.codec import json_line
from agenttrail.model import Event, content_text, failed, output_text, tool_status
from agenttrail.replay.plan import AssistantTurn, Call, Note, Plan, SystemItem, UserItem

__all__ = ["PLACEHOLDER", "Message", "Renderer", "ResponseMark"]

PLACEHOLDER = (
    "[agenttrail] no result recorded for this call: it may still be running, "
    "or its result was never logged"
)
"""The result sent for a call the log has no result for (the log spec: "still-running children
given honest placeholders", docs/specs.md). The same text for every provider, so a reader can
search for it."""


_TEXT_TYPES = frozenset({"text", "input_text", "output_text"})
"""Content block / part types that carry ``text`` (Anthropic, Chat Completions, Responses)."""

_ANTHROPIC_USER_BLOCKS = frozenset({"image", "document", "search_result", "container_upload"})
"""User content block types the Messages API takes besides text
(https://platform.claude.com/docs/en/api/messages)."""

_ANTHROPIC_ASSISTANT_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""Assistant block types sent back verbatim besides text and tool blocks (extended thinking:
https://platform.claude.com/docs/en/build-with-claude/extended-thinking)."""

_CHAT_USER_PARTS = frozenset({"image_url", "input_audio", "file"})
"""User content part types of Chat Completions besides text
(https://platform.openai.com/docs/api-reference/chat/create)."""

_RESPONSES_USER_PARTS = frozenset({"input_image", "input_file", "input_audio"})
"""Input content types of the Responses API besides ``input_text``
(https://platform.openai.com/docs/api-reference/responses/create)."""

_RESPONSES_ITEMS = frozenset(
    {
        "message",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
"""Responses output items (kept by the OpenAI importer as ``blocks``) that are sent back as
input items verbatim."""

_CUSTOM = frozenset({"custom", "custom_tool_call"})
"""``toolType`` of a custom (free-text) tool call: Chat ``custom``, Responses
``custom_tool_call`` (https://platform.openai.com/docs/guides/function-calling)."""

Message = dict[str, Any]
"""One message, block or input item: a JSON-ready mapping."""


def _text(payload: dict[str, Any]) -> str:
    return content_text(payload.get("content"))


def _blocks(payload: dict[str, Any]) -> list[Any] | None:
    blocks = payload.get("blocks")
    return blocks if isinstance(blocks, list) else None


def _block_text(block: Any) -> str | None:
    if isinstance(block, dict) and block.get("type") in _TEXT_TYPES:
        text = block.get("text")
        return text if isinstance(text, str) else None
    return None


def _type_of(block: Any) -> str:
    kind = block.get("type") if isinstance(block, dict) else None
    return kind if isinstance(kind, str) else type(block).__name__


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


@dataclass(frozen=True)
class ResponseMark:
    """Where a recorded Responses response ends in the replayed input items."""

    index: int
    """Index of the first item after the response's own items (its calls' outputs, which
    answer it, come after)."""
    last_seq: int
    """The seq of the response's last event (message or call)."""
    call_seqs: frozenset[int]
    """Seqs of the response's calls (their outputs, placeholders included, come after)."""


@dataclass
class Renderer:
    """Turns a :class:`Plan` into one provider's messages, adding notes as it goes."""

    planned: Plan
    notes: list[Note] = field(default_factory=list)

    def note(self, event: Event | None, kind: str, text: str) -> None:
        self.notes.append(Note(event.seq if event is not None else None, kind, text))

    def finish(self, messages: list[Message]) -> tuple[Note, ...]:
        """Every note of the plan and the rendering, in seq order (whole-replay notes last)."""
        if not messages:
            self.note(None, "empty", "nothing to send: no message in the replayed events")
        notes = sorted(
            [*self.planned.notes, *self.notes],
            key=lambda n: (n.seq is None, n.seq or 0),
        )
        return tuple(notes)

    # -- shared pieces

    def placeholder(self, call: Call) -> None:
        self.note(
            call.event,
            "placeholder",
            f"call {call.id!r} ({call.name}) has no result recorded: a placeholder result was sent",
        )

    def left_out(self, call: Call, why: str) -> None:
        tail = f"; its result (seq {call.result.seq}) neither" if call.result else ""
        self.note(call.event, "call_not_sent", f"call {call.id!r} ({call.name}) {why}{tail}")

    def context_text(self, item: UserItem, provider: str) -> str | None:
        """The text of a user-side item that is not the user's own words, or ``None`` when
        there is nothing to send (noted)."""
        payload = item.event.payload
        if item.kind == "action":
            call_id = payload.get("id")
            name = payload.get("name")
            self.note(item.event, "user_action", "tool the user ran, sent as <user_action>")
            return (
                f'<user_action id="{_attr(str(call_id or ""))}" tool="{_attr(str(name or ""))}">'
                f"\n{json_line(payload.get('input'))}\n</user_action>"
            )
        if item.kind == "action_result":
            call = item.call.payload if item.call is not None else {}
            name = payload.get("name") or call.get("name") or ""
            status = tool_status(payload)
            self.note(
                item.event,
                "user_action",
                "result of a tool the user ran, sent as <user_action_result>",
            )
            return (
                f'<user_action_result id="{_attr(str(payload.get("toolCallId") or ""))}" '
                f'tool="{_attr(str(name))}" status="{_attr(str(status))}">'
                f"\n{output_text(payload)}\n</user_action_result>"
            )
        text = _text(payload)
        if not text.strip():
            self.note(item.event, "empty_dropped", f"empty {item.kind} message: not sent")
            return None
        if item.kind == "trigger":
            self.note(item.event, "trigger", "trigger message, sent as <trigger> context")
            return f"<trigger>\n{text}\n</trigger>"
        # runtime (actor system): OpenAI gives it the system role, Anthropic a tag
        if provider == "anthropic":
            self.note(
                item.event,
                "runtime",
                "message the runtime wrote (actor system), sent as <system_message> context",
            )
            return f"<system_message>\n{text}\n</system_message>"
        self.note(
            item.event, "runtime", "message the runtime wrote (actor system), sent as role system"
        )
        return text

    def dropped_blocks(self, event: Event, dropped: list[str], target: str) -> None:
        if dropped:
            kinds = ", ".join(sorted(set(dropped)))
            self.note(
                event,
                "block_dropped",
                f"{len(dropped)} content block(s) ({kinds}) not sent: no {target} equivalent",
            )

    def blank_blocks(self, event: Event, count: int) -> None:
        if count:
            self.note(event, "empty_dropped", f"{count} empty text block(s) dropped")

    def system_role(self, payload: dict[str, Any]) -> str:
        developer = payload.get("sourceRole") == "developer" or payload.get("role") == "developer"
        return "developer" if developer else "system"

    def latest_system(
        self, items: list[SystemItem], what: str, why: str
    ) -> tuple[SystemItem | None, list[SystemItem]]:
        if not items:
            return None, []
        *older, latest = items
        for item in older:
            self.note(
                item.event, "system_replaced", f"{what} replaced by seq {latest.event.seq} ({why})"
            )
        return latest, older

    # -- OpenAI Chat Completions

    def chat(self) -> list[Message]:
        out: list[Message] = []
        for item in self.planned.items:
            if isinstance(item, SystemItem):
                text = _text(item.event.payload)
                if text:
                    out.append({"role": self.system_role(item.event.payload), "content": text})
                else:
                    self.note(item.event, "empty_dropped", "empty system message: not sent")
            elif isinstance(item, UserItem):
                message = self.chat_user(item)
                if message is not None:
                    out.append(message)
            else:
                out.extend(self.chat_turn(item))
        return out

    def chat_user(self, item: UserItem) -> Message | None:
        payload = item.event.payload
        if item.kind != "user":
            text = self.context_text(item, "openai")
            if text is None:
                return None
            role = "system" if item.kind == "runtime" else "user"
            return {"role": role, "content": text}
        content: str | list[Message]
        blocks = _blocks(payload)
        if blocks is None:
            content = _text(payload)
        else:
            content, dropped = [], []
            for block in blocks:
                text = _block_text(block)
                if text is not None:
                    if text:
                        content.append({"type": "text", "text": text})
                elif _type_of(block) in _CHAT_USER_PARTS:
                    content.append(block)
                else:
                    dropped.append(_type_of(block))
            self.dropped_blocks(item.event, dropped, "Chat Completions")
        if not content:
            self.note(item.event, "empty_dropped", "empty user message: not sent")
            return None
        message: Message = {"role": "user", "content": content}
        if isinstance(payload.get("name"), str):
            message["name"] = payload["name"]
        return message

    def chat_turn(self, turn: AssistantTurn) -> list[Message]:
        calls = []
        for call in turn.calls:
            kind = call.payload.get("toolType")
            if call.server:
                self.left_out(call, "ran on the provider's side: not sent to OpenAI")
            elif kind is not None and kind not in _CUSTOM and kind != "function":
                self.left_out(call, f"is a {kind}, which Chat Completions has no form for")
            else:
                calls.append(call)
        message: Message = {"role": "assistant"}
        payload = turn.message.payload if turn.message is not None else {}
        text = _text(payload) if turn.message is not None else ""
        if turn.message is not None:
            blocks = _blocks(payload) or []
            others = [_type_of(b) for b in blocks if _block_text(b) is None]
            self.dropped_blocks(turn.message, others, "Chat Completions")
        if text:
            message["content"] = text
        for name in ("refusal", "name"):
            if isinstance(payload.get(name), str) and payload[name]:
                message[name] = payload[name]
        if calls:
            message["tool_calls"] = [self.chat_call(c) for c in calls]
        if len(message) == 1:
            if turn.message is not None:
                self.note(
                    turn.message,
                    "empty_dropped",
                    "assistant message with no content and no tool calls: not sent",
                )
            return []
        out = [message]
        for call in calls:
            out.append({"role": "tool", "tool_call_id": call.id, "content": self.chat_output(call)})
        return out

    def chat_call(self, call: Call) -> Message:
        if call.payload.get("toolType") in _CUSTOM:
            value = call.payload.get("input")
            text = value if isinstance(value, str) else json_line(value)
            return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": text}}
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": self.arguments(call)},
        }

    def arguments(self, call: Call) -> str:
        """The arguments string as the model produced it, else the input as compact JSON."""
        raw = call.payload.get("arguments")
        if isinstance(raw, str):
            return raw
        value = call.payload.get("input")
        if value is None:
            self.note(call.event, "filled_in", "call with no input recorded: sent with {}")
            return "{}"
        return json_line(value)

    def chat_output(self, call: Call) -> str | list[Message]:
        if call.result is None:
            self.placeholder(call)
            return PLACEHOLDER
        result = call.result.payload
        output = result.get("output")
        if isinstance(output, list) and output and all(isinstance(b, dict) for b in output):
            parts = [{"type": "text", "text": t} for b in output if (t := _block_text(b))]
            dropped = [_type_of(b) for b in output if _block_text(b) is None]
            self.dropped_blocks(call.result, dropped, "Chat Completions tool message")
            return parts or ""
        text = output_text(result)
        if output is None and result.get("error") is not None and not text.startswith("error"):
            return f"error: {text}"
        return text

    # -- Anthropic Messages

    def anthropic(self) -> tuple[str | list[Message] | None, list[Message]]:
        messages: list[Message] = []
        pending: list[tuple[Message, str | None]] = []
        """User-side blocks waiting for their user message, each with its plain string
        form (a message of one plain string is sent as a string)."""
        systems = [i for i in self.planned.items if isinstance(i, SystemItem)]
        latest, _ = self.latest_system(
            systems, "system prompt", "Anthropic takes one system prompt per request"
        )
        system = self.anthropic_system(latest) if latest is not None else None

        def flush() -> None:
            if not pending:
                return
            if len(pending) == 1 and pending[0][1] is not None:
                messages.append({"role": "user", "content": pending[0][1]})
            else:
                messages.append({"role": "user", "content": [block for block, _ in pending]})
            pending.clear()

        for item in self.planned.items:
            if isinstance(item, UserItem):
                pending.extend(self.anthropic_user(item))
            elif isinstance(item, AssistantTurn):
                content = self.anthropic_turn(item)
                if not content:
                    continue
                flush()
                messages.append({"role": "assistant", "content": content})
                for call in item.calls:
                    if not call.server:
                        pending.append((self.anthropic_result(call), None))
        flush()
        return system, messages

    def anthropic_system(self, item: SystemItem) -> str | list[Message] | None:
        payload = item.event.payload
        blocks = _blocks(payload)
        if blocks is not None:
            kept = [b for b in blocks if (_block_text(b) or "").strip()]
            converted = [
                b if b.get("type") == "text" else {"type": "text", "text": _block_text(b)}
                for b in kept
            ]
            self.dropped_blocks(
                item.event, [_type_of(b) for b in blocks if _block_text(b) is None], "system"
            )
            if converted:
                return converted
        text = _text(payload)
        if text.strip():
            return text
        self.note(item.event, "empty_dropped", "empty system prompt: not sent")
        return None

    def anthropic_user(self, item: UserItem) -> list[tuple[Message, str | None]]:
        if item.kind != "user":
            text = self.context_text(item, "anthropic")
            return [] if text is None else [({"type": "text", "text": text}, text)]
        payload = item.event.payload
        blocks = _blocks(payload)
        if blocks is None:
            text = _text(payload)
            if not text.strip():
                self.note(item.event, "empty_dropped", "empty user message: not sent")
                return []
            return [({"type": "text", "text": text}, text)]
        out: list[tuple[Message, str | None]] = []
        dropped, blank = [], 0
        for block in blocks:
            text = _block_text(block)
            if text is not None:
                if not text.strip():
                    blank += 1
                elif block.get("type") == "text":
                    out.append((block, None))
                else:
                    out.append(({"type": "text", "text": text}, None))
            elif _type_of(block) in _ANTHROPIC_USER_BLOCKS:
                out.append((block, None))
            else:
                dropped.append(_type_of(block))
        self.dropped_blocks(item.event, dropped, "Anthropic")
        self.blank_blocks(item.event, blank)
        if not out:
            self.note(item.event, "empty_dropped", "empty user message: not sent")
        return out

    def anthropic_turn(self, turn: AssistantTurn) -> list[Message]:
        content: list[Message] = []
        if turn.message is not None:
            payload = turn.message.payload
            blocks = _blocks(payload)
            if blocks is None:
                text = _text(payload)
                if text.strip():
                    content.append({"type": "text", "text": text})
                else:
                    self.blank_blocks(turn.message, 1 if text else 0)
            else:
                content.extend(self.anthropic_assistant_blocks(turn.message, blocks))
        for call in turn.calls:
            content.append(self.tool_use(call))
            if call.server and call.result is not None:
                content.append(self.server_result(call))
        if not content and turn.message is not None:
            self.note(
                turn.message,
                "empty_dropped",
                "assistant message with no content and no tool calls: not sent",
            )
        return content

    def anthropic_assistant_blocks(self, event: Event, blocks: list[Any]) -> list[Message]:
        out: list[Message] = []
        dropped, blank = [], 0
        for block in blocks:
            kind = _type_of(block)
            text = _block_text(block)
            if text is not None:
                if not text.strip():
                    blank += 1
                else:
                    out.append(block if kind == "text" else {"type": "text", "text": text})
            elif kind in _ANTHROPIC_ASSISTANT_BLOCKS:
                out.append(block)
            elif kind == "message":  # a Responses output message: its text parts
                parts = block.get("content")
                for part in parts if isinstance(parts, list) else []:
                    part_text = _block_text(part)
                    if part_text and part_text.strip():
                        out.append({"type": "text", "text": part_text})
            else:
                dropped.append(kind)
        self.dropped_blocks(event, dropped, "Anthropic")
        self.blank_blocks(event, blank)
        return out

    def tool_use(self, call: Call) -> Message:
        payload = call.payload
        kind = "tool_use"
        if payload.get("blockType") == "mcp_tool_use":
            kind = "mcp_tool_use"
        elif call.server:
            kind = "server_tool_use"
        value = payload.get("input")
        if value is None:
            self.note(call.event, "filled_in", "call with no input recorded: sent with {}")
            value = {}
        elif not isinstance(value, dict):
            self.note(
                call.event,
                "filled_in",
                'call input is not a JSON object: sent as {"input": ...} (tool_use input must '
                "be an object)",
            )
            value = {"input": value}
        block: Message = {"type": kind, "id": call.id, "name": call.name, "input": value}
        if isinstance(payload.get("serverName"), str):
            block["server_name"] = payload["serverName"]
        for name in ("caller", "cache_control"):
            if payload.get(name) is not None:
                block[name] = payload[name]
        return block

    def server_result(self, call: Call) -> Message:
        assert call.result is not None  # only called for a recorded result
        result = call.result.payload
        kind = result.get("resultType")
        block: Message = {
            "type": kind if isinstance(kind, str) else "tool_result",
            "tool_use_id": call.id,
            "content": result.get("output"),
        }
        if result.get("cache_control") is not None:
            block["cache_control"] = result["cache_control"]
        return block

    def anthropic_result(self, call: Call) -> Message:
        block: Message = {"type": "tool_result", "tool_use_id": call.id}
        if call.result is None:
            self.placeholder(call)
            block["content"] = PLACEHOLDER
            return block
        result = call.result.payload
        output = result.get("output")
        if isinstance(output, str) or (
            isinstance(output, list) and all(isinstance(b, dict) for b in output)
        ):
            block["content"] = output
        elif output is not None or result.get("error") is not None:
            block["content"] = output_text(result)
        failed_flag = failed(result)
        if failed_flag is not None:
            block["is_error"] = failed_flag
        if result.get("cache_control") is not None:
            block["cache_control"] = result["cache_control"]
        return block

    # -- OpenAI Responses

    def responses(self) -> tuple[list[Message], str | None, dict[str, ResponseMark]]:
        """``(items, instructions, marks)``; ``marks`` maps a response id to its
        after that response's items and the outputs of its calls' placeholders."""
        items: list[Message] = []
        marks: dict[str, ResponseMark] = {}
        recorded = [
            i
            for i in self.planned.items
            if isinstance(i, SystemItem) and i.event.payload.get("sourceField") == "instructions"
        ]
        latest, _ = self.latest_system(
            recorded, "instructions", "a request carries one instructions parameter"
        )
        instructions = None
        if latest is not None:
            instructions = _text(latest.event.payload) or None
        taken = {i.event.seq for i in recorded}
        for item in self.planned.items:
            if isinstance(item, SystemItem):
                if item.event.seq in taken:
                    continue
                text = _text(item.event.payload)
                if text:
                    items.append({"role": self.system_role(item.event.payload), "content": text})
                else:
                    self.note(item.event, "empty_dropped", "empty system message: not sent")
            elif isinstance(item, UserItem):
                message = self.responses_user(item)
                if message is not None:
                    items.append(message)
            else:
                items.extend(self.responses_turn(item, marks, len(items)))
        return items, instructions, marks

    def responses_user(self, item: UserItem) -> Message | None:
        if item.kind != "user":
            text = self.context_text(item, "responses")
            if text is None:
                return None
            return {"role": "system" if item.kind == "runtime" else "user", "content": text}
        payload = item.event.payload
        blocks = _blocks(payload)
        content: str | list[Message]
        if blocks is None:
            content = _text(payload)
        else:
            content, dropped = [], []
            for block in blocks:
                kind = _type_of(block)
                text = _block_text(block)
                if text is not None:
                    if text:
                        content.append(
                            block if kind == "input_text" else {"type": "input_text", "text": text}
                        )
                elif kind in _RESPONSES_USER_PARTS:
                    content.append(block)
                else:
                    dropped.append(kind)
            self.dropped_blocks(item.event, dropped, "Responses")
        if not content:
            self.note(item.event, "empty_dropped", "empty user message: not sent")
            return None
        return {"role": "user", "content": content}

    def responses_turn(
        self, turn: AssistantTurn, marks: dict[str, ResponseMark], at: int
    ) -> list[Message]:
        out: list[Message] = []
        response_seqs: dict[str, list[int]] = {}
        if turn.message is not None:
            payload = turn.message.payload
            if isinstance(payload.get("responseId"), str):
                response_seqs.setdefault(payload["responseId"], []).append(turn.message.seq)
            out.extend(self.responses_assistant(turn.message))
        calls = []
        for call in turn.calls:
            if call.server:
                self.left_out(call, "ran on the provider's side: not sent to OpenAI")
                continue
            calls.append(call)
            out.append(self.responses_call(call))
            if isinstance(call.payload.get("responseId"), str):
                response_seqs.setdefault(call.payload["responseId"], []).append(call.event.seq)
        if not out and turn.message is not None:
            self.note(
                turn.message,
                "empty_dropped",
                "assistant message with no content and no tool calls: not sent",
            )
        # the outputs of the response's calls belong to the next request: they answer it
        call_seqs = frozenset(c.event.seq for c in calls)
        for response_id, seqs in response_seqs.items():
            marks[response_id] = ResponseMark(at + len(out), max(seqs), call_seqs)
        for call in calls:
            out.append(self.responses_output(call))
        return out

    def responses_assistant(self, event: Event) -> list[Message]:
        payload = event.payload
        blocks = _blocks(payload)
        if blocks is None:
            content = _text(payload)
            return [{"role": "assistant", "content": content}] if content else []
        out: list[Message] = []
        texts: list[str] = []
        dropped: list[str] = []
        for block in blocks:
            kind = _type_of(block)
            text = _block_text(block)
            if kind in _RESPONSES_ITEMS:
                out.append(block)
            elif text is not None:
                if text:
                    texts.append(text)
            else:
                dropped.append(kind)
        self.dropped_blocks(event, dropped, "Responses")
        if texts:
            out.append({"role": "assistant", "content": "\n".join(texts)})
        return out

    def responses_call(self, call: Call) -> Message:
        payload = call.payload
        kind = payload.get("toolType")
        item: Message
        if kind in _CUSTOM:
            value = payload.get("input")
            item = {
                "type": "custom_tool_call",
                "call_id": call.id,
                "name": call.name,
                "input": value if isinstance(value, str) else json_line(value),
            }
        elif isinstance(kind, str) and kind != "function":  # computer_call, local_shell_call, …
            item = {"type": kind, "call_id": call.id, "action": payload.get("input")}
        else:
            item = {
                "type": "function_call",
                "call_id": call.id,
                "name": call.name,
                "arguments": self.arguments(call),
            }
        if isinstance(payload.get("itemId"), str):
            item["id"] = payload["itemId"]
        return item

    def responses_output(self, call: Call) -> Message:
        kind = call.payload.get("toolType")
        if kind in _CUSTOM:
            output_type = "custom_tool_call_output"
        elif isinstance(kind, str) and kind != "function":
            output_type = f"{kind}_output"
        else:
            output_type = "function_call_output"
        item: Message = {"type": output_type, "call_id": call.id}
        if call.result is None:
            self.placeholder(call)
            item["output"] = PLACEHOLDER
            return item
        result = call.result.payload
        output = result.get("output")
        if isinstance(output, str) or output_type not in (
            "function_call_output",
            "custom_tool_call_output",
        ):
            item["output"] = output
        else:
            item["output"] = output_text(result)
        if isinstance(result.get("itemId"), str):
            item["id"] = result["itemId"]
        return item
