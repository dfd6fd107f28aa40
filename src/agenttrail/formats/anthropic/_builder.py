"""The session an Anthropic recording becomes: messages, responses and errors as events.

:class:`Builder` keeps the conversation so far (a fingerprint per message) so that each
request appends only the messages that are new, and the system prompt in force; mapping rules
are in the docstring of :mod:`agenttrail.formats.anthropic`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.errors import FormatError
from agenttrail.formats._common import import_warning, recorded_again, title_from
from agenttrail.formats.anthropic._blocks import (
    block_text,
    call_payload,
    check_blocks,
    check_messages,
    fingerprint,
    is_error_body,
    is_tool_block,
    kept_blocks,
    optional,
    result_payload,
    usage_counts,
)
from agenttrail.model import NewEvent, content_text, events
from agenttrail.providers import anthropic

__all__ = ["PROVIDER", "Builder"]

PROVIDER = "anthropic"
"""``meta.provider`` of every response."""


@dataclass
class Builder:
    """Turns messages, responses and errors into events, keeping the conversation so far."""

    path: Path
    events: list[NewEvent] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    conversation: list[Any] = field(default_factory=list)
    """Fingerprints of the messages sent and received so far (:func:`fingerprint`)."""
    system: Any = None
    """The system prompt in force."""
    title: str | None = None
    started: str | None = None
    meta: dict[str, Any] = field(default_factory=dict)
    """The session's metadata from the requests (client, URL, model, tools)."""
    exchanges: int = 0
    """How many recorded exchanges were read."""
    response_ids: dict[str, Any] = field(default_factory=dict)
    exchange_digests: dict[str, str] = field(default_factory=dict)
    """Response id → :func:`~agenttrail.formats._common.exchange_digest` of the exchange that
    first brought it: the same exchange again is a copy, another one under that id is not."""
    """The id of each response read so far, with its fingerprint: a response recorded again
    is imported once."""

    @property
    def where(self) -> str:
        return str(self.path)

    def fail(self, message: str, at: str) -> FormatError:
        """The :class:`FormatError` for this file at the field path ``at``."""
        return FormatError(message, path=self.where, field=at.lstrip(".") or None)

    def warn(self, text: str) -> None:
        """A warning, printed after the import."""
        self.warnings.append(f"{self.path}: {text}")  # the whole path, as every other format

    def add(self, payload: dict[str, Any], key: str, created_at: str | None) -> None:
        """Append one event; the first with a time gives the session's start."""
        self.events.append(NewEvent(payload, created_at, key))
        if self.started is None and created_at is not None:
            self.started = created_at

    def request(self, body: dict[str, Any], at: str, k: int, created: str | None) -> None:
        """A request body: its system prompt and the messages not yet in the conversation."""
        messages = check_messages(self, body.get("messages"), f"{at}.messages")
        if isinstance(body.get("model"), str) and "model" not in self.meta:
            self.meta["model"] = body["model"]
        tools = body.get("tools")
        if isinstance(tools, list) and "tools" not in self.meta:
            self.meta["tools"] = [t.get("name") for t in tools if isinstance(t, dict)]
        self.history(messages, f"{at}.messages", k, created, body.get("system"), f"{at}.system")

    def history(
        self,
        messages: list[dict[str, Any]],
        at: str,
        k: int,
        created: str | None,
        system: Any = None,
        system_at: str = "system",
    ) -> None:
        """Append the messages of request ``k`` that are not yet in the conversation."""
        prints = [fingerprint(m) for m in messages]
        same = 0
        while (
            same < min(len(prints), len(self.conversation))
            and prints[same] == self.conversation[same]
        ):
            same += 1
        if same < len(self.conversation):
            so_far = len(self.conversation)
            if same < len(messages):
                how = f"its message {same + 1} is not the conversation's message {same + 1}"
                after = len(messages) - same - 1
                done = "it is appended as sent"
                if after:
                    done = f"it and the {after} after it are appended as sent"
            else:
                how = f"it sends only {len(messages)} of the {so_far} messages"
                done = "nothing is appended"
            said = (
                f"exchange {k}: the request does not extend the conversation so far ({how}); {done}"
            )
            self.warn(said)
            if same < len(messages):  # in place, so that the transcript says it was sent so
                self.add(import_warning(f"{self.path.name}: {said}"), f"x{k}:diverged", created)
        self._system(system, system_at, k, created)
        for i in range(same, len(messages)):
            self.message(messages[i], f"{at}[{i}]", f"x{k}:m{i}", created)
        self.conversation = prints

    def _system(self, system: Any, at: str, k: int, created: str | None) -> None:
        """Emit the system prompt when it is new or differs from the one in force."""
        if system is None or system == self.system:
            return
        self.system = system
        if isinstance(system, str):
            payload = events.message("system", system, actor="system")
        elif isinstance(system, list):
            blocks = check_blocks(self, system, at)
            payload = events.message(
                "system", block_text(blocks), actor="system", blocks=kept_blocks(blocks)
            )
        else:
            raise self.fail("expected a string or a list of text blocks", at)
        self.add(payload, f"x{k}:system", created)

    # -- messages ----------------------------------------------------------------------------

    def message(self, message: dict[str, Any], at: str, key: str, created: str | None) -> None:
        """A message of a request's history (or of a bare message list)."""
        role, content = message["role"], message["content"]
        if role == "user":
            self._user(content, at, key, created)
        else:
            self._assistant(content, f"{at}.content", key, created, {})

    def _user(self, content: Any, at: str, key: str, created: str | None) -> None:
        if isinstance(content, str):
            self._title(content)
            self.add(events.message("user", content, actor="user"), key, created)
            return
        blocks = check_blocks(self, content, f"{at}.content")
        others = []
        results = 0
        for j, block in enumerate(blocks):
            if anthropic.is_tool_result(block["type"]):
                results += 1
                payload = result_payload(self, block, f"{at}.content[{j}]")
                self.add(payload, f"{key}:b{j}", created)
            else:
                others.append(block)
        if others or not results:
            text = block_text(others)
            self._title(text)
            actor = None if results else "user"
            payload = events.message("user", text, actor=actor, blocks=kept_blocks(others))
            self.add(payload, key, created)

    def _assistant(
        self,
        content: Any,
        at: str,
        key: str,
        created: str | None,
        extra: dict[str, Any],
        *,
        message_id: str | None = None,
        arguments: dict[int, str] | None = None,
    ) -> None:
        blocks = (
            [{"type": "text", "text": content}]
            if isinstance(content, str)
            else check_blocks(self, content, at)
        )
        others = [b for b in blocks if not is_tool_block(b["type"])]
        order = events.block_order(_parts(blocks))
        payload = events.message(
            "assistant",
            block_text(others),
            blocks=others if order is not None else kept_blocks(others),
            order=order,
            **extra,
        )
        self.add(payload, key, created)
        for j, block in enumerate(blocks):
            kind = block["type"]
            where = f"{at}[{j}]"
            if kind in anthropic.TOOL_CALL_BLOCKS:
                raw = (arguments or {}).get(j)
                call = call_payload(self, block, where, message_id, raw)
                self.add(call, f"{key}:b{j}", created)
            elif anthropic.is_tool_result(kind):
                self.add(result_payload(self, block, where), f"{key}:b{j}", created)

    def response(
        self,
        body: dict[str, Any],
        at: str,
        k: int,
        created: str | None = None,
        request_id: str | None = None,
        *,
        arguments: dict[int, str] | None = None,
        key: str | None = None,
        again_by_id: bool = True,
    ) -> None:
        """A successful response: one assistant message with meta, then its tool events.

        With ``again_by_id``, a response whose id and content were read before is a copy
        (a stream or message file recorded twice) and is not appended again; a recorded
        exchange decides that itself, request included, and passes ``False``."""
        if body.get("type") == "error":
            self.error(None, body, f"{key or f'x{k}'}:error", created, request_id)
            return
        content = body.get("content")
        if not isinstance(content, list):
            raise self.fail("expected a list of content blocks", f"{at}.content")
        message_id = optional(self, body, "id", str, at)
        if (
            again_by_id
            and message_id is not None
            and self.response_ids.get(message_id) == fingerprint(body)
        ):
            self.again(message_id, key or f"x{k}:response", created)
            return
        model = optional(self, body, "model", str, at)
        meta = events.meta(
            model=model,
            provider=PROVIDER,
            usage=usage_counts(self, body.get("usage"), f"{at}.usage"),
            usage_raw=body["usage"] if isinstance(body.get("usage"), dict) else None,
            location="remote",
        )
        extra = {
            "meta": meta,
            "messageId": message_id,
            "stopReason": body.get("stop_reason"),
            "stopSequence": body.get("stop_sequence"),
            "container": body.get("container"),
            "requestId": request_id,
        }
        self._assistant(
            content,
            f"{at}.content",
            key or f"x{k}:response",
            created,
            extra,
            message_id=message_id,
            arguments=arguments,
        )
        known = fingerprint(body)  # after _assistant checked the blocks it reads
        if message_id is not None:
            self.response_ids.setdefault(message_id, known)
        self.conversation = [*self.conversation, known]

    def again(self, response_id: str, key: str, created: str | None) -> None:
        """A response already read (same id), recorded again: not appended a second time; a
        warning, and an ``import_warning`` annotation in its place."""
        text = recorded_again(response_id)
        self.warn(text)
        self.add(import_warning(f"{self.path.name}: {text}"), f"{key}:again", created)
        known = self.response_ids[response_id]
        if not self.conversation or self.conversation[-1] != known:
            self.conversation = [*self.conversation, known]

    def error(
        self,
        status: int | None,
        body: Any,
        key: str,
        created: str | None,
        request_id: str | None = None,
        *,
        incomplete: bool = False,
    ) -> None:
        """An error response: ``{"type": "error", "error": {"type", "message"}}`` or any body.

        ``incomplete``: the error cut short the response before it (a stream's ``error`` event
        after some content), marked ``incomplete: true`` as capture marks a cut stream's."""
        error_type = None
        if is_error_body(body):
            detail = body["error"]
            message = detail.get("message")
            message = message if isinstance(message, str) else content_text(detail)
            error_type = detail.get("type")
            request_id = body.get("request_id") or request_id
        elif isinstance(body, str) and body:
            message = body
        elif body is not None:
            message = content_text(body)
        else:
            message = f"HTTP {status}"
        payload = events.error(
            message,
            code=status,
            errorType=error_type,
            requestId=request_id,
            incomplete=True if incomplete else None,
        )
        self.add(payload, key, created)

    def _title(self, text: str) -> None:
        if self.title is None:
            self.title = title_from(text)


def _parts(blocks: list[dict[str, Any]]) -> list[tuple[str, int | str]]:
    """The parts of an assistant message for :func:`~agenttrail.model.events.block_order`:
    its non-tool blocks by index among them, its calls and server results by id."""
    parts: list[tuple[str, int | str]] = []
    kept = 0
    for block in blocks:
        kind = block["type"]
        if kind in anthropic.TOOL_CALL_BLOCKS:
            parts.append(("toolCall", block.get("id") or ""))
        elif anthropic.is_tool_result(kind):
            parts.append(("toolResult", block.get("tool_use_id") or ""))
        else:
            parts.append(("block", kept))
            kept += 1
    return parts
