"""What every replay target shares: notes, placeholders, context text and system prompts.

:class:`Renderer` is the base of the three renderers, one per target:
:class:`~agenttrail.replay.chat.ChatRenderer` (OpenAI Chat Completions),
:class:`~agenttrail.replay.anthropic.AnthropicRenderer` (Anthropic Messages) and
:class:`~agenttrail.replay.responses.ResponsesRenderer` (OpenAI Responses). Each turns a
:class:`~agenttrail.replay.plan.Plan` into its provider's messages and adds a :class:`Note` for
everything it leaves out or fills in. Each rule is cited in the public function's docstring in
:mod:`agenttrail.replay` and in ``docs/replay.md``; block and item types come from
:mod:`agenttrail.providers`.
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, TypeGuard

from agenttrail.codec import json_line
from agenttrail.model import (
    Attachment,
    ContentPart,
    Event,
    attachment_of,
    content_order,
    content_text,
    failed,
    output_text,
    tool_status,
)
from agenttrail.providers import anthropic, openai
from agenttrail.replay.plan import AssistantTurn, Call, Note, Plan, SystemItem, UserItem

__all__ = ["EMPTY_ASSISTANT", "PLACEHOLDER", "Message", "OpenAIRenderer", "Renderer"]

PLACEHOLDER = (
    "[agenttrail] no result recorded for this call: it may still be running, "
    "or its result was never logged"
)
"""The result sent for a call the log has no result for (the log spec: "still-running children
given honest placeholders", docs/specs.md). The same text for every provider, so a reader can
search for it."""

EMPTY_ASSISTANT = "assistant message with no content and no tool calls"
"""What an ``empty_dropped`` note calls an assistant message that is not sent."""

_TEXT_TYPES = openai.TEXT_PARTS | {anthropic.TEXT_BLOCK}
"""Content block / part types that carry ``text`` (Anthropic, Chat Completions, Responses)."""

Message = dict[str, Any]
"""One message, block or input item: a JSON-ready mapping."""


def _attr(value: str) -> str:
    return html.escape(value, quote=True)


@dataclass
class Renderer:
    """Turns a :class:`Plan` into one provider's messages, adding notes as it goes."""

    planned: Plan
    notes: list[Note] = field(default_factory=list)

    runtime_in_tag: ClassVar[bool] = False
    """Whether the runtime's messages (actor ``system``) go in a ``<system_message>`` tag, for
    a provider whose messages have no system role; else they get role ``system``."""

    @staticmethod
    def text_of(payload: dict[str, Any]) -> str:
        """The text of a message payload's ``content`` (:func:`~agenttrail.model.content_text`)."""
        return content_text(payload.get("content"))

    @staticmethod
    def blocks_of(payload: dict[str, Any]) -> list[Any] | None:
        """A message payload's ``blocks``, when it keeps them (a list)."""
        blocks = payload.get("blocks")
        return blocks if isinstance(blocks, list) else None

    @staticmethod
    def block_text(block: Any) -> str | None:
        """The ``text`` of a text block or part (any provider's), else ``None``."""
        if isinstance(block, dict) and block.get("type") in _TEXT_TYPES:
            text = block.get("text")
            return text if isinstance(text, str) else None
        return None

    @staticmethod
    def is_parts(output: Any) -> TypeGuard[list[dict[str, Any]]]:
        """Whether a tool output is content parts (a list of blocks, each with a ``type``),
        which a provider takes as parts; else it is data (a JSON list of records, say), sent
        as its JSON text."""
        return (
            isinstance(output, list)
            and bool(output)
            and all(isinstance(b, dict) and isinstance(b.get("type"), str) for b in output)
        )

    @staticmethod
    def result_text(result: dict[str, Any], flagged: bool) -> str:
        """A result's output as text (:func:`~agenttrail.model.output_text`), its error text
        where its output is empty; and for a provider without an error flag (``flagged``
        False: Chat Completions, Responses), ``error: `` before the text of a result the log
        says failed (:func:`~agenttrail.model.failed`), unless the text says so itself: the
        flag is the only sign a model is given that a call failed."""
        text = output_text(result)
        error = result.get("error")
        if not text and error is not None and error != "":
            text = error if isinstance(error, str) else json_line(error)
        if not flagged and failed(result) and not text.lower().startswith("error"):
            return f"error: {text}" if text else "error"
        return text

    @staticmethod
    def block_type(block: Any) -> str:
        """A block's ``type``, or the Python type's name of something that is not a block."""
        kind = block.get("type") if isinstance(block, dict) else None
        return kind if isinstance(kind, str) else type(block).__name__

    @staticmethod
    def order_of(turn: AssistantTurn) -> list[ContentPart] | None:
        """The provider's order of the turn's message, blocks and calls interleaved
        (:func:`~agenttrail.model.content_order`); ``None`` when it records none (blocks
        first, then calls)."""
        return content_order(turn.message.payload) if turn.message is not None else None

    def note(self, event: Event | None, kind: str, text: str) -> None:
        """Add a note about ``event`` (``None``: the whole replay)."""
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

    def not_sent(self, event: Event, what: str) -> None:
        """Note that ``what`` (an empty message, say) is not sent."""
        self.note(event, "empty_dropped", f"{what}: not sent")

    def answer(self, call: Call) -> Event | None:
        """The result sent behind ``call``; ``None`` when the log has none, and
        :data:`PLACEHOLDER` is sent instead (noted)."""
        if call.result is not None:
            return call.result
        self.note(
            call.event,
            "placeholder",
            f"call {call.id!r} ({call.name}) has no result recorded: a placeholder result was sent",
        )
        return None

    def left_out(self, call: Call, why: str) -> None:
        """Note that ``call`` (and its result) is not sent, and why."""
        tail = f"; its result (seq {call.result.seq}) neither" if call.result else ""
        self.note(call.event, "call_not_sent", f"call {call.id!r} ({call.name}) {why}{tail}")

    def context_text(self, item: UserItem) -> str | None:
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
        text = self.text_of(payload)
        if not text.strip():
            self.not_sent(item.event, f"empty {item.kind} message")
            return None
        if item.kind == "trigger":
            self.note(item.event, "trigger", "trigger message, sent as <trigger> context")
            return f"<trigger>\n{text}\n</trigger>"
        if self.runtime_in_tag:
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
        """Note the blocks of ``event`` that ``target`` has no form for."""
        if dropped:
            kinds = ", ".join(sorted(set(dropped)))
            self.note(
                event,
                "block_dropped",
                f"{len(dropped)} content block(s) ({kinds}) not sent: no {target} equivalent",
            )

    def blank_blocks(self, event: Event, count: int) -> None:
        """Note the empty text blocks of ``event`` that were dropped."""
        if count:
            self.note(event, "empty_dropped", f"{count} empty text block(s) dropped")

    def latest_system(
        self, items: list[SystemItem], what: str, why: str
    ) -> tuple[SystemItem | None, list[SystemItem]]:
        """``(latest, older)`` system items; each older one is noted as replaced."""
        if not items:
            return None, []
        *older, latest = items
        for item in older:
            self.note(
                item.event, "system_replaced", f"{what} replaced by seq {latest.event.seq} ({why})"
            )
        return latest, older


class OpenAIRenderer(Renderer, ABC):
    """What the two OpenAI targets share: system prompts and the runtime's messages as
    messages with role ``system``, the user's as text or parts, the list in plan order, and
    function-call arguments as a string. Each target supplies the parts and the assistant
    turn in its own shape (the abstract methods: ``replay/chat.py``, ``replay/responses.py``)."""

    target: ClassVar[str]
    """The API's name in notes (``Chat Completions``, ``Responses``)."""
    user_parts: ClassVar[frozenset[str]]
    """The user content part types sent verbatim besides text."""

    def messages(self, skip: frozenset[int] = frozenset()) -> list[Message]:
        """The plan in order: system prompts as messages (except the seqs in ``skip``), each
        user-side item as a message, each assistant turn as :meth:`turn` gives it."""
        out: list[Message] = []
        for item in self.planned.items:
            if isinstance(item, AssistantTurn):
                out.extend(self.turn(item, len(out)))
                continue
            if isinstance(item, UserItem):
                message = self.user(item)
            else:
                message = None if item.event.seq in skip else self.system_message(item)
            if message is not None:
                out.append(message)
        return out

    def user(self, item: UserItem) -> Message | None:
        """A user-side item as a message: the user's own words as text or parts (the
        :attr:`user_parts` types kept, other blocks dropped and noted), other items as
        context (:meth:`context_message`); ``None`` (noted) when there is nothing to send."""
        if item.kind != "user":
            return self.context_message(item)
        payload = item.event.payload
        blocks = self.blocks_of(payload)
        content: str | list[Message]
        if blocks is None:
            content = self.text_of(payload)
        else:
            content, dropped = [], []
            for block in blocks:
                kind = self.block_type(block)
                text = self.block_text(block)
                if text is not None:
                    if text:
                        content.append(self.text_part(block, text))
                elif kind in self.user_parts:
                    content.append(block)
                elif (part := self.attachment_part(block)) is not None:
                    content.append(part)
                else:
                    dropped.append(kind)
            self.dropped_blocks(item.event, dropped, self.target)
        if not content:
            self.not_sent(item.event, "empty user message")
            return None
        return {"role": "user", "content": content}

    def context_message(self, item: UserItem) -> Message | None:
        """A user-side item that is not the user's own words as a message with a role: the
        runtime's as ``system``, the others as ``user`` (OpenAI Chat and Responses)."""
        text = self.context_text(item)
        if text is None:
            return None
        return {"role": "system" if item.kind == "runtime" else "user", "content": text}

    @abstractmethod
    def text_part(self, block: Any, text: str) -> Message:
        """The content part a text block of the user's becomes."""

    def attachment_part(self, block: Any) -> Message | None:
        """The content part another provider's image or PDF block becomes in this API
        (:func:`~agenttrail.model.attachment_of` reads it), or ``None`` when it has none: a
        reference to another provider's file id, a document that is not a PDF."""
        attachment = attachment_of(block)
        if attachment is None:
            return None
        if attachment.kind == "image":
            url = attachment.data_url() or attachment.reference
            if url is not None and url.startswith(("data:", "https://", "http://")):
                return self.image_part(url)
        elif attachment.media_type == "application/pdf" and attachment.data is not None:
            return self.file_part(attachment.data_url() or "", attachment.name or "document.pdf")
        return None

    @abstractmethod
    def image_part(self, url: str) -> Message:
        """An image part of this API for a ``data:`` URL or a link."""

    @abstractmethod
    def file_part(self, data_url: str, filename: str) -> Message:
        """A file part of this API for a PDF given as a ``data:`` URL."""

    def attachment_text(self, found: list[Attachment], where: str) -> str:
        """What stands in for attachments an API cannot take in ``where``: one line naming
        them, so that the model learns they were there and no base64 is sent as text."""
        names = "; ".join(a.label() for a in found)
        return (
            f"[agenttrail] {len(found)} attachment(s) not sent ({where} takes text only): {names}"
        )

    @abstractmethod
    def turn(self, turn: AssistantTurn, at: int) -> list[Message]:
        """The messages or items of one assistant turn; ``at`` is the index of the first."""

    def system_role(self, payload: dict[str, Any]) -> str:
        """``developer`` for a developer message, else ``system``."""
        developer = payload.get("sourceRole") == "developer" or payload.get("role") == "developer"
        return "developer" if developer else "system"

    def system_message(self, item: SystemItem) -> Message | None:
        """A system prompt as an OpenAI message (role ``system`` or ``developer``); ``None``
        (noted) when it is empty."""
        text = self.text_of(item.event.payload)
        if not text:
            self.not_sent(item.event, "empty system message")
            return None
        return {"role": self.system_role(item.event.payload), "content": text}

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
