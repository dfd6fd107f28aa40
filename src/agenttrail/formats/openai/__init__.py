"""OpenAI recordings: Chat Completions and Responses API traffic, read into one session per file.

Inputs (recognised by :func:`sniff`, read by :func:`read`)::

    [{role, content, tool_calls?, tool_call_id?, name?, function_call?}, ...]   a message list
                                               (each message may be a JSON-encoded string,
                                               as tracing span attributes store them)
    [[message, ...], [message, ...], ...]      successive requests, no responses (ToolBench
                                               ``train_messages``)
    [{type: function_call | message | ...}, ...]   Responses API input items
    {model, messages: [...], ...}              a Chat Completions request body
    {model, input: str | [item, ...], ...}     a Responses request body
    {object: "chat.completion", choices, ...}  a response body alone (or ``object: "response"``)
    {request, response} or a list of them      recorded traffic: ``request`` is a body or
                                               ``{method, url, headers, body}``, ``response`` a
                                               body or ``{status_code, headers, body}``
    interactions: [{request: {body, uri, method, headers},      a VCR cassette (YAML or JSON;
                    response: {status: {code}, headers, body: {string}}}]   vcrpy's layout)

A response body may be JSON or the server-sent events of a stream; a stream is assembled into
the final message (:mod:`agenttrail.formats.openai._stream`; fragments are never stored).
Cassettes and ``{request, response}`` records are unpacked by
:mod:`agenttrail.formats.http.recording`. Exchanges with other endpoints (embeddings, ...) are
skipped with a warning.

Mapping (the importer conventions of docs/architecture.md):

- Every exchange appends the request's messages that are new, then the response. A Chat
  Completions request carries the whole history, so its new messages are those after the longest
  common prefix with the previous request's messages plus the previous response (compared by
  role, text and tool call ids); a request that does not extend the previous conversation has
  its differing tail appended after an ``annotation`` of kind ``import_warning`` saying so (and
  the same warning naming the exchange). A Responses request with
  ``previous_response_id`` continues that response and all its input items are new; one without
  starts afresh (its input appended as given) unless it strictly extends the conversation so
  far, which is how a stateless client (``store: false``) resends history.
- ``system`` / ``developer`` messages → ``message`` role ``system``, actor ``system``
  (``sourceRole="developer"`` kept); Responses ``instructions`` likewise
  (``sourceField="instructions"``), once per conversation and again when they change.
  ``tool`` messages and ``*_call_output`` items → ``tool_result`` with the call id verbatim
  (``None`` when absent). The importer never invents or repairs an id: pairing is
  :func:`agenttrail.views.pairing.pair_tool_calls`, strictly by id. The one exception is the
  legacy protocol, which has no ids: a ``function_call`` gets the synthetic id
  ``legacy_call_<seq>`` (its seq in the imported session, so re-import gives the same), and
  the next role ``function`` message, when it names the same function and comes before the
  next assistant message, gets that id as ``toolCallId``; both carry ``pairedBy:
  "legacy_function_call"`` (:data:`agenttrail.providers.openai.LEGACY_PAIRING`). Any other
  ``function`` message has no id.
- An assistant turn → one ``message`` (content ``""`` when it only called tools; ``meta`` with
  the responding model, provider ``openai``, usage, location ``remote``; ``messageId``,
  ``finishReason``; ``choice`` when the response has several) followed by one ``tool_call`` per
  call, in order, its arguments parsed into ``input`` and kept raw as ``arguments`` (an
  object given in place of the JSON string is the ``input`` as it is, with no ``arguments``).
  Responses items with a ``call_id`` (``function_call``, ``custom_tool_call``, ...) are the
  calls: id = ``call_id``, the item id kept as ``itemId``; ``reasoning`` and other items
  (server-side tool calls) stay on the message as ``blocks``, verbatim; when they and the calls
  interleave (reasoning between two calls) the message records the ``order``
  (docs/log-format.md, Block order).
- Usage (docs/log-format.md, Usage): Chat Completions ``prompt_tokens`` /
  ``completion_tokens`` / ``prompt_tokens_details.cached_tokens``; Responses ``input_tokens``
  / ``output_tokens`` / ``input_tokens_details.cached_tokens``; the cached tokens are taken
  out of ``input`` (OpenAI counts them inside the prompt) and are ``cache_read``; cache writes
  are not reported (``None``); the usage object is kept verbatim as ``meta.usage_raw``; a
  response without ``usage`` has ``usage: None``, never zeros.
- HTTP status >= 400 → ``error`` with the provider's message and ``code`` = the status.
  A response that answered and carries an ``error`` too (a stream ended by an error: a
  Responses ``error`` event, a Chat Completions chunk carrying ``error``; a ``failed``
  response with output) → the assistant turn as far as it went, then that ``error``
  (``code`` = the error's own, ``incomplete: true``: it cut the answer short).
- A Responses stream that ends before ``response.completed`` → its output items as far as
  they arrived (text and function-call arguments joined from their deltas), with the
  ``status`` its ``response.created`` gave (``in_progress``), and a warning.
- An exchange whose response has the ``id`` of a response already read (a retried recording,
  two records of one response) is imported once: the copy adds nothing but a warning and an
  ``annotation`` of kind ``import_warning`` naming the response id.
- ``created_at``: the response's ``created`` / ``created_at`` (Unix seconds), else its ``Date``
  header; a request's messages take their response's time.

Modules: :mod:`._detect` recognises the input and lists its exchanges; :mod:`._conversation`
reads a conversation exchange by exchange (for import and live capture); :mod:`._builder` keeps
the session and the conversation so far; :mod:`._chat` and :mod:`._responses` read each API's
bodies; :mod:`._stream` assembles streams. Block and item types: :mod:`agenttrail.providers.openai`.

Provider references: https://platform.openai.com/docs/api-reference/chat/create,
https://platform.openai.com/docs/api-reference/chat-streaming,
https://platform.openai.com/docs/api-reference/responses/create,
https://platform.openai.com/docs/api-reference/responses-streaming,
https://platform.openai.com/docs/guides/function-calling, and the cassette layout of vcrpy
(https://vcrpy.readthedocs.io/en/latest/advanced.html).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agenttrail.formats._common import ImportedSession, decode_text, lead, load_json
from agenttrail.formats.http.recording import Exchange, fail, load_yaml
from agenttrail.formats.openai._builder import Builder
from agenttrail.formats.openai._conversation import Conversation
from agenttrail.formats.openai._detect import exchanges, sniff
from agenttrail.model import NewSession

__all__ = ["NAME", "Conversation", "read", "read_messages", "sniff"]

NAME = "openai"


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read an OpenAI recording into one session (shapes and mapping in the module docstring).

    Args:
        path: the file, named in errors, warnings and the session's ``metadata.source``.
        data: its bytes.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` (the registry derives one from the
        bytes), warnings for requests that do not extend the conversation, skipped non-chat
        endpoints and truncated streams.

    Raises:
        FormatError: not UTF-8, not JSON/YAML, not an OpenAI shape, nothing to import, or a
            field of the wrong type (a ``role`` that is not a string, ...); names the file and
            the line or field.
    """
    text = decode_text(path, data)
    if lead(text) in ("[", "{"):
        doc = load_json(path, text)
    else:
        doc = load_yaml(path, text)
        if not isinstance(doc, dict) or "interactions" not in doc:
            raise fail(path, "not a VCR cassette: expected a top-level 'interactions' list")
    conversation = Conversation(path)  # the reading live capture shares (ingest/capture)
    for exchange in exchanges(doc, path):
        conversation.add(exchange)
    builder = conversation.builder
    if not builder.events:
        skipped = f" ({len(builder.warnings)} exchanges skipped)" if builder.warnings else ""
        raise fail(path, f"no messages or responses to import{skipped}")
    return [_session(builder)]


def read_messages(path: Path, messages: list[Any], where: str) -> ImportedSession:
    """Read one Chat Completions message list found inside another format's file into one
    session, as :func:`read` reads a bare message list (shapes in the module docstring).

    Args:
        path: the file, named in errors and the session's ``metadata.source``.
        messages: the message list.
        where: its field path in the file (``answer_generation.train_messages[2]``), named in
            errors.

    Returns:
        One :class:`ImportedSession` with ``id`` ``None`` and ``metadata.format`` ``openai``.

    Raises:
        FormatError: as :func:`read`; the field paths start at ``where``.
    """
    conversation = Conversation(path)
    conversation.add(Exchange(1, where, request={"messages": messages}, list_where=where))
    builder = conversation.builder
    if not builder.events:
        raise fail(path, "no messages to import", where)
    return _session(builder)


def _session(builder: Builder) -> ImportedSession:
    started = next((e.created_at for e in builder.events if e.created_at), None)
    metadata: dict[str, Any] = {"format": NAME, "source": builder.path.name}
    if builder.model is not None:
        metadata["model"] = builder.model
    new = NewSession(
        id=None, title=builder.title, agent=builder.agent, started=started, metadata=metadata
    )
    return ImportedSession(new, builder.events, builder.warnings)
