"""Read views of payloads: the one home of what the text of a content value is, whether a tool
result failed, and what its output says.

Every view (terminal, web rows, Fountain, search), replay and the evidence read payloads
through these functions, so a rule is stated once (docs/architecture.md, One of each rule).

Content arrives as a plain string (OpenAI), a list of blocks of which some carry ``text``
(Anthropic, Claude Code, Responses parts), or any JSON value (tool outputs).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from agenttrail.codec import json_line

__all__ = [
    "ERASED",
    "USAGE_KINDS",
    "Attachment",
    "ContentPart",
    "ToolStatus",
    "attachment_of",
    "attachments",
    "content_order",
    "content_text",
    "context_text",
    "erased_payload",
    "failed",
    "message_text",
    "note_line",
    "other_blocks",
    "output_text",
    "payload_attachments",
    "prose_text",
    "text_of",
    "tool_status",
    "usage_of",
    "usage_totals",
]

ERASED = "erased"
"""The ``type`` an erased event reads as (``agenttrail erase``, docs/log-format.md)."""


def erased_payload() -> dict[str, Any]:
    """What an erased event reads as everywhere (show, export, replay, Fountain, the viewer):
    ``{"type": "erased", "note": "payload erased (agenttrail erase)"}``, which every view
    writes as it writes any payload of a type it does not know. Its bytes are gone; the
    erasure event that removed them says who, when, why (docs/log-format.md, Erasure)."""
    return {"type": ERASED, "note": "payload erased (agenttrail erase)"}


Payload = dict[str, Any]


def _blocks(value: Any) -> list[dict[str, Any]] | None:
    if isinstance(value, list) and all(isinstance(b, dict) for b in value):
        return value
    return None


def text_of(value: Any) -> str | None:
    """The prose of a content value, or ``None`` when it holds none.

    Returns:
        A string as it is; for a list of blocks (mappings), the ``text`` of every block that
        has one, joined with newlines; ``None`` for anything else (no text at all).
    """
    if isinstance(value, str):
        return value
    blocks = _blocks(value)
    if blocks is None:
        return None
    texts = [b["text"] for b in blocks if isinstance(b.get("text"), str)]
    return "\n".join(texts) if texts else None


def reasoning_of(block: Any) -> str | None:
    """The reasoning a content block holds, as text: the ``thinking`` of Anthropic's
    ``thinking`` block (https://platform.claude.com/docs/en/build-with-claude/extended-thinking),
    or the ``content`` of the OpenTelemetry conventions' ``reasoning`` part as the OTLP
    receiver keeps it (gen-ai-input-messages.json, ReasoningPart); ``None`` for any other
    block."""
    if not isinstance(block, dict):
        return None
    thinking = block.get("thinking")
    if isinstance(thinking, str):
        return thinking
    content = block.get("content")
    return content if block.get("type") == "reasoning" and isinstance(content, str) else None


def content_text(value: Any) -> str:
    """Readable text of a content value: its prose (:func:`text_of`), else compact JSON, and
    ``""`` for ``None``."""
    if value is None:
        return ""
    text = text_of(value)
    return text if text is not None else json_line(value)


NOTE_SKIP = frozenset({"uuid", "parentUuid", "sessionId", "messageId", "timestamp", "cwd"})
"""Fields of a note's data that identify rather than say anything (ids, times, folders)."""


def note_line(data: Any) -> str:
    """An annotation's data as one line, as every view sums it up: its ``content`` text, else
    the scalar fields of it (or of the ``data`` mapping it wraps, as a Claude Code progress
    line does: ``hook_progress · bd prime · SessionStart:startup``) but those of
    :data:`NOTE_SKIP`, joined by `` · ``, else compact JSON."""
    if isinstance(data, dict):
        if isinstance(data.get("content"), str):
            return str(data["content"])
        wrapped = data.get("data")
        inner: dict[str, Any] = wrapped if isinstance(wrapped, dict) else data
        scalars = [
            str(v)
            for k, v in inner.items()
            if k not in NOTE_SKIP and isinstance(v, str | int | float) and not isinstance(v, bool)
        ]
        if scalars:
            return " · ".join(scalars)
    return json_line(data, spaced=True)


def call_name(payload: Payload) -> str:
    """A ``tool_call``'s name as every view writes it: after the character that made it when
    the source names one (a Harvey file's ``[[MISTRAL.tool: read_file(…)]]``:
    ``MISTRAL.read_file``); ``?`` for a call that names no tool."""
    name = payload.get("name", "?")
    who = payload.get("character")
    return f"{who}.{name}" if isinstance(who, str) and who else str(name)


def end_text(payload: Payload) -> str:
    """What a ``session_end`` event says, as every view writes it: ``session closed``, or
    ``session <reason>`` when it gives one (docs/log-format.md, Payload types)."""
    return f"session {payload.get('reason') or 'closed'}"


def context_text(payload: Payload) -> tuple[str, str] | None:
    """What a ``rag``, ``recall`` or ``shell`` event, or an ``erasure`` record, says, as every
    view writes it (docs/log-format.md, Payload types): ``(headline, body)``, the body ``""``
    when there is none; ``None`` for any other type.

    - rag: ``("3 chunks from rag_store.db, top score 0.87", "")``
    - recall: ``("2 memories recalled", "<id> (<source>) — score <score>"`` a line each``)``
    - shell: ``("$ go build ./... — exit 1", <its output as text>)``
    - erasure: ``("erased seq 7, 9 by alice: leaked key", "")``
    """
    kind = payload.get("type")
    if kind == "rag":
        chunks, store, top = (payload.get(k) for k in ("chunks", "store", "top_score"))
        return f"{chunks} chunks from {store}, top score {top}", ""
    if kind == "recall":
        results = payload.get("results")
        items = [r for r in results if isinstance(r, dict)] if isinstance(results, list) else []
        lines = [f"{r.get('id')} ({r.get('source')}) — score {r.get('score')}" for r in items]
        title = f"{len(items)} memor{'y' if len(items) == 1 else 'ies'} recalled"
        return title, "\n".join(lines)
    if kind == "shell":
        said = f"$ {payload.get('command')} — exit {payload.get('exit_code')}"
        return said, content_text(payload.get("output"))
    if kind == "erasure":
        seqs = payload.get("seqs")
        named = ", ".join(str(n) for n in seqs) if isinstance(seqs, list) else "?"
        return f"erased seq {named} by {payload.get('by')}: {payload.get('reason')}", ""
    return None


def message_text(payload: Payload) -> str:
    """The prose of a message payload's ``content``; ``""`` when it has none. Never JSON of
    tool-use or other blocks (their numbers are a call, not something the message says)."""
    return text_of(payload.get("content")) or ""


def other_blocks(value: Any) -> list[str]:
    """The ``type`` of every block of a content value that carries no text (``image``,
    ``tool_use``, ...), in order; ``[]`` for a string or a value that is not a block list."""
    blocks = _blocks(value)
    if blocks is None:
        return []
    return [str(b.get("type")) for b in blocks if not isinstance(b.get("text"), str)]


@dataclass(frozen=True)
class ContentPart:
    """One entry of an assistant message's content in the provider's order."""

    kind: str
    """``block``, ``toolCall`` or ``toolResult``."""
    block: dict[str, Any] | None = None
    """For ``block``: the block (from the payload's ``blocks``)."""
    id: str | None = None
    """For ``toolCall`` / ``toolResult``: the id of the ``tool_call`` event (a result's
    ``toolCallId``) it stands for."""


def content_order(payload: Payload) -> list[ContentPart] | None:
    """An assistant message's blocks and tool events in the provider's order, from its
    ``order`` field (docs/log-format.md, Block order).

    Returns:
        The parts in order, every block of ``blocks`` exactly once; ``None`` when the payload
        has no ``order`` (its order is then all ``blocks``, then its tool events in seq order:
        every payload stored before the field, and every one whose blocks all come first), or
        when the field is malformed (an index out of range or twice, an entry of another
        shape), so that a damaged field is read as no field rather than losing a block.
    """
    order = payload.get("order")
    blocks = _blocks(payload.get("blocks"))
    if not isinstance(order, list) or blocks is None:
        return None
    parts: list[ContentPart] = []
    used: set[int] = set()
    for entry in order:
        if not isinstance(entry, dict) or len(entry) != 1:
            return None
        [(kind, value)] = entry.items()
        if kind == "block":
            if not isinstance(value, int) or isinstance(value, bool) or value in used:
                return None
            if not 0 <= value < len(blocks):
                return None
            used.add(value)
            parts.append(ContentPart("block", block=blocks[value]))
        elif kind in ("toolCall", "toolResult") and isinstance(value, str) and value:
            parts.append(ContentPart(kind, id=value))
        else:
            return None
    return parts if len(used) == len(blocks) else None


def output_text(result: Payload) -> str:
    """A ``tool_result`` payload's output as text (:func:`content_text`), or its error text
    when it has no output."""
    output = result.get("output")
    error = result.get("error")
    if output is None and error is not None:
        return error if isinstance(error, str) else json_line(error)
    return content_text(output)


@dataclass(frozen=True)
class ToolStatus:
    """Whether a tool call succeeded, from its result alone."""

    ok: bool
    """False when the result says the call failed."""
    detail: str
    """``""`` when ok; else the first line of the error (``exit 1``)."""

    def __str__(self) -> str:
        return "ok" if self.ok else f"error: {self.detail}" if self.detail else "error"


def _exit_code(result: Payload) -> int | None:
    code = result.get("exit_code")
    return code if isinstance(code, int) and not isinstance(code, bool) else None


def failed(result: Payload) -> bool | None:
    """What a result says about failing, as a provider's ``is_error`` flag would: the flag as
    recorded; else ``True`` for an ``error`` field or a non-zero exit code; else ``None``
    (nothing says it failed). Replay sends this as Anthropic's ``is_error``."""
    flag = result.get("is_error")
    if isinstance(flag, bool):
        return flag
    if result.get("error") or _exit_code(result) not in (None, 0):
        return True
    return None


def tool_status(result: Payload) -> ToolStatus:
    """The status of a ``tool_result`` payload, taken from the result itself.

    Rule (docs/specs.md, The Harvey audit trail: W1): an ``error`` field, a non-zero
    ``exit_code``, ``is_error`` true, or output text starting with ``error:`` mean failure;
    the detail is the first line of the error text (without the ``error:`` prefix).
    """
    err = result.get("error")
    if err:
        return ToolStatus(False, _first_line(err if isinstance(err, str) else str(err)))
    exit_code = _exit_code(result)
    if exit_code not in (None, 0):
        return ToolStatus(False, f"exit {exit_code}")
    text = content_text(result.get("output"))
    # the first six characters lowered, not the whole output (a 100 KiB one was copied);
    # only İ lowers to two characters, and neither of them is in "error:"
    if result.get("is_error") is True or text.lstrip()[:6].lower() == "error:":
        return ToolStatus(False, _first_line(_strip_error(text)))
    return ToolStatus(True, "")


def _strip_error(text: str) -> str:
    stripped = text.lstrip()
    return stripped[6:].lstrip() if stripped.lower().startswith("error:") else stripped


def _first_line(text: str) -> str:
    return text.strip().split("\n", 1)[0].strip()


# -- attachments ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Attachment:
    """An image, document, file or audio clip inside a content value, named without its bytes.

    The block stays in the log whole; views show this instead of base64 (docs/log-format.md,
    Attachments).
    """

    kind: str
    """``image``, ``document``, ``file`` or ``audio`` (or an OpenTelemetry part's modality,
    ``video``)."""
    media_type: str | None
    """The MIME type the block gives (``image/png``), ``None`` when it gives none."""
    size: int | None
    """Bytes of the content held in the log (base64 decoded); ``None`` for a reference only
    (a URL or a provider's file id)."""
    sha256: str | None
    """Hex SHA-256 of those bytes; ``None`` for a reference only."""
    data: str | None = None
    """The content as base64, when the log holds it (for a ``data:`` URL)."""
    reference: str | None = None
    """Where the content is instead: a URL or ``file id <id>``."""
    name: str | None = None
    """A file name or document title the block gives."""

    def label(self, size_text: Callable[[int], str] | None = None) -> str:
        """``image/png, 12,345 bytes, sha256 ab12cd34`` (the digest cut to 8 hex digits), or
        ``image, https://…`` for a reference.

        ``size_text`` writes the size: the views shown to a person pass
        :func:`agenttrail.views.units.size_text` (``12.1 KiB``); without it the exact count,
        as replay's placeholders and the search index keep it."""
        head = self.media_type or self.kind
        if self.name:
            head = f"{head} {self.name}"
        if self.size is None or self.sha256 is None:
            return f"{head}, {self.reference or 'no content'}"
        size = f"{self.size:,} bytes" if size_text is None else size_text(self.size)
        return f"{head}, {size}, sha256 {self.sha256[:8]}"

    def data_url(self) -> str | None:
        """``data:<media type>;base64,<data>`` (RFC 2397) when the log holds the bytes."""
        if self.data is None:
            return None
        return f"data:{self.media_type or 'application/octet-stream'};base64,{self.data}"


def _held(
    kind: str, media_type: Any, data: Any, name: Any = None, *, encoded: bool = True
) -> Attachment:
    """An attachment whose content the log holds: base64 ``data`` (or text when not
    ``encoded``), measured and digested as the bytes it stands for."""
    media = media_type if isinstance(media_type, str) and media_type else None
    label = name if isinstance(name, str) and name else None
    text = data if isinstance(data, str) else ""
    raw: bytes
    if encoded:
        try:
            raw = base64.b64decode("".join(text.split()), validate=True)
        except (binascii.Error, ValueError):
            raw = text.encode("utf-8", "surrogatepass")  # not base64: the text as given
        b64 = text
    else:
        raw = text.encode("utf-8", "surrogatepass")
        b64 = base64.b64encode(raw).decode("ascii")
    return Attachment(kind, media, len(raw), hashlib.sha256(raw).hexdigest(), b64, None, label)


def _from_url(kind: str, url: Any, name: Any = None, media_type: Any = None) -> Attachment | None:
    """An attachment given by URL: a ``data:`` URL (RFC 2397) is content held in the log."""
    if not isinstance(url, str) or not url:
        return None
    if url.startswith("data:") and "," in url:
        head, data = url[5:].split(",", 1)
        params = head.split(";")
        return _held(kind, params[0] or media_type, data, name, encoded="base64" in params[1:])
    label = name if isinstance(name, str) and name else None
    media = media_type if isinstance(media_type, str) else None
    return Attachment(kind, media, None, None, reference=url, name=label)


def _from_file_id(kind: str, file_id: Any, name: Any = None) -> Attachment | None:
    if not isinstance(file_id, str) or not file_id:
        return None
    label = name if isinstance(name, str) and name else None
    return Attachment(kind, None, None, None, reference=f"file id {file_id}", name=label)


def attachment_of(block: Any) -> Attachment | None:
    """The attachment a content block is, or ``None`` for any other block.

    Shapes read (each provider's, as recorded):

    - Anthropic ``image`` / ``document`` with a ``source`` of type ``base64`` (``media_type``,
      ``data``), ``text`` (plain text), ``url`` or ``file`` (``file_id``)
      (https://platform.claude.com/docs/en/build-with-claude/vision, .../pdf-support);
      Claude Code tool results hold the same blocks;
    - Chat Completions ``image_url`` (``{url}``, a ``data:`` URL or a link), ``file``
      (``{file_data, file_id, filename}``) and ``input_audio`` (``{data, format}``)
      (https://platform.openai.com/docs/api-reference/chat/create, user message content parts);
    - Responses ``input_image`` (``image_url`` or ``file_id``) and ``input_file``
      (``file_data``, ``file_url``, ``file_id``, ``filename``)
      (https://platform.openai.com/docs/api-reference/responses/create, input content);
    - the OpenTelemetry GenAI conventions' ``blob`` (base64 ``content``), ``uri`` and
      ``file`` (``file_id``) parts, each with its ``modality`` (``image``, ``audio``,
      ``video``) as the kind and an optional ``mime_type`` (gen-ai-input-messages.json,
      v1.41.0), as the OTLP importer keeps them.
    """
    if not isinstance(block, dict):
        return None
    kind = block.get("type")
    modality = block.get("modality")
    if isinstance(modality, str) and modality and kind in ("blob", "uri", "file"):
        media = block.get("mime_type")
        if kind == "blob":
            return _held(modality, media, block.get("content"))
        if kind == "uri":
            return _from_url(modality, block.get("uri"), media_type=media)
        return _from_file_id(modality, block.get("file_id"))
    if kind in ("image", "document"):
        source = block.get("source")
        if not isinstance(source, dict):
            return None
        name = block.get("title")
        how = source.get("type")
        if how == "base64":
            return _held(kind, source.get("media_type"), source.get("data"), name)
        if how == "text":
            media = source.get("media_type") or "text/plain"
            return _held(kind, media, source.get("data"), name, encoded=False)
        if how == "url":
            return _from_url(kind, source.get("url"), name)
        if how == "file":
            return _from_file_id(kind, source.get("file_id"), name)
        return None
    if kind == "image_url":
        spec = block.get("image_url")
        return _from_url("image", spec.get("url") if isinstance(spec, dict) else spec)
    if kind == "input_image":
        found = _from_url("image", block.get("image_url"))
        return found or _from_file_id("image", block.get("file_id"))
    if kind in ("file", "input_file"):
        spec = block.get("file") if kind == "file" else block
        if not isinstance(spec, dict):
            return None
        name = spec.get("filename")
        data = spec.get("file_data")
        if isinstance(data, str) and data and not data.startswith("data:"):
            return _held("file", None, data, name)
        return (
            _from_url("file", data, name)
            or _from_url("file", spec.get("file_url"), name)
            or _from_file_id("file", spec.get("file_id"), name)
        )
    if kind == "input_audio":
        spec = block.get("input_audio")
        if not isinstance(spec, dict):
            return None
        form = spec.get("format")
        return _held("audio", f"audio/{form}" if isinstance(form, str) else None, spec.get("data"))
    return None


def attachments(value: Any) -> list[Attachment]:
    """Every attachment in a content value, in order: its blocks, and the blocks nested in a
    block's (or a mapping's) ``content`` list (a ``tool_result`` block, a Responses message
    item, an MCP-style ``{content: [...]}`` output)."""
    found: list[Attachment] = []
    items = value if isinstance(value, list) else [value] if isinstance(value, dict) else []
    for item in items:
        attachment = attachment_of(item)
        if attachment is not None:
            found.append(attachment)
        elif isinstance(item, dict) and isinstance(item.get("content"), list):
            found.extend(attachments(item["content"]))
    return found


def payload_attachments(payload: Payload) -> list[Attachment]:
    """The attachments of a payload: a message's ``blocks`` (else its ``content``), a tool
    result's ``output``; ``[]`` for any other payload."""
    kind = payload.get("type")
    if kind == "message":
        blocks = payload.get("blocks")
        return attachments(blocks if isinstance(blocks, list) else payload.get("content"))
    if kind == "tool_result":
        return attachments(payload.get("output"))
    return []


def _without_attachments(value: Any) -> Any:
    if isinstance(value, list):
        return [_without_attachments(item) for item in value if attachment_of(item) is None]
    if isinstance(value, dict) and isinstance(value.get("content"), list):
        return {**value, "content": _without_attachments(value["content"])}
    return value


def prose_text(value: Any) -> str:
    """Readable text of a content value without its attachments: :func:`content_text` of
    what is left once every attachment block is taken out (``""`` when nothing is), so that
    no view shows base64; the views name the attachments (:func:`attachments`) beside it."""
    if not attachments(value):
        return content_text(value)
    rest = _without_attachments(value)
    if rest == [] or (isinstance(rest, dict) and rest.get("content") == [] and len(rest) == 1):
        return ""
    return content_text(rest)


USAGE_KINDS = ("input", "output", "cache_read", "cache_write")
"""The token kinds of ``meta.usage``, disjoint (:func:`agenttrail.model.events.usage`)."""


def usage_of(meta: Any) -> dict[str, int | None] | None:
    """The token usage of an event's ``meta``, each token in one kind; ``None`` when the meta
    reports none.

    Rule (docs/log-format.md, Usage): the kinds are disjoint. Events that OpenAI's importer
    wrote before ``meta.usage_raw`` existed counted the cache reads inside ``input`` too;
    they are recognised by provider ``openai`` and no ``usage_raw`` key, and read with the
    cache reads taken out of ``input`` (the stored bytes are never rewritten). A count that
    is not an integer reads as ``None``.

    Returns:
        ``{input, output, cache_read, cache_write}`` in tokens, ``None`` where unknown.
    """
    if not isinstance(meta, dict) or not isinstance(meta.get("usage"), dict):
        return None
    usage = meta["usage"]
    counts: dict[str, int | None] = {}
    for kind in USAGE_KINDS:  # a count is an int, never a bool; every row and header reads it
        value = usage.get(kind)
        plain = type(value) is int or (isinstance(value, int) and not isinstance(value, bool))
        counts[kind] = value if plain else None
    prompt, cached = counts["input"], counts["cache_read"]
    old_openai = meta.get("provider") == "openai" and "usage_raw" not in meta
    if old_openai and prompt is not None and cached is not None and cached <= prompt:
        counts["input"] = prompt - cached
    return counts


def usage_totals(payloads: Iterable[Payload]) -> dict[str, int | None]:
    """Token totals of payloads (a session's events), per kind, no token counted twice.

    Each payload's ``meta`` is read with :func:`usage_of`; payloads without usage add
    nothing.

    Returns:
        ``{input, output, cache_read, cache_write}``: the sum of each kind over the payloads
        that report it, ``None`` for a kind none reports (never a made-up 0).
    """
    totals: dict[str, int | None] = dict.fromkeys(USAGE_KINDS)
    for payload in payloads:
        counts = usage_of(payload.get("meta")) if isinstance(payload, dict) else None
        for kind, count in (counts or {}).items():
            if count is not None:
                totals[kind] = (totals[kind] or 0) + count
    return totals
