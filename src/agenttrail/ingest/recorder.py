"""The API a live agent uses to write its session.

Example::

    import agenttrail

    log = agenttrail.open_log()                     # ./agenttrail.db or AGENTTRAIL_DATABASE_URL
    rec = agenttrail.Recorder.start(log, title="Compile check", agent="harvey", user="rsdoiel")
    rec.recall([{"id": "workspace_profile_250928", "source": "workspace_profile", "score": 1.0}])
    with rec.turn(model="llama3", provider="ollama", location="local") as turn:
        turn.user("Does harvey.go compile cleanly?")
        call = turn.tool_call("run_shell", {"cmd": "go build ./..."})
        turn.tool_result(call, output="error: exit 1")
        turn.reply("There is a compilation error.", usage=agenttrail.usage(input=120, output=9))
    rec.close()

Every method appends one event and returns its :class:`~agenttrail.log.store.Appended` (or, for
``tool_call``, the call id). Appends commit immediately: a crash loses nothing already written,
and a tool result commits with its trace row, in one transaction.

A turn holds the session's turn lock as a lease renewed while the agent lives
(:mod:`agenttrail.ingest.turn_lease`); a killed agent's lease runs out within ``lease_s``, and
the agent restarted on the session (``Recorder(log, session_id)``, same holder) takes it over at
once.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from types import TracebackType
from typing import Any

from agenttrail.codec import now_timestamp
from agenttrail.errors import RemoteError
from agenttrail.evidence.envelopes import DEFAULT_SPEC, EnvelopeSpec
from agenttrail.evidence.traces import trace_row
from agenttrail.ingest import traces
from agenttrail.ingest.turn_lease import DEFAULT_TURN_LEASE_S, TurnLeaseKeeper, turn_lease_seconds
from agenttrail.log.store import Appended, LogStore, TraceBuilder
from agenttrail.model import Actor, Event, NewEvent, NewSession, NewTrace, events

__all__ = ["TURN_LEASE_S", "Recorder", "Turn"]

TURN_LEASE_S = DEFAULT_TURN_LEASE_S
"""How long a turn's lease on the session's turn lock runs without a renewal (seconds), unless
``lease_s`` or ``AGENTTRAIL_TURN_LEASE_S`` says otherwise. The turn renews it while the agent
lives, so this is how long a crashed agent's lock outlives it, not how long a turn may take."""


class Recorder:
    """Writes one session's events as they happen.

    Args:
        store: the log (from :func:`agenttrail.open_log`).
        session_id: an existing session (a new one: :meth:`start`; a resumed agent passes the
            id of the session it goes on with).
        specs: envelope spec per tool name (trace rows).
        server: base URL of an ``agenttrail serve`` for streaming partials.
        token: a token with the ``append`` right on that server.
        holder: who holds the turn lock while a turn runs; default the session's agent name,
            else ``agent``. A turn takes over a lease this holder left behind (a crashed
            agent), so two agents writing one session at once need holders of their own.
        lease_s: the turn lease length in seconds, renewed every third of it while a turn
            runs; default ``AGENTTRAIL_TURN_LEASE_S``, else :data:`TURN_LEASE_S`.

    Raises:
        SessionNotFound: no such session.
        InputError: ``lease_s`` (or the environment variable) is out of its limits, 1 to
            3,600 s.
    """

    def __init__(
        self,
        store: LogStore,
        session_id: str,
        *,
        specs: Mapping[str, EnvelopeSpec] | None = None,
        server: str | None = None,
        token: str | None = None,
        holder: str | None = None,
        lease_s: float | None = None,
    ) -> None:
        self.store = store
        self.lease_s = turn_lease_seconds(lease_s)
        """Length of a turn's lease on the turn lock (seconds)."""
        self.session = store.get_session(session_id)
        self.session_id = session_id
        self.holder = holder or self.session.agent or "agent"
        """The holder identity of this recorder's turns on the turn lock."""
        self.specs = dict(specs or {})
        """Envelope spec per tool name; tools not named use the default spec (trace rows)."""
        self.server = server.rstrip("/") if server else None
        """Base URL of an ``agenttrail serve`` to send streaming partials to (optional)."""
        self.token = token
        """Token with the ``append`` right for that server."""

    @classmethod
    def start(
        cls,
        store: LogStore,
        *,
        session_id: str | None = None,
        title: str | None = None,
        agent: str | None = None,
        user: str | None = None,
        workspace: str | None = None,
        started: str | None = None,
        metadata: dict[str, Any] | None = None,
        specs: Mapping[str, EnvelopeSpec] | None = None,
        server: str | None = None,
        token: str | None = None,
        holder: str | None = None,
        lease_s: float | None = None,
    ) -> Recorder:
        """Create a session and return its recorder; ``started`` defaults to now. The
        keywords after ``metadata`` are the recorder's (see :class:`Recorder`).

        Raises:
            SessionExists: the id is taken.
            InputError: ``lease_s`` is out of its limits (nothing created).
        """
        turn_lease_seconds(lease_s)  # refused before the session is created
        started = started or now_timestamp()
        session = store.create_session(
            NewSession(session_id, title, agent, user, workspace, started, metadata or {})
        )
        return cls(
            store,
            session.id,
            specs=specs,
            server=server,
            token=token,
            holder=holder,
            lease_s=lease_s,
        )

    def append(
        self, payload: dict[str, Any], *, created_at: str | None = None, key: str | None = None
    ) -> Appended:
        """Append any payload (see :mod:`agenttrail.model.events` for the known shapes)."""
        return self.store.append(self.session_id, payload, created_at=created_at, key=key)

    def recall(
        self, results: list[dict[str, Any]], *, created_at: str | None = None
    ) -> Appended | None:
        """Record the memories injected at session start; nothing when ``results`` is empty.

        ``results`` are ``{id, source, score}`` mappings (docs/specs.md, The Harvey audit trail: W3,
        silent when nothing fires).
        """
        if not results:
            return None
        return self.append(events.recall(results, actor=Actor.SYSTEM.value), created_at=created_at)

    def shell(
        self,
        command: str,
        output: str,
        exit_code: int | None,
        *,
        actor: str = Actor.USER,
        created_at: str | None = None,
    ) -> Appended:
        """Record a shell command the user ran, with its output and exit code."""
        return self.append(
            events.shell(command, output, exit_code, actor=str(actor)), created_at=created_at
        )

    def note(self, text: str, *, kind: str = "note", created_at: str | None = None) -> Appended:
        """Record a runtime note (actor ``system``): a quiet aside, never the user's voice."""
        payload = {"type": "annotation", "kind": kind, "text": text, "actor": Actor.SYSTEM.value}
        return self.append(payload, created_at=created_at)

    def error(self, message: str, *, created_at: str | None = None, **extra: Any) -> Appended:
        """Record an error the runtime hit (actor ``system``)."""
        return self.append(
            events.error(message, actor=Actor.SYSTEM.value, **extra), created_at=created_at
        )

    def turn(
        self,
        *,
        model: str | None = None,
        provider: str | None = None,
        location: str = "local",
        character: str | None = None,
    ) -> Turn:
        """Open a turn: a user message and everything up to the reply.

        Args:
            model: the model the turn goes to (``llama3``, ``claude-opus-4-6``).
            provider: who serves it (``ollama``, ``anthropic``).
            location: ``local`` or ``remote``: where the computation runs.
            character: the name the model speaks under (default: ``model`` upper-cased).
        """
        return Turn(self, model=model, provider=provider, location=location, character=character)

    def close(self, reason: str = "closed", *, created_at: str | None = None) -> Appended:
        """Record that the session ended cleanly."""
        payload = {"type": "session_end", "reason": reason, "actor": Actor.SYSTEM.value}
        return self.append(payload, created_at=created_at)


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
        self._calls: dict[str, tuple[int, dict[str, Any]]] = {}

    def __enter__(self) -> Turn:
        """Hold the session's turn lock while the turn runs: a user's own tool invocation
        through the server is refused (HTTP 409) until the turn ends or its lease expires.
        The lease is renewed while the agent lives; one its holder left behind (a crashed
        agent restarted) is taken over at once.

        Raises:
            TurnInFlight: another holder's turn holds the lock.
        """
        self.lease.take()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        try:
            if exc is not None and isinstance(exc, Exception):
                self.recorder.error(f"turn failed: {type(exc).__name__}: {exc}")
        finally:
            self.lease.give_back()

    def _meta(
        self, usage: dict[str, int | None] | None = None, duration_ms: float | None = None
    ) -> dict[str, Any]:
        return events.meta(
            model=self.model,
            provider=self.provider,
            usage=usage,
            duration_ms=duration_ms,
            location=self.location,
        )

    def user(
        self, content: str, *, client_message_id: str | None = None, created_at: str | None = None
    ) -> Appended:
        """The user's message that opens the turn; ``client_message_id`` makes it idempotent."""
        payload = events.message(
            "user",
            content,
            actor=Actor.USER.value,
            meta=self._meta(),
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
        """Record a tool call as issued and return its id (drawn when not given).

        ``character`` names the model that requested the call when a user forwarded the turn with an
        @mention (docs/specs.md, The Harvey audit trail: W4); ``actor`` is ``user`` for a call the
        user ran.
        """
        call_id = id if id is not None else f"call_{uuid.uuid4().hex[:24]}"
        payload = events.tool_call(call_id, name, input, actor=str(actor), character=character)
        appended = self.recorder.append(payload, created_at=created_at, key=f"tool_call:{call_id}")
        if not appended.duplicate:  # a call stored before may differ: its row pairs from the log
            self._calls[call_id] = (appended.seq, payload)
        return call_id

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
            self._trace_of(call_id, payload, created_at),
        )
        traces.log_written(done.traces)
        return done.appended[0]

    def _trace_of(
        self, call_id: str, payload: dict[str, Any], created_at: str | None
    ) -> TraceBuilder:
        """The trace row builder of a tool result (run in the append's transaction)."""
        recorder = self.recorder
        issued = self._calls.get(call_id)

        def build(
            appended: Sequence[Appended], session: Callable[[], list[Event]]
        ) -> list[NewTrace]:
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
                turn_seq=self.user_seq,
                created_at=created_at or now_timestamp(),
                spec=recorder.specs.get(str(call.get("name")), DEFAULT_SPEC),
            )
            return [] if row is None else [row]

        return build

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
        server = self.recorder.server
        if server is None:
            return 0
        body: dict[str, Any] = {"done": done}
        if text_delta is not None:
            body["textDelta"] = text_delta
        if usage is not None:
            body["usage"] = usage
        if activity is not None:
            body["activity"] = activity
        import httpx  # only a streaming recorder needs an HTTP client

        url = f"{server}/v1/sessions/{self.recorder.session_id}/partials"
        headers = {"Authorization": f"Bearer {self.recorder.token or ''}"}
        try:
            response = httpx.post(url, json=body, headers=headers, timeout=10)
            response.raise_for_status()
        except httpx.HTTPError as e:
            raise RemoteError(f"partial to {server}: {e}") from e
        return int(response.json().get("delivered", 0))

    def reply(
        self,
        content: str,
        *,
        usage: dict[str, int | None] | None = None,
        duration_ms: float | None = None,
        created_at: str | None = None,
    ) -> Appended:
        """The model's reply that closes the turn, with its usage (tokens) and duration (ms)."""
        payload = events.message(
            "assistant",
            content,
            actor=Actor.AGENT.value,
            meta=self._meta(usage, duration_ms),
            character=self.character,
        )
        return self.recorder.append(payload, created_at=created_at)
