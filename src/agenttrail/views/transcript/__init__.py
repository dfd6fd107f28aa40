"""The transcript as rows for the web viewer: one row per event, shaped from the whole session.

The log spec's transcript (docs/specs.md): "The transcript UI pairs each tool_call with its
tool_result into one row and interleaves finished run cards by completion time." A row is a
JSON-ready mapping for one seq; whether and how it shows depends on other events (a call's
result may sit thousands of seqs later), so rows are computed from a :class:`TranscriptIndex`
that holds the few facts of every event that rows depend on, built once and extended as the
log grows (the log is append-only, so an index of seqs 1..N stays true).

Every row has ``seq``, ``place`` (where the row reads in the session's order: rows are read
by ``(place, seq)``; ``place`` is the row's own seq except for a tool call of a message read
whole, below), ``created_at``, ``actor``, ``type``, ``hash``, ``meta`` (model, provider,
location, usage split into input, output, cache read and cache write tokens, duration in ms;
``None`` when the event has none), ``anomaly`` (from
:func:`agenttrail.views.pairing.pair_refs`), ``agent_id`` (a subagent's id on its events) and a
``view``:

    message   a user, agent, system or trigger message (``voice`` is the actor); ``runs``
              lists, for an assistant message whose text and tool calls interleave, each
              run's text and thinking and the ids of the calls that follow it
              (:mod:`agenttrail.views.order`), else ``None``; ``attachments`` names its
              images, documents and files (kind, media type, size, SHA-256, ``label``; in a
              ``full`` row an image's ``data_url``), never as text
    tool      a tool call and its result in one row, at the call's seq: name, arguments,
              status from :func:`agenttrail.model.tool_status`, duration, the result (its
              attachments in ``result_attachments``, as a message's ``attachments``)
    result    a tool result that pairs with no call (orphan, duplicate, missing id)
    run       a finished run card (below), at the seq of the result that finished the run
    context   ``rag``, ``recall`` and ``shell`` events
    error     an ``error`` event
    note      runtime annotations and ``session_end``: quiet asides
    event     any other shape, as JSON
    hidden    shown on another row: ``shown_at`` names it (a paired result on its call's row;
              a run's call and events inside its card; a later part of a message read whole
              on its first part's row)

**Messages stored in parts.** An API message imported while it grew is stored as the part seen
first and, later, the whole message (docs/log-format.md, Reading a session). The rows follow
:class:`agenttrail.model.parts.MessageParts`, the rule every reader of messages follows: the
first part's row shows the whole message (its text, blocks and usage, counted once there), the
later parts are ``hidden`` at it, and the message's tool calls have ``place`` = the first
part's seq, so they read right after it. When the whole message arrives after its part, the
page that carries it updates the first part's row and the calls' rows (``updates``).

**Runs.** A run is a subagent's piece of work that a tool call started and whose result ended
it (Claude Code's ``Task``/``Agent`` tool: the result's ``toolUseResult.agentId``, or an
``agentId`` in a mapping ``output``, names the run). The run's own events carry that
``agentId`` (Claude Code sidechain lines). A finished run is one card placed where its result
landed, so cards interleave with the conversation in completion order; the card holds the
call's prompt, the result's status, duration, tokens and tool uses, and its events (rows from
:meth:`TranscriptIndex.run_rows`). Until the result arrives, the call is an ordinary pending
tool row and the run's events show in place, each marked with its ``agent_id``.

Text from the log goes through :func:`agenttrail.views.safe.safe` (control and bidi characters
and lone surrogates become visible escapes) and is clipped to the ``*_CHARS`` limits unless
``full`` is asked for; ``*_chars`` fields give the whole length so a reader can load the rest.
"""

from agenttrail.views.transcript._cache import INDEX_CACHE_SIZE, IndexCache
from agenttrail.views.transcript._index import ANOMALY_SEQS, TranscriptIndex, TranscriptPage
from agenttrail.views.transcript._rows import (
    ARGS_CHARS,
    NOTE_CHARS,
    RESULT_CHARS,
    TEXT_CHARS,
    display_text,
)
from agenttrail.views.transcript._runs import Run, run_id_of

__all__ = [
    "ANOMALY_SEQS",
    "ARGS_CHARS",
    "INDEX_CACHE_SIZE",
    "NOTE_CHARS",
    "RESULT_CHARS",
    "TEXT_CHARS",
    "IndexCache",
    "Run",
    "TranscriptIndex",
    "TranscriptPage",
    "display_text",
    "run_id_of",
]
