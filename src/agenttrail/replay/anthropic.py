"""Replay for the Anthropic Messages API: a plan as ``system`` and ``messages``.

Shapes and rules are in the docstring of :func:`agenttrail.replay.to_anthropic` (sources:
https://platform.claude.com/docs/en/api/messages and
https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls); block types
come from :mod:`agenttrail.providers.anthropic`.
"""

from __future__ import annotations

from typing import Any

from agenttrail.model import ContentPart, Event, attachment_of, failed
from agenttrail.providers import anthropic
from agenttrail.replay.plan import AssistantTurn, Call, SystemItem, UserItem
from agenttrail.replay.render import EMPTY_ASSISTANT, PLACEHOLDER, Message, Renderer

__all__ = ["AnthropicRenderer"]

Pending = list[tuple[Message, str | None]]
"""User-side blocks waiting for their user message, each with its plain string form (a
message of one plain string is sent as a string)."""


class AnthropicRenderer(Renderer):
    """Renders a plan as a Messages API request's ``system`` and ``messages``."""

    runtime_in_tag = True  # Anthropic's messages have no system role

    def render(self) -> tuple[str | list[Message] | None, list[Message]]:
        """``(system, messages)``: the latest system prompt, and the messages in plan order
        with all user-side content between two assistant messages in one user message."""
        messages: list[Message] = []
        pending: Pending = []
        systems = [i for i in self.planned.items if isinstance(i, SystemItem)]
        latest, _ = self.latest_system(
            systems, "system prompt", "Anthropic takes one system prompt per request"
        )
        system = self.system_prompt(latest) if latest is not None else None

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
                pending.extend(self.user(item))
            elif isinstance(item, AssistantTurn):
                content = self.turn(item)
                if not content:
                    continue
                flush()
                messages.append({"role": "assistant", "content": content})
                for call in item.calls:
                    if not call.server:
                        pending.append((self.result(call), None))
        flush()
        return system, messages

    def system_prompt(self, item: SystemItem) -> str | list[Message] | None:
        """The ``system`` parameter: text blocks, or the text; ``None`` (noted) when empty."""
        payload = item.event.payload
        blocks = self.blocks_of(payload)
        if blocks is not None:
            kept = [b for b in blocks if (self.block_text(b) or "").strip()]
            converted = [
                b
                if b.get("type") == anthropic.TEXT_BLOCK
                else {"type": anthropic.TEXT_BLOCK, "text": self.block_text(b)}
                for b in kept
            ]
            self.dropped_blocks(
                item.event,
                [self.block_type(b) for b in blocks if self.block_text(b) is None],
                "system",
            )
            if converted:
                return converted
        text = self.text_of(payload)
        if text.strip():
            return text
        self.not_sent(item.event, "empty system prompt")
        return None

    def user(self, item: UserItem) -> Pending:
        """The blocks a user-side item adds to the next user message."""
        if item.kind != "user":
            text = self.context_text(item)
            return [] if text is None else [({"type": "text", "text": text}, text)]
        payload = item.event.payload
        blocks = self.blocks_of(payload)
        if blocks is None:
            text = self.text_of(payload)
            if not text.strip():
                self.not_sent(item.event, "empty user message")
                return []
            return [({"type": "text", "text": text}, text)]
        out: Pending = []
        dropped, blank = [], 0
        for block in blocks:
            text = self.block_text(block)
            if text is not None:
                if not text.strip():
                    blank += 1
                elif block.get("type") == anthropic.TEXT_BLOCK:
                    out.append((block, None))
                else:
                    out.append(({"type": "text", "text": text}, None))
            elif self.block_type(block) in anthropic.USER_BLOCKS:
                out.append((block, None))
            elif (converted := self.attachment_block(block)) is not None:
                out.append((converted, None))
            else:
                dropped.append(self.block_type(block))
        self.dropped_blocks(item.event, dropped, "Anthropic")
        self.blank_blocks(item.event, blank)
        if not out:
            self.not_sent(item.event, "empty user message")
        return out

    def turn(self, turn: AssistantTurn) -> list[Message]:
        """The assistant message's content: its blocks and calls in the order the message
        records (``order``), else its blocks, then its calls; a server tool's recorded result
        at its place in that order, else right after its call."""
        content: list[Message] = []
        order = self.order_of(turn)
        if order is not None:
            assert turn.message is not None  # only a message records an order
            kept = iter(self.assistant_blocks(turn.message, [p.block for p in order if p.block]))
            placed = self.placed(turn, order)
            calls = {call.id: call for call in turn.calls}
            for part in order:
                if part.block is not None:
                    content.extend(next(kept))
                elif part.id in calls and part.kind == "toolCall":
                    call = calls[part.id]
                    content.append(self.tool_use(call))
                    if call.server and call.result is not None and call.id not in placed:
                        content.append(self.server_result(call))
                elif part.id in calls and part.id in placed:
                    content.append(self.server_result(calls[part.id]))
            referred = {p.id for p in order if p.kind == "toolCall"}
            rest = [call for call in turn.calls if call.id not in referred]
        else:
            rest = turn.calls
            if turn.message is not None:
                content.extend(self.message_blocks(turn.message))
        for call in rest:
            content.append(self.tool_use(call))
            if call.server and call.result is not None:
                content.append(self.server_result(call))
        if not content and turn.message is not None:
            self.not_sent(turn.message, EMPTY_ASSISTANT)
        return content

    @staticmethod
    def placed(turn: AssistantTurn, order: list[ContentPart]) -> set[str]:
        """Ids of the server calls whose recorded result has its own place in ``order``."""
        results = {p.id for p in order if p.kind == "toolResult"}
        return {c.id for c in turn.calls if c.server and c.result is not None and c.id in results}

    def message_blocks(self, event: Event) -> list[Message]:
        """An assistant message's blocks that are sent (its text when it keeps no blocks)."""
        payload = event.payload
        blocks = self.blocks_of(payload)
        if blocks is not None:
            return [b for kept in self.assistant_blocks(event, blocks) for b in kept]
        text = self.text_of(payload)
        if text.strip():
            return [{"type": "text", "text": text}]
        self.blank_blocks(event, 1 if text else 0)
        return []

    def assistant_blocks(self, event: Event, blocks: list[Any]) -> list[list[Message]]:
        """What each block of an assistant message becomes (one list per block, empty when
        it is not sent): text, thinking, a Responses output message's text parts."""
        out: list[list[Message]] = []
        dropped, blank = [], 0
        for block in blocks:
            kind = self.block_type(block)
            text = self.block_text(block)
            sent: list[Message] = []
            if text is not None:
                if not text.strip():
                    blank += 1
                else:
                    sent.append(
                        block if kind == anthropic.TEXT_BLOCK else {"type": "text", "text": text}
                    )
            elif kind in anthropic.THINKING_BLOCKS:
                sent.append(block)
            elif kind == "message":  # a Responses output message: its text parts
                parts = block.get("content")
                for part in parts if isinstance(parts, list) else []:
                    part_text = self.block_text(part)
                    if part_text and part_text.strip():
                        sent.append({"type": "text", "text": part_text})
            else:
                dropped.append(kind)
            out.append(sent)
        self.dropped_blocks(event, dropped, "Anthropic")
        self.blank_blocks(event, blank)
        return out

    def tool_use(self, call: Call) -> Message:
        """A ``tool_use`` block (``server_tool_use`` / ``mcp_tool_use`` for a server's call)."""
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
        if not anthropic.TOOL_ID.fullmatch(call.id):
            self.note(
                call.event,
                "tool_id_pattern",
                f"call id {call.id!r} does not match ^{anthropic.TOOL_ID.pattern}$: sent as the "
                "log holds it, which the Messages API refuses (400)",
            )
        block: Message = {"type": kind, "id": call.id, "name": call.name, "input": value}
        if isinstance(payload.get("serverName"), str):
            block["server_name"] = payload["serverName"]
        for name in ("caller", "cache_control"):
            if payload.get(name) is not None:
                block[name] = payload[name]
        return block

    def server_result(self, call: Call) -> Message:
        """A server tool's own result block, as recorded."""
        assert call.result is not None  # only called for a recorded result
        result = call.result.payload
        kind = result.get("resultType")
        block: Message = {
            "type": kind if isinstance(kind, str) else anthropic.TOOL_RESULT_BLOCK,
            "tool_use_id": call.id,
            "content": result.get("output"),
        }
        if result.get("cache_control") is not None:
            block["cache_control"] = result["cache_control"]
        return block

    def attachment_block(self, block: Any) -> Message | None:
        """An OpenAI image or PDF part as an Anthropic ``image`` / ``document`` block with a
        ``base64`` or ``url`` source (Messages API reference, user content; vision and PDF
        support), or ``None`` when it has none (another provider's file id, not a PDF)."""
        attachment = attachment_of(block)
        if attachment is None:
            return None
        if attachment.data is not None and attachment.media_type is not None:
            source = {
                "type": "base64",
                "media_type": attachment.media_type,
                "data": attachment.data,
            }
            if attachment.kind == "image":
                return {"type": "image", "source": source}
            if attachment.media_type == "application/pdf":
                return {"type": "document", "source": source}
        reference = attachment.reference or ""
        if attachment.kind == "image" and reference.startswith(("https://", "http://")):
            return {"type": "image", "source": {"type": "url", "url": reference}}
        return None

    def result_blocks(self, event: Event, output: list[Any]) -> list[Message]:
        """A tool output of another provider's parts as ``tool_result`` content: text and
        its images and PDFs as Anthropic blocks, the rest dropped and noted."""
        out: list[Message] = []
        dropped: list[str] = []
        for part in output:
            text = self.block_text(part)
            converted = self.attachment_block(part) if text is None else None
            if text:
                out.append({"type": anthropic.TEXT_BLOCK, "text": text})
            elif converted is not None:
                out.append(converted)
            elif text is None:
                dropped.append(self.block_type(part))
        self.dropped_blocks(event, dropped, "Anthropic tool_result")
        return out

    def result(self, call: Call) -> Message:
        """The ``tool_result`` block that answers a client call (a placeholder without one)."""
        block: Message = {"type": anthropic.TOOL_RESULT_BLOCK, "tool_use_id": call.id}
        answer = self.answer(call)
        if answer is None:
            return {**block, "content": PLACEHOLDER}
        result = answer.payload
        output = result.get("output")
        if self.is_parts(output):  # Anthropic's own blocks verbatim; others' converted
            shaped = all(_tool_result_block(b) for b in output)
            block["content"] = output if shaped else self.result_blocks(answer, output)
        elif output is not None or result.get("error") is not None:
            block["content"] = self.result_text(result, flagged=True)
        failed_flag = failed(result)
        if failed_flag is not None:
            block["is_error"] = failed_flag
        if result.get("cache_control") is not None:
            block["cache_control"] = result["cache_control"]
        return block


def _tool_result_block(block: dict[str, Any]) -> bool:
    """Whether a part is a block a ``tool_result`` takes as it is
    (:data:`~agenttrail.providers.anthropic.TOOL_RESULT_CONTENT_BLOCKS`): text with its text,
    images and documents with a ``source``, the others as recorded."""
    kind = block["type"]
    if kind == anthropic.TEXT_BLOCK:
        return isinstance(block.get("text"), str)
    if kind in ("image", "document"):
        return isinstance(block.get("source"), dict)
    return kind in anthropic.TOOL_RESULT_CONTENT_BLOCKS
