"""Replay for the OpenAI Responses API: a plan as ``input`` items and ``instructions``.

Shapes and rules are in the docstring of :func:`agenttrail.replay.to_openai_responses`
(sources: https://platform.openai.com/docs/api-reference/responses/create and
https://platform.openai.com/docs/guides/conversation-state); item and part types come from
:mod:`agenttrail.providers.openai`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from agenttrail.codec import json_line
from agenttrail.model import ContentPart, Event, attachments
from agenttrail.providers import openai
from agenttrail.replay.plan import AssistantTurn, Call, SystemItem
from agenttrail.replay.render import EMPTY_ASSISTANT, PLACEHOLDER, Message, OpenAIRenderer

__all__ = ["ResponseMark", "ResponsesRenderer"]


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
class ResponsesRenderer(OpenAIRenderer):
    """Renders a plan as Responses API input items."""

    target = "Responses"
    user_parts = openai.RESPONSES_USER_PARTS

    marks: dict[str, ResponseMark] = field(default_factory=dict)
    """Response id → where its items end in the input (:meth:`turn` records them)."""

    def render(self) -> tuple[list[Message], str | None, dict[str, ResponseMark]]:
        """``(items, instructions, marks)``; ``marks`` maps a response id to where its items
        end in ``items`` (:class:`ResponseMark`), for ``previous_response_id``."""
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
            instructions = self.text_of(latest.event.payload) or None
        items = self.messages(skip=frozenset(i.event.seq for i in recorded))
        return items, instructions, self.marks

    def text_part(self, block: Any, text: str) -> Message:
        """An ``input_text`` part (the block itself when it is one)."""
        return block if block.get("type") == "input_text" else {"type": "input_text", "text": text}

    def image_part(self, url: str) -> Message:
        """An ``input_image`` part (Responses reference, input content: ``image_url``, and
        ``detail``, here ``auto``)."""
        return {"type": "input_image", "image_url": url, "detail": "auto"}

    def file_part(self, data_url: str, filename: str) -> Message:
        """An ``input_file`` part with ``file_data`` and ``filename`` (Responses reference,
        input content)."""
        return {"type": "input_file", "file_data": data_url, "filename": filename}

    def output_parts(self, event: Event, output: list[Any]) -> list[Message]:
        """A tool output holding attachments as ``function_call_output`` content: text as
        ``input_text``, images and PDFs as ``input_image`` / ``input_file`` (the API takes "a
        string or a list of output content": input text, image and file;
        ``ResponseFunctionCallOutputItem`` in OpenAI's SDKs), the rest dropped and noted."""
        parts: list[Message] = []
        dropped: list[str] = []
        for block in output:
            text = self.block_text(block)
            if text is not None:
                if text:
                    parts.append({"type": "input_text", "text": text})
            elif block.get("type") in ("input_image", "input_file"):
                parts.append(block)
            elif (part := self.attachment_part(block)) is not None:
                parts.append(part)
            else:
                dropped.append(self.block_type(block))
        self.dropped_blocks(event, dropped, f"{self.target} function_call_output")
        return parts

    def turn(self, turn: AssistantTurn, at: int) -> list[Message]:
        """The assistant's output items and call items, then one output per call; records
        in :attr:`marks` where each response's items end (``at`` is the index of the first)."""
        out: list[Message] = []
        response_seqs: dict[str, list[int]] = {}
        order = self.order_of(turn)
        rest = turn.calls
        if turn.message is not None:
            payload = turn.message.payload
            if isinstance(payload.get("responseId"), str):
                response_seqs.setdefault(payload["responseId"], []).append(turn.message.seq)
            if order is None:
                out.extend(self.assistant(turn.message))
            else:  # the message's items and its calls in the order it records
                by_id = {call.id: call for call in turn.calls}
                referred = [by_id[p.id] for p in order if p.kind == "toolCall" and p.id in by_id]
                rest = [call for call in turn.calls if call not in referred]
                out.extend(self.assistant(turn.message, order, by_id))
        calls = []
        for call in turn.calls:
            if call.server:
                self.left_out(call, "ran on the provider's side: not sent to OpenAI")
                continue
            calls.append(call)
            if call in rest:
                out.append(self.call(call))
            if isinstance(call.payload.get("responseId"), str):
                response_seqs.setdefault(call.payload["responseId"], []).append(call.event.seq)
        if not out and turn.message is not None:
            self.not_sent(turn.message, EMPTY_ASSISTANT)
        # the outputs of the response's calls belong to the next request: they answer it
        call_seqs = frozenset(c.event.seq for c in calls)
        for response_id, seqs in response_seqs.items():
            self.marks[response_id] = ResponseMark(at + len(out), max(seqs), call_seqs)
        for call in calls:
            out.append(self.output(call))
        return out

    def assistant(
        self,
        event: Event,
        order: list[ContentPart] | None = None,
        calls: dict[str, Call] | None = None,
    ) -> list[Message]:
        """An assistant message: its output items verbatim, its other text as one message.

        With the message's recorded ``order``, the items, texts and the call items of
        ``calls`` (by id; server calls excepted) in that order, each run of consecutive texts
        as one assistant message."""
        payload = event.payload
        blocks = self.blocks_of(payload)
        if blocks is None:
            content = self.text_of(payload)
            return [{"role": "assistant", "content": content}] if content else []
        interleave = order is not None  # else every text goes after the items, as one
        if order is None:
            order = [ContentPart("block", block=b) for b in blocks]
        out: list[Message] = []
        texts: list[str] = []
        dropped: list[str] = []

        def flush() -> None:
            if texts:
                out.append({"role": "assistant", "content": "\n".join(texts)})
                texts.clear()

        for part in order:
            if part.block is None:
                call = (calls or {}).get(part.id or "")
                if part.kind == "toolCall" and call is not None and not call.server:
                    flush()
                    out.append(self.call(call))
                continue
            kind = self.block_type(part.block)
            text = self.block_text(part.block)
            if kind in openai.OUTPUT_ITEMS_AS_INPUT:
                if interleave:
                    flush()
                out.append(part.block)
            elif text is not None:
                if text:
                    texts.append(text)
            else:
                dropped.append(kind)
        self.dropped_blocks(event, dropped, self.target)
        flush()
        return out

    def call(self, call: Call) -> Message:
        """A call item: ``function_call``, ``custom_tool_call``, or the recorded type."""
        payload = call.payload
        kind = payload.get("toolType")
        item: Message
        if kind in openai.CUSTOM_TOOL_TYPES:
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

    def output(self, call: Call) -> Message:
        """The output item that answers a call (a placeholder without a result)."""
        kind = call.payload.get("toolType")
        if kind in openai.CUSTOM_TOOL_TYPES:
            output_type = "custom_tool_call_output"
        elif isinstance(kind, str) and kind != "function":
            output_type = f"{kind}_output"
        else:
            output_type = "function_call_output"
        item: Message = {"type": output_type, "call_id": call.id}
        answer = self.answer(call)
        if answer is None:
            return {**item, "output": PLACEHOLDER}
        result = answer.payload
        output = result.get("output")
        if output_type not in ("function_call_output", "custom_tool_call_output"):
            item["output"] = output  # a hosted tool's own output item, as recorded
        elif (
            output_type == "function_call_output" and self.is_parts(output) and attachments(output)
        ):
            item["output"] = self.output_parts(answer, output)
        else:
            item["output"] = self.result_text(result, flagged=False)
        if isinstance(result.get("itemId"), str):
            item["id"] = result["itemId"]
        return item
