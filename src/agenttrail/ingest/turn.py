"""A turn of a live agent: a user message and everything up to the reply, as recorded.

A :class:`Turn` comes from :meth:`agenttrail.Recorder.turn` and is used as a context manager.
While it runs it holds the session's turn lock as a lease (:mod:`agenttrail.ingest.turn_lease`)
and it is the *current turn* of its context (:func:`current_turn`, a :mod:`contextvars`
variable), which is where a function decorated with :func:`agenttrail.tool` records its calls.
A context variable follows the code that runs the turn: the thread that entered it, and the
asyncio tasks and ``asyncio.to_thread`` calls started from it; a thread of your own does not
see it unless started under ``contextvars.copy_context().run``.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar, Token
from types import TracebackType
from typing import TYPE_CHECKING, Any

from agenttrail.codec import now_timestamp
from agenttrail.errors import RemoteError
from agenttrail.evidence.envelopes import DEFAULT_SPEC
from agenttrail.evidence.traces import trace_row
from agenttrail.ingest import traces
from agenttrail.ingest.assistant import CallSpec, assistant_events, call_id, model_meta
from agenttrail.ingest.turn_lease import TurnLeaseKeeper
from agenttrail.log.store import Appended, TraceBuilder
from agenttrail.model import Actor, Event, NewEvent, NewTrace, events

if TYPE_CHECKING:
    from agenttrail.ingest.recorder import Recorder

__all__ = ["Turn", "current_turn"]

_CURRENT: ContextVar[Turn | None] = ContextVar("agenttrail_current_turn", default=None)


def current_turn() -> Turn | None:
    """The turn the calling code runs in (the innermost ``with rec.turn()`` or ``async with``
    of its context), or ``None`` outside every turn."""
    return _CURRENT.get()


class Turn:
    """One request–response cycle; use as a context manager from :meth:`Recorder.turn`.

    An exception inside the ``with`` block is recorded as an ``error`` event (actor
    ``system``) and re-raised.
    """

    def __init__(
        self,
        recorder: Recorder,
        *,
        model: str | None,
        provider: str | None,
        location: str,
        character: str | None,
    ) -> None:
        self.recorder = recorder
        self.model = model
        self.provider = provider
        self.location = location
        self.character = character or (model.upper() if model else None)
        events.meta(location=location)  # validates location early
        self.user_seq: int | None = None
        """Seq of the user message that began this turn."""
        self.turn_id = f"turn_{uuid.uuid4().hex[:16]}"
        """Names this turn's lease on the session's turn lock."""
        self.lease = TurnLeaseKeeper(
            recorder.store,
            recorder.session_id,
            turn_id=self.turn_id,
            holder=recorder.holder,
            lease_s=recorder.lease_s,
        )
        """The turn's lease on the turn lock, renewed while the turn runs (``lease.lost``
        says why it stopped early, if it did)."""
        self._issued = _Issued()
        self._token: Token[Turn | None] | None = None

    def __enter__(self) -> Turn:
        """Hold the session's turn lock while the turn runs: a user's own tool invocation
        through the server is refused (HTTP 409) until the turn ends or its lease expires.
        The lease is renewed while the agent lives; one its holder left behind (a crashed
        agent restarted) is taken over at once. The turn becomes the current turn.

        Raises:
            TurnInFlight: another holder's turn holds the lock.
        """
        self.lease.take()
        self.bind()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unbind()
        self.finish(exc)

    def bind(self) -> None:
        """Make this the current turn of the calling context (what ``__enter__`` does once
        the lease is taken; :class:`agenttrail.AsyncTurn` calls it in its task)."""
        self._token = _CURRENT.set(self)

    def unbind(self) -> None:
        """Undo :meth:`bind`, in the context that called it."""
        if self._token is not None:
            _CURRENT.reset(self._token)
            self._token = None

    def finish(self, exc: BaseException | None) -> None:
        """Record the failure that ended the turn, if any, and give the lease back."""
        try:
            if exc is not None and isinstance(exc, Exception):
                self.recorder.error(f"turn failed: {type(exc).__name__}: {exc}")
        finally:
            self.lease.give_back()

    def user(
        self, content: str, *, client_message_id: str | None = None, created_at: str | None = None
    ) -> Appended:
        """The user's message that opens the turn; ``client_message_id`` makes it idempotent."""
        payload = events.message(
            "user",
            content,
            actor=Actor.USER.value,
            meta=events.meta(model=self.model, provider=self.provider, location=self.location),
            clientMessageId=client_message_id,
        )
        key = f"client:{client_message_id}" if client_message_id else None
        appended = self.recorder.append(payload, created_at=created_at, key=key)
        self.user_seq = appended.seq
        return appended

    def rag(
        self, store: str, chunks: int, top_score: float | None, *, created_at: str | None = None
    ) -> Appended | None:
        """Record that RAG prepended ``chunks`` chunks; nothing when ``chunks`` is 0."""
        if chunks <= 0:
            return None
        payload = events.rag(store, chunks, top_score, actor=Actor.SYSTEM.value)
        return self.recorder.append(payload, created_at=created_at)

    def assistant(
        self,
        text: str | None = None,
        *,
        tool_calls: Sequence[CallSpec] = (),
        usage: Mapping[str, int | None] | None = None,
        usage_raw: Mapping[str, Any] | None = None,
        model: str | None = None,
        provider: str | None = None,
        duration_ms: float | None = None,
        message_id: str | None = None,
        character: str | None = None,
        created_at: str | None = None,
    ) -> list[str]:
        """Record one model response: its text and the tool calls it asked for, together.

        One ``message`` and one ``tool_call`` per call, appended in one transaction in the
        importers' layout (:mod:`agenttrail.ingest.assistant`), so the log, ``show`` and
        every replay target show one assistant message carrying all its calls, the text
        first, and its usage is counted once. Record each result with :meth:`tool_result`
        (or let a function decorated with :func:`agenttrail.tool` do it).

        Args:
            text: the message's text; ``None`` or ``""`` when it only calls tools.
            tool_calls: the calls, in the model's order: :class:`~agenttrail.ToolCall`, or
                ``(name, input)`` / ``(name, input, id)``; an id is drawn when not given.
            usage: the model call's tokens in the four disjoint kinds of
                :func:`agenttrail.usage` (docs/log-format.md, Usage); ``None`` when unknown.
            usage_raw: the provider's own usage object, kept verbatim as ``meta.usage_raw``.
            model, provider: who answered; default the turn's.
            duration_ms: the model call's wall time (milliseconds).
            message_id: the provider's response id; drawn when ``None``. Recording the same
                message again with it (and its call ids) writes nothing.
            character: the name the model speaks under; default the turn's.
            created_at: one timestamp for the message and its calls; default now.

        Returns:
            The call ids, in order.

        Raises:
            InputError: neither text nor calls, a call given wrongly or an id twice, a usage
                key or count that is not one of the four kinds (nothing written).
            PayloadTooLarge: the message or a call is above the store's limit (nothing
                written).
        """
        meta = model_meta(
            model=model or self.model,
            provider=provider or self.provider,
            usage=usage,
            usage_raw=usage_raw,
            duration_ms=duration_ms,
            location=self.location,
            where="Turn.assistant",
        )
        batch, calls = assistant_events(
            text,
            tool_calls,
            meta=meta,
            message_id=message_id,
            character=character or self.character,
            created_at=created_at,
        )
        appended = self.recorder.store.append_batch(self.recorder.session_id, batch)
        for event, done in zip(batch[1:], appended[1:], strict=True):
            self._issued.add(done, event.payload)
        return [str(c.id) for c in calls]

    def tool_call(
        self,
        name: str,
        input: Any,
        *,
        id: str | None = None,
        character: str | None = None,
        actor: str = Actor.AGENT,
        created_at: str | None = None,
    ) -> str:
        """Record one tool call without a message and return its id (drawn when not given); a
        model's calls go with their message (:meth:`assistant`). ``character`` names the model
        that requested the call when a user forwarded the turn with an @mention (docs/specs.md,
        The Harvey audit trail: W4); ``actor`` is ``user`` for a call the user ran."""
        new_id = call_id(id)
        payload = events.tool_call(new_id, name, input, actor=str(actor), character=character)
        appended = self.recorder.append(payload, created_at=created_at, key=f"tool_call:{new_id}")
        self._issued.add(appended, payload)
        return new_id

    def call_for(self, name: str, input: Any) -> str:
        """The id of the call that a run of tool ``name`` with ``input`` answers: the first
        call of this turn with that name and an equal input and no result yet (one the model
        asked for in :meth:`assistant`), else a new call recorded now (:meth:`tool_call`).

        What :func:`agenttrail.tool` uses, so that a decorated tool's result pairs with the
        model's call rather than adding a second one. A call it returns is not returned again.
        """
        claimed = self._issued.claim(name, input)
        return claimed if claimed is not None else self.tool_call(name, input)

    def tool_result(
        self,
        call_id: str,
        output: Any = None,
        *,
        name: str | None = None,
        error: str | None = None,
        exit_code: int | None = None,
        actor: str = Actor.AGENT,
        duration_ms: float | None = None,
        created_at: str | None = None,
    ) -> Appended:
        """Record what a tool returned (or the ``error`` it failed with).

        When the output is a response envelope (a JSON object with ``model``, ``specVersion``,
        ``inputs`` and ``outputs``, or the tool's own spec), a trace row is written with it,
        in the same transaction, and its record hash checked (built by
        :mod:`agenttrail.evidence.traces`, logged by :mod:`agenttrail.ingest.traces`). A
        retry of a result already stored writes the row if the log lacks it. Pass the
        envelope as the text the tool returned to keep its exact bytes.
        """
        payload = events.tool_result(
            call_id,
            name,
            output=output,
            error=error,
            actor=str(actor),
            exit_code=exit_code,
            meta=events.meta(duration_ms=duration_ms) if duration_ms is not None else None,
        )
        key = f"tool_result:{call_id}"
        done = self.recorder.store.append_traced(
            self.recorder.session_id,
            [NewEvent(payload, created_at, key)],
            _trace_of(self, self._issued.answered(call_id), payload, created_at),
        )
        traces.log_written(done.traces)
        return done.appended[0]

    def partial(
        self,
        text_delta: str | None = None,
        *,
        done: bool = False,
        usage: dict[str, int | None] | None = None,
        activity: str | None = None,
    ) -> int:
        """Send a streaming patch to the live subscribers while the reply streams.

        Patches are ephemeral (docs/specs.md, The log: ``appendPartial``): they go to the
        recorder's ``server`` (``POST /v1/sessions/{id}/partials``) and are never stored; the
        durable reply comes with :meth:`reply`. Without a ``server`` this does nothing.

        Returns:
            How many subscribers got it (0 without a server).

        Raises:
            RemoteError: the server refused or could not be reached.
        """
        body: dict[str, Any] = {"done": done}
        if text_delta is not None:
            body["textDelta"] = text_delta
        if usage is not None:
            body["usage"] = usage
        if activity is not None:
            body["activity"] = activity
        return _send_partial(self.recorder, body)

    def reply(
        self,
        content: str,
        *,
        usage: dict[str, int | None] | None = None,
        usage_raw: Mapping[str, Any] | None = None,
        duration_ms: float | None = None,
        created_at: str | None = None,
    ) -> Appended:
        """The model's reply that closes the turn, with its usage (tokens, the four kinds of
        :func:`agenttrail.usage`; the provider's own object as ``usage_raw``) and duration
        (ms). A reply that also calls tools is :meth:`assistant`.

        Raises:
            InputError: a usage key or count that is not one of the four kinds.
        """
        meta = model_meta(
            model=self.model,
            provider=self.provider,
            usage=usage,
            usage_raw=usage_raw,
            duration_ms=duration_ms,
            location=self.location,
            where="Turn.reply",
        )
        payload = events.message(
            "assistant", content, actor=Actor.AGENT.value, meta=meta, character=self.character
        )
        return self.recorder.append(payload, created_at=created_at)


class _Issued:
    """The calls a turn recorded: seq and payload by id (their results' trace rows), and
    which have no result yet (:meth:`Turn.call_for`). Tools of one turn may record from
    several threads at once, hence the lock."""

    def __init__(self) -> None:
        self.calls: dict[str, tuple[int, dict[str, Any]]] = {}
        self.open: dict[str, tuple[str, Any]] = {}  # id → (name, input)
        self.lock = threading.Lock()

    def add(self, appended: Appended, payload: dict[str, Any]) -> None:
        if appended.duplicate:  # a call stored before may differ: its row pairs from the log
            return
        with self.lock:
            self.calls[payload["id"]] = (appended.seq, payload)
            self.open[payload["id"]] = (payload["name"], payload["input"])

    def claim(self, name: str, input: Any) -> str | None:
        """The first call of ``name`` and ``input`` without a result, taken off the list."""
        with self.lock:
            for call_id, issued in self.open.items():
                if issued == (name, input):
                    del self.open[call_id]
                    return call_id
        return None

    def answered(self, call_id: str) -> tuple[int, dict[str, Any]] | None:
        """Mark a call answered; its seq and payload, when this turn recorded it."""
        with self.lock:
            self.open.pop(call_id, None)
            return self.calls.get(call_id)


def _trace_of(
    turn: Turn,
    issued: tuple[int, dict[str, Any]] | None,
    payload: dict[str, Any],
    created_at: str | None,
) -> TraceBuilder:
    """The trace row builder of a tool result (run in the append's transaction). The row
    holds the call and the envelope as the log keeps them: redacted (docs/redaction.md),
    here, before the transaction."""
    recorder = turn.recorder
    redact = recorder.store.redactor.payload
    payload = redact(payload)
    issued = None if issued is None else (issued[0], redact(issued[1]))

    def build(appended: Sequence[Appended], session: Callable[[], list[Event]]) -> list[NewTrace]:
        result = appended[0]
        if issued is None or result.duplicate:
            # A retry of a stored result (its row may be missing: written before rows
            # committed with their results) or a call this turn did not record (a
            # resumed agent): pair it over the log, as stored.
            return traces.rows_for(
                recorder.session_id, session(), specs=recorder.specs, results={result.seq}
            )
        call_seq, call = issued
        row = trace_row(
            recorder.session_id,
            call_seq=call_seq,
            call=call,
            result_seq=result.seq,
            result=payload,
            turn_seq=turn.user_seq,
            created_at=created_at or now_timestamp(),
            spec=recorder.specs.get(str(call.get("name")), DEFAULT_SPEC),
        )
        return [] if row is None else [row]

    return build


def _send_partial(recorder: Recorder, body: dict[str, Any]) -> int:
    """POST a partial to the recorder's server; 0 without one (see :meth:`Turn.partial`)."""
    server = recorder.server
    if server is None:
        return 0
    import httpx  # only a streaming recorder needs an HTTP client

    url = f"{server}/v1/sessions/{recorder.session_id}/partials"
    headers = {"Authorization": f"Bearer {recorder.token or ''}"}
    try:
        response = httpx.post(url, json=body, headers=headers, timeout=10)
        response.raise_for_status()
    except httpx.HTTPError as e:
        raise RemoteError(f"partial to {server}: {e}") from e
    return int(response.json().get("delivered", 0))
