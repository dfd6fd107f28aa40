"""Signed checkpoints: a session's heads, signed with Ed25519, to keep somewhere else.

The hash chain shows that nothing changed *since a head you trust*; whoever can write the
database can rebuild the whole chain and its head. A checkpoint pins a head outside the
database: a statement ``{type, session_id, seq, head_hash, trace_count, trace_hash,
created_at}`` in RFC 8785 canonical JSON, signed with an Ed25519 key (RFC 8032, via
``cryptography``). ``trace_count`` and ``trace_hash`` are the head of the session's trace-row
chain (docs/log-format.md, Chain v2; ``0`` and ``null`` for a v1 session, whose trace rows are
not chained). Verifying a log against a checkpoint proves that the log still *extends* it: the
signature holds, the event at the checkpoint's seq still has the checkpoint's hash, the
trace row at its trace count still has its trace hash, and both chains from there to today's
heads verify. A history rewritten consistently by hand, events or trace rows, passes
``verify`` alone and fails here. Checkpoints of type ``agenttrail-checkpoint/v1`` (made
before trace heads were signed) still verify, for the events they name.
"""

from __future__ import annotations

import base64
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from agenttrail.codec import canonical_json, json_line, now_timestamp
from agenttrail.errors import InputError, SessionNotFound
from agenttrail.log.chain import ChainReader, trace_chain_problems, verify

__all__ = [
    "CHECKPOINT_TYPE",
    "CheckpointVerdict",
    "checkpoint_json",
    "generate_keys",
    "load_checkpoint",
    "make_checkpoint",
    "verify_checkpoint",
]

CHECKPOINT_TYPE = "agenttrail-checkpoint/v2"
"""The ``type`` of every checkpoint statement made now (domain separation for the
signature)."""

_STATEMENTS = {
    "agenttrail-checkpoint/v1": ("type", "session_id", "seq", "head_hash", "created_at"),
    CHECKPOINT_TYPE: (
        "type",
        "session_id",
        "seq",
        "head_hash",
        "trace_count",
        "trace_hash",
        "created_at",
    ),
}
"""The signed fields of each type of checkpoint."""


def generate_keys() -> tuple[bytes, bytes]:
    """A new Ed25519 key pair as PEM: ``(private PKCS#8, public SubjectPublicKeyInfo)``."""
    private = Ed25519PrivateKey.generate()
    return (
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        ),
        private.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        ),
    )


def _private_key(pem: bytes, where: str) -> Ed25519PrivateKey:
    try:
        key = serialization.load_pem_private_key(pem, password=None)
    except (ValueError, TypeError) as e:
        raise InputError(f"{where}: not a PEM private key ({e})") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise InputError(f"{where}: not an Ed25519 private key")
    return key


def _public_key(pem: bytes, where: str) -> Ed25519PublicKey:
    try:
        key = serialization.load_pem_public_key(pem)
    except (ValueError, TypeError) as e:
        raise InputError(f"{where}: not a PEM public key ({e})") from None
    if not isinstance(key, Ed25519PublicKey):
        raise InputError(f"{where}: not an Ed25519 public key")
    return key


def make_checkpoint(
    store: ChainReader, session_id: str, private_key_pem: bytes, *, key_name: str = "key"
) -> dict[str, Any]:
    """Sign the session's current head and trace head.

    Returns:
        ``{type, session_id, seq, head_hash (hex), trace_count, trace_hash (hex or null),
        created_at, signature (base64)}``; the signature covers the RFC 8785 canonical JSON
        of every other field.

    Raises:
        SessionNotFound: no such session.
        InputError: the key is not an Ed25519 private key in PEM.
    """
    key = _private_key(private_key_pem, key_name)
    session = store.get_session(session_id)
    traces = store.trace_chain(session_id)
    chained = traces.version == 2 and traces.hash is not None
    statement = {
        "type": CHECKPOINT_TYPE,
        "session_id": session.id,
        "seq": session.head_seq,
        "head_hash": session.head_hash.hex(),
        "trace_count": traces.rows_chained if chained else 0,
        "trace_hash": traces.hash.hex() if chained and traces.hash else None,
        "created_at": now_timestamp(),
    }
    signature = key.sign(canonical_json(statement))
    return {**statement, "signature": base64.b64encode(signature).decode("ascii")}


def load_checkpoint(path: Path) -> dict[str, Any]:
    """Read a checkpoint file. Raises ``InputError`` naming the file and the field."""
    try:
        value = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read checkpoint: {e.strerror or e}") from None
    except ValueError as e:
        raise InputError(f"{path}: not a checkpoint (invalid JSON: {e})") from None
    if not isinstance(value, dict) or value.get("type") not in _STATEMENTS:
        raise InputError(f"{path}: not an agenttrail checkpoint (type {CHECKPOINT_TYPE!r})")
    fields: list[tuple[str, type | tuple[type, ...]]] = [
        ("session_id", str),
        ("seq", int),
        ("head_hash", str),
        ("signature", str),
    ]
    if value["type"] == CHECKPOINT_TYPE:
        fields += [("trace_count", int), ("trace_hash", (str, type(None)))]
    for name, kind in fields:
        if not isinstance(value.get(name), kind):
            expected = kind.__name__ if isinstance(kind, type) else "str or null"
            raise InputError(f"{path}: field {name!r}: expected {expected}")
    return value


@dataclass(frozen=True)
class CheckpointVerdict:
    """Whether the log still extends a checkpoint."""

    session_id: str
    seq: int
    """The checkpoint's seq."""
    ok: bool
    reason: str = ""


def verify_checkpoint(
    store: ChainReader, checkpoint: dict[str, Any], public_key_pem: bytes, *, key_name: str = "key"
) -> CheckpointVerdict:
    """Prove that the log still extends a signed checkpoint.

    Checks, in order: the signature over the statement (Ed25519, RFC 8032); the session is
    still in the log; the stored hash of the event at the checkpoint's seq equals the
    checkpoint's head hash (at seq 0, the session's genesis: its fields, docs/log-format.md,
    Chain v2); the hash of trace row number ``trace_count`` (in the order
    written) equals its ``trace_hash``; the session's chain verifies from seq 1 to today's
    head and its trace chain from the first row to today's trace head (so everything after
    the checkpoint hangs off it).

    Raises:
        InputError: the key is not an Ed25519 public key in PEM.
    """
    key = _public_key(public_key_pem, key_name)
    session_id, seq = checkpoint["session_id"], checkpoint["seq"]
    statement = {
        name: checkpoint.get(name) for name in _STATEMENTS.get(str(checkpoint.get("type")), ())
    }

    def fail(reason: str) -> CheckpointVerdict:
        return CheckpointVerdict(session_id, seq, False, reason)

    try:
        key.verify(
            base64.b64decode(checkpoint["signature"], validate=True), canonical_json(statement)
        )
    except (InvalidSignature, ValueError):
        return fail("the signature does not verify with this public key")
    try:
        store.get_session(session_id)
    except SessionNotFound:  # removed (by retention or by hand): the log no longer extends it
        return fail(f"session {session_id} named by the checkpoint is missing")
    stored = next(iter(store.read(session_id, after_seq=seq - 1, limit=1)), None) if seq else None
    if seq and (stored is None or stored.seq != seq):
        return fail(f"seq {seq} of the checkpoint is no longer in the log")
    if seq and stored is not None and stored.hash.hex() != checkpoint["head_hash"]:
        return fail(f"seq {seq} has another hash than the checkpoint: history was rewritten")
    if not seq:  # a session of no events then: its head was its genesis, its fields' digest
        with store.chain_pages(session_id) as pages:
            start = next(pages).start
        if start.hex() != checkpoint["head_hash"]:
            return fail(
                "the session's fields are not those the checkpoint signed (at seq 0 its head "
                "is their digest): the session row was rewritten"
            )
    (verdict,) = verify(store, [session_id])
    if not verdict.ok:
        return fail(f"the chain is broken at seq {verdict.bad_seq}: {verdict.reason}")
    count, trace_head = checkpoint.get("trace_count") or 0, checkpoint.get("trace_hash")
    if count:
        rows = store.trace_chain(session_id).rows
        if len(rows) < count:
            return fail(f"trace row {count} of the checkpoint is no longer in the log")
        if bytes(rows[count - 1][-1] or b"").hex() != trace_head:
            return fail(
                f"trace row {count} has another hash than the checkpoint: trace rows were rewritten"
            )
    for problem in trace_chain_problems(store, session_id):
        return fail(f"the trace chain is broken: {problem}")
    return CheckpointVerdict(
        session_id, seq, True, f"the log extends the checkpoint (seq {seq}) to seq {verdict.events}"
    )


def checkpoint_json(checkpoint: dict[str, Any]) -> str:
    """The checkpoint as one line of JSON, for a file."""
    return json_line(checkpoint)
