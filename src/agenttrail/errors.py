"""Every error agenttrail raises on purpose.

The hierarchy::

    AgentTrailError                 root: catch this to catch any agenttrail error
    ├── InputError                  bad input from a user or a file (CLI exit code 2)
    │   ├── FormatError             a file that no importer can read, or one that is malformed
    │   │   └── NotATranscript      an empty file, or one of no format agenttrail reads
    │   ├── PayloadError            a payload that is not a mapping or will not round-trip
    │   ├── PayloadTooLarge         a payload above the store's configured limit
    │   ├── BodyTooLarge            an HTTP request body above the server's limit (HTTP 413)
    │   ├── MalformedBody           an HTTP request body that does not decode (HTTP 400)
    │   ├── UnsupportedMediaType    an HTTP request body of a type a route does not take (HTTP 415)
    │   ├── InvalidTimestamp        a value that is not a timestamp
    │   ├── NotIJSON                material to be hashed that is not I-JSON (RFC 7493)
    │   │   └── NotJSON             text that is not JSON at all
    │   └── ToolError               a user's tool refused its input (a path outside the workspace)
    │       └── ToolFailed          a user's tool failed, and its call and result are logged
    ├── SessionNotFound             no session with that id (HTTP 404)
    ├── SessionExists               a session id that is already taken (HTTP 409)
    ├── TurnInFlight                an agent turn holds the session's turn lock (HTTP 409)
    ├── NoTurn                      a recorded tool (agenttrail.tool) called outside every turn
    ├── RerunError                  a re-runner could not be loaded, failed, or gave no envelope
    ├── Unauthorized                no valid access token (HTTP 401)
    ├── Forbidden                   a valid token that does not grant this (HTTP 403)
    ├── RemoteError                 an agenttrail server refused a request or could not be reached
    ├── StoreError                  the database refused or failed (driver errors, translated)
    │   ├── AppendOnlyViolation     the database refused a change to a stored event
    │   ├── SessionRowDamaged       a session row changed by hand so that it cannot be read
    │   └── EventRowDamaged         an event row changed by hand so that it cannot be read
    └── ChainBroken                 verify found a row whose hash does not match (CLI exit 1)

The CLI catches :class:`AgentTrailError` once, at the top, prints ``error: <message>`` on
stderr and exits with the code of the class (``exit_code``), never with a traceback.
"""

from __future__ import annotations

__all__ = [
    "AgentTrailError",
    "AppendOnlyViolation",
    "BodyTooLarge",
    "ChainBroken",
    "EventRowDamaged",
    "Forbidden",
    "FormatError",
    "InputError",
    "InvalidTimestamp",
    "MalformedBody",
    "NoTurn",
    "NotATranscript",
    "NotIJSON",
    "NotJSON",
    "PayloadError",
    "PayloadTooLarge",
    "RemoteError",
    "RerunError",
    "SessionExists",
    "SessionNotFound",
    "SessionRowDamaged",
    "StoreError",
    "ToolError",
    "ToolFailed",
    "TurnInFlight",
    "Unauthorized",
    "UnsupportedMediaType",
]


class AgentTrailError(Exception):
    """Root of every error agenttrail raises on purpose."""

    exit_code = 2


class InputError(AgentTrailError):
    """Bad input from a user or a file; nothing was written."""


class FormatError(InputError):
    """A file that no importer recognises, or that is malformed.

    ``path``, ``line`` (1-based) and ``field`` say where, when known; the message already
    names them (``where``: ``path:line: field 'f'``), before what was wrong (``reason``).
    """

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        field: str | None = None,
    ) -> None:
        where = path or ""
        if line is not None:
            where = f"{where}:{line}" if where else f"line {line}"
        if field:
            where = f"{where}: field {field!r}" if where else f"field {field!r}"
        self.path = path
        self.line = line
        self.field = field
        self.where = where
        self.reason = message
        super().__init__(self._said())

    def extend(self, text: str) -> None:
        """Add ``text`` to what the error says (what the code that caught it knows more:
        the format the file looks like); the place stays as it was."""
        self.reason += text
        self.args = (self._said(),)

    def _said(self) -> str:
        return f"{self.where}: {self.reason}" if self.where else self.reason


class NotATranscript(FormatError):
    """A file of nothing agenttrail reads: empty, of no format it knows, or not a regular file
    (a FIFO, a device). Found by walking a folder (``agenttrail import FOLDER``), such a file
    is skipped and named, where one named by the user is refused (Claude Code keeps a
    ``sessions-index.json`` beside a project's transcripts)."""


class PayloadError(InputError):
    """A payload that is not a mapping, or holds a value that would not read back equal."""


class PayloadTooLarge(InputError):
    """A payload whose canonical CBOR encoding is above the store's limit (bytes)."""

    def __init__(self, size: int, limit: int) -> None:
        super().__init__(
            f"payload is {size:,} bytes of CBOR, above the limit of {limit:,} bytes "
            f"(max_payload_bytes / AGENTTRAIL_MAX_PAYLOAD_BYTES)"
        )
        self.size = size
        self.limit = limit


class BodyTooLarge(InputError):
    """An HTTP request body above the server's limit (bytes), refused before it is read whole
    (``agenttrail.server.guard``)."""

    def __init__(self, limit: int, size: int | None = None) -> None:
        told = f"is {size:,} bytes" if size is not None else "goes on"
        super().__init__(
            f"request body {told}, above the limit of {limit:,} bytes "
            f"(agenttrail serve --max-body-bytes / AGENTTRAIL_MAX_BODY_BYTES)"
        )
        self.size = size
        self.limit = limit


class MalformedBody(InputError):
    """An HTTP request body that does not decode as its ``Content-Type`` and
    ``Content-Encoding`` say (not gzip, not protobuf, not JSON of the expected shape)."""


class UnsupportedMediaType(InputError):
    """An HTTP request body whose ``Content-Type`` (or ``Content-Encoding``) the route does not
    take; the message names the types it does."""


class InvalidTimestamp(InputError):
    """A value that is not a timestamp (``agenttrail.codec.normalize_timestamp``)."""


class NotIJSON(InputError):
    """Material to be hashed that is not I-JSON (RFC 7493): refused, never coerced."""


class NotJSON(NotIJSON):
    """Text that is not JSON at all (and so not I-JSON either)."""


class ToolError(InputError):
    """A user's tool refused its input (a path outside the workspace, a missing file)."""


class ToolFailed(ToolError):
    """A user's tool failed (refused its input, met an OS error, raised, or gave an output the
    log cannot hold) after its call was logged: ``call_seq`` and ``result_seq`` are the seqs of
    its ``tool_call`` and of the ``tool_result`` that carries this error (docs/server.md)."""

    def __init__(self, message: str, *, call_seq: int, result_seq: int) -> None:
        super().__init__(message)
        self.call_seq = call_seq
        self.result_seq = result_seq


class SessionNotFound(AgentTrailError):
    """No session with the given id; ``hint`` (``; …``) ends the message with what to do."""

    def __init__(self, session_id: str, hint: str = "") -> None:
        super().__init__(f"no session {session_id!r}{hint}")
        self.session_id = session_id


class SessionExists(AgentTrailError):
    """A session with the given id already exists, or existed: ``removed`` is ``(deleted_at,
    reason)`` of its tombstone when retention removed it, whose id is not used again
    (docs/log-format.md, the ``tombstones`` table); ``where`` (a file) goes before the
    message."""

    def __init__(
        self, session_id: str, removed: tuple[str, str] | None = None, *, where: str = ""
    ) -> None:
        if removed is None:
            message = f"session {session_id!r} already exists"
        else:
            message = (
                f"session {session_id!r} was removed from this log on {removed[0]} "
                f"({removed[1]}), and a removed session's id is not used again"
            )
        super().__init__(f"{where}: {message}" if where else message)
        self.session_id = session_id
        self.removed = removed


class TurnInFlight(AgentTrailError):
    """An agent turn holds the session's turn lock; ``turn_id`` and ``expires_at`` say which
    and until when (docs/specs.md, The log: "a lock that an in-flight agent turn refuses with a
    409")."""

    def __init__(self, session_id: str, turn_id: str, expires_at: str) -> None:
        super().__init__(
            f"session {session_id}: agent turn {turn_id} is in flight until {expires_at}"
        )
        self.session_id = session_id
        self.turn_id = turn_id
        self.expires_at = expires_at


class NoTurn(AgentTrailError):
    """A function decorated with ``agenttrail.tool`` was called where no recorder's turn runs
    (``with rec.turn()``, ``async with rec.turn()``); the function did not run, so nothing
    ran unrecorded. ``tool`` names the function."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"tool {tool!r} was called outside a recorder's turn: nothing ran and nothing was "
            "recorded (run it inside `with rec.turn()`, or call the undecorated function, "
            "its __wrapped__)"
        )
        self.tool = tool


class RerunError(AgentTrailError):
    """A re-runner could not be loaded, failed, or returned something that is no envelope."""


class Unauthorized(AgentTrailError):
    """No valid access token: missing, malformed, forged or expired (HTTP 401)."""


class Forbidden(AgentTrailError):
    """A valid access token that does not grant this (HTTP 403)."""


class RemoteError(AgentTrailError):
    """An agenttrail server refused a request or could not be reached (a recorder sending
    streaming partials); the HTTP client's error is the ``__cause__``."""

    exit_code = 1


class StoreError(AgentTrailError):
    """The database failed or refused an operation; the driver's error is the ``__cause__``."""

    exit_code = 1


class AppendOnlyViolation(StoreError):
    """The database refused to change or remove a stored event (append-only triggers)."""


class SessionRowDamaged(StoreError):
    """A session row changed by hand so that it cannot be read: a head that is not an integer
    and 32 bytes, or metadata that is not a JSON object. ``session_id`` and ``problem`` (which
    names the column and what is wrong with it, ``head_seq 'six' is not an integer``); the
    session's events may still verify (``agenttrail verify`` reports it as that session's
    problem, docs/log-format.md, The hash chain)."""

    def __init__(self, session_id: str, problem: str) -> None:
        super().__init__(f"session {session_id!r}: {problem}")
        self.session_id = session_id
        self.problem = problem


class EventRowDamaged(StoreError):
    """An event row changed by hand so that it cannot be read: a column of another type than
    the store writes (a payload turned into text, which SQLite allows), read by a command
    that shows or exports the session. ``session_id``, ``seq`` and ``problem`` (the column
    and what it holds, ``payload is text, not bytes``); ``agenttrail verify`` reports the
    same row as where the chain breaks (docs/log-format.md, The hash chain)."""

    def __init__(self, session_id: str, seq: object, problem: str) -> None:
        super().__init__(
            f"session {session_id!r}, seq {seq!r}: {problem} (the row was changed by hand; "
            "agenttrail verify checks the whole log)"
        )
        self.session_id = session_id
        self.seq = seq
        self.problem = problem


class ChainBroken(AgentTrailError):
    """A hash chain does not verify: a session's events (``session_id`` and the first bad
    ``seq``), the rest of a session (its trace rows, keys or row: ``seq`` ``None``), or the
    log's own rows (tombstones, log keys: ``session_id`` ``None``)."""

    exit_code = 1

    def __init__(self, session_id: str | None, seq: int | None, reason: str) -> None:
        if session_id is None:
            said = f"the log's own rows do not verify: {reason}"
        elif seq is None:
            said = f"session {session_id} does not verify: {reason}"
        else:
            said = f"session {session_id}: chain broken at seq {seq}: {reason}"
        super().__init__(said)
        self.session_id = session_id
        self.seq = seq
        self.reason = reason
