"""The API a live agent uses to write its session.

Example::

    import agenttrail

    log = agenttrail.open_log()                     # ./agenttrail.db or AGENTTRAIL_DATABASE_URL
    with agenttrail.Recorder.start(log, title="Compile check", agent="harvey") as rec:
        with rec.turn(model="claude-opus-4-6", provider="anthropic", location="remote") as turn:
            turn.user("Does harvey.go compile cleanly?")
            ids = turn.assistant(
                "Let me look.",
                tool_calls=[("read_file", {"path": "harvey.go"}), ("run_shell", {"cmd": "go vet"})],
                usage=agenttrail.usage(input=120, output=31),
            )
            turn.tool_result(ids[0], "package main ...")
            turn.tool_result(ids[1], "error: exit 1", exit_code=1)
            turn.reply("There is a compilation error.", usage=agenttrail.usage(input=180, output=9))
    # leaving the block closes the session (a session_end event)

Every method appends (:meth:`Turn.assistant`: one message and its calls together) and returns
what it appended (an :class:`~agenttrail.log.store.Appended`, or call ids). Appends commit
immediately: a crash loses nothing already written, and a tool result commits with its trace
row, in one transaction. :class:`agenttrail.AsyncRecorder` is the same API for asyncio, and
:func:`agenttrail.tool` records a Python function's runs as tool calls of the current turn.

A turn (:mod:`agenttrail.ingest.turn`) holds the session's turn lock as a lease renewed while
the agent lives (:mod:`agenttrail.ingest.turn_lease`); a killed agent's lease runs out within
``lease_s``, and the agent restarted on the session (``Recorder(log, session_id)``, same
holder) takes it over at once.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import TracebackType
from typing import Any

from agenttrail.codec import now_timestamp
from agenttrail.evidence.envelopes import EnvelopeSpec
from agenttrail.ingest.turn import Turn
from agenttrail.ingest.turn_lease import DEFAULT_TURN_LEASE_S, turn_lease_seconds
from agenttrail.log.store import Appended, LogStore
from agenttrail.model import Actor, NewSession, events

__all__ = ["TURN_LEASE_S", "Recorder", "Turn"]

TURN_LEASE_S = DEFAULT_TURN_LEASE_S
"""How long a turn's lease on the session's turn lock runs without a renewal (seconds), unless
``lease_s`` or ``AGENTTRAIL_TURN_LEASE_S`` says otherwise. The turn renews it while the agent
lives, so this is how long a crashed agent's lock outlives it, not how long a turn may take."""


class Recorder:
    """Writes one session's events as they happen; as a context manager (``with
    Recorder.start(…) as rec:``) it closes the session on exit (:meth:`__exit__`).

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
        self.closed: Appended | None = None
        """The ``session_end`` this recorder wrote (:meth:`close`), ``None`` before."""

    def __enter__(self) -> Recorder:
        """Use the recorder as a context manager: the session is closed on exit."""
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        """Close the session, unless :meth:`close` already did: reason ``closed``, or, when an
        exception ends the block, ``failed: <exception type>`` (the exception goes on)."""
        if self.closed is None:
            self.close("closed" if exc is None else f"failed: {type(exc).__name__}")

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
        """Record that the session ended (a ``session_end`` event with ``reason``)."""
        payload = {"type": "session_end", "reason": reason, "actor": Actor.SYSTEM.value}
        self.closed = self.append(payload, created_at=created_at)
        return self.closed
