"""Anthropic Messages API recordings: request/response pairs, bare bodies, message lists, SSE.

Inputs recognised (Messages API reference: https://docs.anthropic.com/en/api/messages)::

    exchanges   [{"request": {method, url, headers, body}, "response": {status_code, headers,
                  body}}, ...] or one such object (anthropic-sdk-python's inline snapshots)
    request     {model, messages: [{role, content}], system?, ...}      a bare request body
    response    {type: "message", role: "assistant", id, model, content: [...], usage, ...}
    messages    [{role: "user"|"assistant", content: str | [block, ...]}, ...]
    sse         event: message_start / content_block_* / message_delta / message_stop lines
                (https://docs.anthropic.com/en/docs/build-with-claude/streaming)

Mapping (the importer conventions of docs/architecture.md):

- ``system`` (a string or text blocks) → a ``system`` message with actor ``system``, once at
  the start and again only when a later request changes it.
- A user message: ``tool_result`` blocks → ``tool_result`` events (``toolCallId`` = the
  block's ``tool_use_id`` verbatim, ``output`` = its ``content`` verbatim, ``is_error`` kept),
  then the other blocks as one user message. Actor ``user`` is stored when the message holds
  no tool results (a prompt); text sent beside tool results may be runtime text, so its actor
  is left to be derived.
- An assistant message: one ``message`` (text blocks joined with ``\\n``; ``blocks`` = the
  non-tool blocks verbatim when they are more than one plain text block; ``messageId``,
  ``stopReason``, ``container`` and ``meta`` for a response), then in content order one
  ``tool_call`` per ``tool_use`` / ``server_tool_use`` / ``mcp_tool_use`` block (``caller``
  kept verbatim, ``server=True`` for server tools) and one ``tool_result`` per server tool
  result block (``*_tool_result``; ``is_error`` true when its content is a
  ``*_tool_result_error``, https://docs.anthropic.com/en/docs/agents-and-tools/tool-use/code-execution-tool).
  When blocks and tool blocks interleave, the message records the content's ``order`` and
  keeps every block (docs/log-format.md, Block order).
- A response with HTTP status ≥ 400, or an ``error`` body / SSE ``error`` event → an ``error``
  event (``code`` = status, ``errorType`` = ``error.type``;
  https://docs.anthropic.com/en/api/errors). An SSE ``error`` event that cuts a message short
  comes after that message (assembled from what arrived, with a warning) and has
  ``incomplete: true``.

Each request carries the whole history, so a file of exchanges is one session: exchange k
appends the request's messages after the longest common prefix with the conversation so far
(the previous request's messages and the previous response), compared by role, text and tool
ids, thinking blocks left out (:func:`._blocks.fingerprint`). A request that does not extend
that conversation is appended from where it differs, after an ``annotation`` of kind
``import_warning`` saying so (the transcript then shows what was sent: a result sent without
the call before it), with the same warning naming the exchange.
Pairing of calls and results is left to :func:`agenttrail.views.pairing.pair_tool_calls` (by
id over the whole session).

A response with the ``id`` of a response already read (a retried recording, two records of
one response) is imported once: its exchange adds nothing but a warning and an
``annotation`` of kind ``import_warning`` naming the message id.

Truncated SSE streams (no ``message_stop``) are assembled from what arrived, with a warning; a
last event whose JSON was cut off is dropped with a warning. Malformed JSON anywhere else, and
a content block without a ``type``, raise :class:`~agenttrail.errors.FormatError`.

Modules: :mod:`._detect` recognises the input; :mod:`._exchange` reads recorded exchanges
(for import, and through :mod:`._conversation` for live capture);
:mod:`._builder` keeps the conversation and appends the events; :mod:`._blocks` checks blocks
and maps them to payloads; :mod:`._stream` assembles streams. Block types:
:mod:`agenttrail.providers.anthropic`.
"""

from __future__ import annotations

from pathlib import Path

from agenttrail.errors import FormatError
from agenttrail.formats._common import ImportedSession, decode_text, lead, load_json
from agenttrail.formats.anthropic._blocks import check_messages
from agenttrail.formats.anthropic._builder import Builder
from agenttrail.formats.anthropic._conversation import Conversation
from agenttrail.formats.anthropic._detect import document_kind, sniff
from agenttrail.formats.anthropic._exchange import read_exchange
from agenttrail.formats.anthropic._stream import Streamed, assemble_sse
from agenttrail.model import NewSession

__all__ = ["NAME", "Conversation", "read", "sniff"]

NAME = "anthropic"


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read one Anthropic recording into one session.

    Args:
        path: the file's path (named in errors and warnings; ``path.name`` in metadata).
        data: the file's bytes: JSON (exchanges, a request or response body, a message list)
            or a Server-Sent Events stream of the Messages API.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` (the recordings carry no session
        id) and events in conversation order, each with a stable ``key``.

    Raises:
        FormatError: not UTF-8, malformed JSON or SSE data, a document of none of the shapes
            above, or a field of the wrong type (e.g. a content block without ``type``); the
            message names the file and the line or field.
    """
    builder = Builder(path)
    text = decode_text(path, data)
    if lead(text, 6).startswith(("event:", "data:", ":")):
        kind = "sse"
        for k, item in enumerate(assemble_sse(builder, text), start=1):
            if isinstance(item, Streamed):
                builder.response(item.body, f"line {item.line}", k, arguments=item.arguments)
            else:
                builder.error(None, item.data, f"x{k}:error", None, incomplete=item.interrupted)
    else:
        doc = load_json(path, text)
        found = document_kind(doc)
        if found is None:
            raise FormatError(
                "not an Anthropic Messages recording: expected request/response exchanges, a "
                "request or response body, a message list or an SSE stream",
                path=str(path),
            )
        kind = found
        if kind == "exchanges":
            items = doc if isinstance(doc, list) else [doc]
            for k, item in enumerate(items, start=1):
                read_exchange(builder, item, f"[{k - 1}]" if isinstance(doc, list) else "", k)
        elif kind == "request":
            builder.request(doc, "", 1, None)
        elif kind == "response":
            builder.response(doc, "", 1)
        else:
            builder.history(check_messages(builder, doc, ""), "", 1, None)
    return [_session(builder, kind)]


def _session(builder: Builder, kind: str) -> ImportedSession:
    metadata = {"format": NAME, "source": builder.path.name, "input": kind, **builder.meta}
    if builder.exchanges:
        metadata["exchanges"] = builder.exchanges
    new = NewSession(
        title=builder.title,
        agent=metadata.pop("agent", None),
        started=builder.started,
        metadata=metadata,
    )
    return ImportedSession(new, builder.events, builder.warnings)
