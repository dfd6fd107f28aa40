"""Replay for OpenAI Chat Completions: a plan as a ``messages`` list.

Shapes and rules are in the docstring of :func:`agenttrail.replay.to_openai_chat` (sources:
https://platform.openai.com/docs/api-reference/chat/create and
https://platform.openai.com/docs/guides/function-calling); part types and custom tools come
from :mod:`agenttrail.providers.openai`.
"""

from __future__ import annotations

from typing import Any

from agenttrail.codec import json_line
from agenttrail.model import attachments
from agenttrail.providers import openai
from agenttrail.replay.plan import AssistantTurn, Call, UserItem
from agenttrail.replay.render import EMPTY_ASSISTANT, PLACEHOLDER, Message, OpenAIRenderer

__all__ = ["ChatRenderer"]


class ChatRenderer(OpenAIRenderer):
    """Renders a plan as Chat Completions messages."""

    target = "Chat Completions"
    user_parts = openai.CHAT_USER_PARTS

    def render(self) -> list[Message]:
        """The ``messages`` list, in plan order."""
        return self.messages()

    def user(self, item: UserItem) -> Message | None:
        """As :meth:`OpenAIRenderer.user`, with the message's ``name`` when recorded."""
        message = super().user(item)
        name = item.event.payload.get("name")
        if message is not None and item.kind == "user" and isinstance(name, str):
            message["name"] = name
        return message

    def text_part(self, block: Any, text: str) -> Message:
        """A ``text`` part."""
        return {"type": "text", "text": text}

    def image_part(self, url: str) -> Message:
        """An ``image_url`` part (Chat Completions reference, user message content parts)."""
        return {"type": "image_url", "image_url": {"url": url}}

    def file_part(self, data_url: str, filename: str) -> Message:
        """A ``file`` part with ``file_data`` (Chat Completions reference, user message
        content parts: ``file_data``, ``file_id``, ``filename``)."""
        return {"type": "file", "file": {"file_data": data_url, "filename": filename}}

    def turn(self, turn: AssistantTurn, at: int) -> list[Message]:
        """The assistant message with its ``tool_calls``, then one ``tool`` message per call."""
        calls = []
        for call in turn.calls:
            kind = call.payload.get("toolType")
            if call.server:
                self.left_out(call, "ran on the provider's side: not sent to OpenAI")
            elif kind is not None and kind not in openai.CUSTOM_TOOL_TYPES and kind != "function":
                self.left_out(call, f"is a {kind}, which {self.target} has no form for")
            else:
                calls.append(call)
        message: Message = {"role": "assistant"}
        payload = turn.message.payload if turn.message is not None else {}
        text = self.text_of(payload) if turn.message is not None else ""
        if self.order_of(turn) is not None and calls:
            self.note(
                turn.message,
                "order_lost",
                "text and tool calls interleave in this message: Chat Completions has one "
                "content and one tool_calls, so the text is sent joined, before every call",
            )
        if turn.message is not None:
            blocks = self.blocks_of(payload) or []
            # a Responses output message's text is the content sent: not a block left out
            carried = {"message"} if text else set()
            others = [self.block_type(b) for b in blocks if self.block_text(b) is None]
            others = [kind for kind in others if kind not in carried]
            self.dropped_blocks(turn.message, others, self.target)
        if text:
            message["content"] = text
        for name in ("refusal", "name"):
            if isinstance(payload.get(name), str) and payload[name]:
                message[name] = payload[name]
        if calls:
            message["tool_calls"] = [self.call(c) for c in calls]
        if len(message) == 1:
            if turn.message is not None:
                self.not_sent(turn.message, EMPTY_ASSISTANT)
            return []
        out = [message]
        for call in calls:
            out.append({"role": "tool", "tool_call_id": call.id, "content": self.output(call)})
        return out

    def call(self, call: Call) -> Message:
        """A ``tool_calls`` entry: a ``function`` call, or a ``custom`` one."""
        if call.payload.get("toolType") in openai.CUSTOM_TOOL_TYPES:
            value = call.payload.get("input")
            text = value if isinstance(value, str) else json_line(value)
            return {"id": call.id, "type": "custom", "custom": {"name": call.name, "input": text}}
        return {
            "id": call.id,
            "type": "function",
            "function": {"name": call.name, "arguments": self.arguments(call)},
        }

    def output(self, call: Call) -> str | list[Message]:
        """A ``tool`` message's content: the output's text parts, or its text (marked when
        the call failed: :meth:`result_text`)."""
        answer = self.answer(call)
        if answer is None:
            return PLACEHOLDER
        result = answer.payload
        output = result.get("output")
        if self.is_parts(output):
            parts = [{"type": "text", "text": t} for b in output if (t := self.block_text(b))]
            dropped = [self.block_type(b) for b in output if self.block_text(b) is None]
            self.dropped_blocks(answer, dropped, f"{self.target} tool message")
            found = attachments(output)
            if found:  # a tool message takes text parts only: name them, never send base64
                text = self.attachment_text(found, f"a {self.target} tool message")
                parts.append({"type": "text", "text": text})
            return parts or ""
        return self.result_text(result, flagged=False)
