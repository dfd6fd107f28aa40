"""The event model: stored events, payload shapes, actors, meta and tool-result status.

A payload is a mapping with a ``type`` (docs/specs.md, The log: Event shapes;
docs/architecture.md, Vocabulary). The known shapes, built by the functions below::

    message      {type, role: user|assistant|system|tool, content: str, actor?, meta?,
                  blocks?, order?, toolCallId?, clientMessageId?, character?, agentId?,
                  source?}
    tool_call    {type, id: str, name: str, input, arguments?, actor?, character?, meta?,
                  caller?, agentId?, source?, pairedBy?}
    tool_result  {type, toolCallId?: str, name?, output?, error?, is_error?, exit_code?,
                  actor?, meta?, agentId?, source?, pairedBy?}
    error        {type, message: str, actor?, code?, source?}
    rag          {type, store: str, chunks: int, top_score: float|None}
    recall       {type, results: [{id, source, score}]}
    shell        {type, command: str, output: str, exit_code: int|None, actor?}
    annotation   {type, kind: str, text?, data?, actor?}   runtime notes kept beside messages
                                                          (progress lines, import warnings)
    session_end  {type, reason?}                          the session closed cleanly

An assistant message's ``order`` is the provider's order of its content when its blocks and
its tool calls interleave (``[text, tool_use, text, tool_use]``, thinking between calls, an
answer after the server tool result it cites): a list of ``{"block": i}`` (index into
``blocks``, which the message then always keeps), ``{"toolCall": id}`` and ``{"toolResult":
id}`` (the ``tool_call`` / server ``tool_result`` events written right after the message, by
id). Without it, the order is all ``blocks`` first, then the tool events in seq order, which is
how every message without interleaving (and every message stored before the field existed) is
read (:func:`block_order`; :func:`agenttrail.model.reading.content_order` reads it back).

``pairedBy`` names the rule that gave an id the source did not have: ``legacy_function_call``
(docs/log-format.md, Payload types). Any other mapping is kept verbatim and rendered
generically. ``meta`` is ``{model, provider, usage: {input, output, cache_read, cache_write},
usage_raw?, duration_ms, location?}``; usage counts are tokens, each token in exactly one kind
(:func:`usage`), and an unknown count is ``None``, never 0. ``usage_raw`` is the provider's own
usage object, verbatim.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Self, TypeVar, overload

from agenttrail.codec import decode_payload
from agenttrail.errors import InputError
from agenttrail.model.reading import ERASED, erased_payload

__all__ = [
    "Actor",
    "Event",
    "NewEvent",
    "block_order",
    "error",
    "event_actor",
    "message",
    "meta",
    "rag",
    "recall",
    "shell",
    "tool_call",
    "tool_result",
    "usage",
]

Payload = dict[str, Any]

_T = TypeVar("_T")


class _once(Generic[_T]):
    """A property computed on first use and kept in the instance's ``__dict__``, where later
    reads find it without calling anything: :func:`functools.cached_property` without its
    per-instance lock (Python 3.11 takes it on every first read, about a microsecond; a
    whole-session render reads ``payload``, ``type`` and ``actor`` of every event once). Two
    threads reading at once may both compute the value, which is the same either way."""

    def __init__(self, compute: Callable[[Any], _T]) -> None:
        self.compute = compute
        self.name = compute.__name__
        self.__doc__ = compute.__doc__

    @overload
    def __get__(self, instance: None, owner: type | None = None) -> Self: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...
    def __get__(self, instance: object | None, owner: type | None = None) -> _T | Self:
        if instance is None:
            return self
        value = instance.__dict__[self.name] = self.compute(instance)
        return value


class Actor(enum.StrEnum):
    """Who authored an event (docs/specs.md, The log: Actors)."""

    USER = "user"
    """The person using the agent, including tool calls they ran themselves."""
    AGENT = "agent"
    """The agent and the models it forwards to."""
    SYSTEM = "system"
    """The runtime speaking as itself; never in the user's voice."""
    TRIGGER = "trigger"
    """A trigger firing, not disguised as a user message."""


@dataclass(frozen=True)
class Event:
    """One durable row of a session's log, as stored.

    ``data`` is the canonical CBOR of the payload and ``hash`` the 32-byte chain hash of the
    row (``docs/log-format.md``). ``payload`` decodes ``data`` on first use.
    """

    session_id: str
    """The session the event belongs to."""
    seq: int
    """1, 2, 3 … per session, gapless; the only order."""
    created_at: str
    """RFC 3339 UTC with microseconds, e.g. ``2026-06-24T10:00:05.000000Z``; informational."""
    data: bytes = field(repr=False)
    """The payload's canonical CBOR bytes, exactly as stored and hashed."""
    hash: bytes = field(repr=False)
    """SHA-256 chain hash of this row (32 bytes)."""
    salt: bytes | None = field(default=None, repr=False)
    """Chain v2: the random salt of the payload's digest; ``None`` in a v1 row and once the
    event is erased (docs/log-format.md, Chain v2)."""
    digest: bytes | None = field(default=None, repr=False)
    """Chain v2: ``SHA-256(salt ‖ data)``, what the chain hash commits to; ``None`` in v1."""

    @classmethod
    def stored(
        cls,
        session_id: str,
        seq: int,
        created_at: str,
        data: bytes,
        hash: bytes,
        salt: bytes | None,
        digest: bytes | None,
    ) -> Event:
        """``Event(session_id, seq, created_at, data, hash, salt, digest)``, the same event,
        made for the store's reads without the frozen dataclass's ``__init__``, which sets
        each field through ``object.__setattr__``: about 1.5 µs an event against 0.5 µs,
        and a whole-session read makes one per row."""
        event = object.__new__(cls)
        fields = event.__dict__
        fields["session_id"], fields["seq"], fields["created_at"] = session_id, seq, created_at
        fields["data"], fields["hash"], fields["salt"], fields["digest"] = data, hash, salt, digest
        return event

    @property
    def erased(self) -> bool:
        """True when the payload was erased (``agenttrail erase``): its bytes and salt are
        gone, its digest keeps the chain whole."""
        return self.digest is not None and self.salt is None

    @_once
    def payload(self) -> Payload:
        """The decoded payload mapping; for an erased event the mapping
        :func:`agenttrail.model.reading.erased_payload` gives (the one reading rule)."""
        if self.erased:
            return erased_payload()
        value = decode_payload(self.data)
        return value if isinstance(value, dict) else {"type": None, "value": value}

    @_once
    def type(self) -> str | None:
        """The payload's ``type``, or ``None`` for an untyped mapping (read once: every view
        asks it of every event several times)."""
        kind = self.payload.get("type")
        return kind if isinstance(kind, str) else None

    @_once
    def actor(self) -> str:
        """The stored actor, or the one derived from the payload's shape (:func:`event_actor`),
        read once."""
        return event_actor(self.payload)


def event_actor(payload: Payload) -> str:
    """The actor of a payload: stored when known, else derived from its shape.

    Rule (docs/specs.md, The log: Actors): a user message is ``user``, an
    error, an erasure (the store's own record of ``agenttrail erase``) and an erased event
    (read as the store's note: who wrote it went with its payload) are ``system``,
    everything else is ``agent``. Derived at read time, never backfilled.
    """
    stored = payload.get("actor")
    if isinstance(stored, str) and stored in _ACTORS:
        return stored
    kind = payload.get("type")
    if kind == "message" and payload.get("role") == "user":
        return Actor.USER.value
    if kind in ("error", "erasure", ERASED):
        return Actor.SYSTEM.value
    return Actor.AGENT.value


_ACTORS = frozenset(a.value for a in Actor)


def usage(
    input: int | None = None,
    output: int | None = None,
    cache_read: int | None = None,
    cache_write: int | None = None,
) -> dict[str, int | None]:
    """Token usage of one model call, per kind; ``None`` where the provider did not say.

    The kinds are disjoint, so their sum is every token the call processed and a sum over
    calls counts no token twice (docs/log-format.md, Usage):

    - ``input``: prompt tokens neither read from nor written to a prompt cache;
    - ``output``: tokens generated (reasoning tokens included);
    - ``cache_read``: prompt tokens read from the cache;
    - ``cache_write``: prompt tokens written to the cache.

    Anthropic reports them this way (``input_tokens`` excludes ``cache_read_input_tokens`` and
    ``cache_creation_input_tokens``, https://docs.anthropic.com/en/docs/build-with-claude/
    prompt-caching); OpenAI's ``prompt_tokens`` / ``input_tokens`` include the cached tokens
    (``prompt_tokens_details.cached_tokens`` / ``input_tokens_details.cached_tokens``,
    https://platform.openai.com/docs/guides/prompt-caching), so its importer subtracts them.
    """
    return {"input": input, "output": output, "cache_read": cache_read, "cache_write": cache_write}


def meta(
    *,
    model: str | None = None,
    provider: str | None = None,
    usage: dict[str, int | None] | None = None,
    duration_ms: float | None = None,
    location: str | None = None,
    usage_raw: dict[str, Any] | None = None,
) -> Payload:
    """The ``meta`` mapping of an event: which model answered, where, at what cost.

    Args:
        model: the model's name as the provider reported it (``claude-opus-4-6``).
        provider: who served it (``anthropic``, ``openai``, ``ollama``).
        usage: token counts from :func:`usage`; ``None`` when unknown altogether.
        duration_ms: wall time of the call in milliseconds.
        usage_raw: the provider's usage object as it reported it, kept beside ``usage``
            (written as ``usage_raw`` only when given). Its presence also says that ``usage``
            follows the disjoint kinds of :func:`usage` (``model.reading.usage_of``).
        location: ``local`` or ``remote``, where the computation ran (Fountain INT./EXT.).

    Raises:
        InputError: ``location`` is neither.
    """
    out: Payload = {
        "model": model,
        "provider": provider,
        "usage": usage,
        "duration_ms": duration_ms,
    }
    if usage_raw is not None:
        out["usage_raw"] = usage_raw
    if location is not None:
        if location not in ("local", "remote"):
            raise InputError(f"location must be 'local' or 'remote', not {location!r}")
        out["location"] = location
    return out


def _build(kind: str, fields: Payload, extra: Payload) -> Payload:
    # Loops, not update() over generators: half the time, and every event is built here.
    payload: Payload = {"type": kind}
    for k, v in fields.items():
        if v is not None:
            payload[k] = v
    for k, v in extra.items():
        if v is not None:
            payload[k] = v
    return payload


def message(
    role: str, content: str, *, actor: str | None = None, meta: Payload | None = None, **extra: Any
) -> Payload:
    """A ``message`` payload: ``role`` is ``user``, ``assistant``, ``system`` or ``tool``."""
    return _build(
        "message", {"role": role, "content": content, "actor": actor, "meta": meta}, extra
    )


ORDER_KEYS = ("block", "toolCall", "toolResult")
"""The keys of the entries of a message's ``order``: a block's index, a call's id, a server
tool result's call id."""


def block_order(parts: Sequence[tuple[str, int | str]]) -> list[Payload] | None:
    """The ``order`` field of an assistant message from its content in the provider's order.

    Args:
        parts: ``("block", i)`` for ``blocks[i]``, ``("toolCall", id)`` for a call and
            ``("toolResult", id)`` for a server tool's result in the same message, in the
            order the provider gave them.

    Returns:
        ``[{"block": i} | {"toolCall": id} | {"toolResult": id}, ...]``, or ``None`` when no
        field is needed or none can be written: every block comes before every tool part
        (the order assumed without the field, so such payloads stay as they were before the
        field existed), or a tool part has no id to refer to it by.
    """
    seen_tool = interleaved = False
    for kind, value in parts:
        if kind == "block":
            interleaved = interleaved or seen_tool
        elif not (isinstance(value, str) and value):
            return None
        else:
            seen_tool = True
    if not interleaved:
        return None
    return [{kind: value} for kind, value in parts]


def tool_call(id: str, name: str, input: Any, *, actor: str | None = None, **extra: Any) -> Payload:
    """A ``tool_call`` payload: the call as issued, ``input`` as the model gave it."""
    payload = _build("tool_call", {"id": id, "name": name, "actor": actor}, extra)
    payload["input"] = input
    return payload


def tool_result(
    tool_call_id: str | None,
    name: str | None = None,
    *,
    output: Any = None,
    error: str | None = None,
    actor: str | None = None,
    **extra: Any,
) -> Payload:
    """A ``tool_result`` payload; ``tool_call_id`` is ``None`` when the source gave none."""
    fields = {"toolCallId": tool_call_id, "name": name, "output": output, "error": error}
    return _build("tool_result", {**fields, "actor": actor}, extra)


def error(message: str, *, actor: str | None = None, **extra: Any) -> Payload:
    """An ``error`` payload (derived actor: ``system``)."""
    return _build("error", {"message": message, "actor": actor}, extra)


def rag(store: str, chunks: int, top_score: float | None, *, actor: str | None = None) -> Payload:
    """A ``rag`` payload: RAG fired and prepended ``chunks`` chunks from ``store`` (Harvey W2).

    ``top_score`` is the best chunk's similarity score, ``None`` when the store gave none.
    """
    payload = _build("rag", {"store": store, "chunks": chunks, "actor": actor}, {})
    payload["top_score"] = top_score
    return payload


def recall(results: list[dict[str, Any]], *, actor: str | None = None) -> Payload:
    """A ``recall`` payload: memories injected at session start, ``[{id, source, score}]`` (W3)."""
    return _build("recall", {"results": results, "actor": actor}, {})


def shell(command: str, output: str, exit_code: int | None, **extra: Any) -> Payload:
    """A ``shell`` payload: a command the user ran, its output and exit code."""
    return _build(
        "shell", {"command": command, "output": output}, {"exit_code": exit_code, **extra}
    )


@dataclass(frozen=True, eq=False)
class NewEvent:
    """An event to append: its payload, optional ``created_at`` and idempotency ``key``.

    Two are equal when their payloads, ``created_at``, keys and salts are, however each was
    made (:meth:`from_data` included); ``data`` is how the payload was encoded."""

    payload: dict[str, Any]
    """The payload mapping (see :mod:`agenttrail.model.events`)."""
    created_at: str | None = None
    """Source timestamp in ``created_at`` form; ``None`` means the time of the append."""
    key: str | None = None
    """Idempotency key: a retry with a key already in the session writes nothing."""
    salt: bytes | None = field(default=None, repr=False)
    """Chain v2: the salt to store with the payload, to reproduce an exported chain (an
    import of agenttrail's own export); ``None`` draws a fresh one (``secrets``)."""
    data: bytes | None = field(default=None, repr=False, compare=False)
    """The payload's canonical CBOR when the caller has encoded it already
    (:func:`agenttrail.codec.encode_payload` of ``payload``, exactly): the store keeps these
    bytes instead of encoding the payload again (an import checks each payload's size and an
    export's hashes on the bytes it stores). ``None``: the store encodes ``payload``. A
    payload the store redacts is encoded again, from the redacted mapping."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, NewEvent):
            return NotImplemented
        mine = (self.payload, self.created_at, self.key, self.salt)
        return mine == (other.payload, other.created_at, other.key, other.salt)

    @classmethod
    def from_data(
        cls,
        data: bytes,
        created_at: str | None = None,
        key: str | None = None,
        salt: bytes | None = None,
        *,
        type: Any,
    ) -> NewEvent:
        """The event whose payload is ``data`` (canonical CBOR, as :attr:`data`), decoded only
        when :attr:`payload` is first read; ``type`` is the payload's ``type`` (``None`` when it
        has none), which :meth:`has_type` answers from without decoding.

        For a reader that holds many events until they are written (an import reads every
        file whole first): each keeps the bytes the store writes, not a decoded mapping beside
        them, which at 100,000 events took an eighth of ``agenttrail import``'s time and a
        quarter of its memory (docs/benchmarks.md). Equal to
        ``NewEvent(decode_payload(data), created_at, key, salt, data)``.
        """
        event = object.__new__(_Encoded)
        fields = event.__dict__
        fields["created_at"], fields["key"], fields["salt"] = created_at, key, salt
        fields["data"], fields["_type"] = data, type
        return event

    def has_type(self, kind: str) -> bool:
        """Whether the payload's ``type`` is ``kind``: what the store and the importer ask of
        every event, without decoding one made by :meth:`from_data`."""
        return bool(self.payload.get("type") == kind)


class _Encoded(NewEvent):
    """A :class:`NewEvent` made by :meth:`NewEvent.from_data`: its payload decoded on first
    read (and kept). One made from it by :func:`dataclasses.replace` holds its payload."""

    _type: Any
    """The payload's ``type``, as :meth:`NewEvent.from_data` was given it."""

    @_once
    def payload(self) -> dict[str, Any]:
        """The mapping :attr:`data` encodes."""
        assert self.data is not None, "from_data is given a payload's bytes"
        value = decode_payload(self.data)
        assert isinstance(value, dict), "from_data is given a payload's bytes"
        return value

    def has_type(self, kind: str) -> bool:
        if "_type" in self.__dict__:
            return bool(self._type == kind)
        return super().has_type(kind)  # made anew by dataclasses.replace
