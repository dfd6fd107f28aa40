"""agenttrail: a flight recorder for AI agents.

Each agent session is an append-only, hash-chained event log (SQLite by default). Record a live
agent's OpenAI or Anthropic client with :func:`instrument` (one line), or write a session by
hand with :class:`Recorder` (:class:`AsyncRecorder` under asyncio, :func:`tool` for a function
the agent calls as a tool); read it back with :meth:`LogStore.read`, prove it was not altered
with :func:`verify`.
"""

from agenttrail.errors import (
    AgentTrailError,
    AppendOnlyViolation,
    ChainBroken,
    FormatError,
    InputError,
    PayloadError,
    PayloadTooLarge,
    SessionExists,
    SessionNotFound,
    StoreError,
)
from agenttrail.ingest.assistant import ToolCall
from agenttrail.ingest.async_recorder import AsyncRecorder, AsyncTurn
from agenttrail.ingest.capture import session
from agenttrail.ingest.importer import ImportReport, import_paths
from agenttrail.ingest.instrument import instrument
from agenttrail.ingest.recorder import Recorder
from agenttrail.ingest.tool import tool
from agenttrail.ingest.turn import Turn
from agenttrail.log.chain import SessionVerdict, verify
from agenttrail.log.redact import RedactRules
from agenttrail.log.store import Appended, LogStore, open_store
from agenttrail.model import (
    Actor,
    Event,
    NewEvent,
    NewSession,
    Session,
    event_actor,
    meta,
    tool_status,
    usage,
)
from agenttrail.views.pairing import Anomaly, Pairing, pair_tool_calls

__version__ = "0.1.0"

open_log = open_store
"""Open the log: ``open_log()`` uses ``AGENTTRAIL_DATABASE_URL``, else ``./agenttrail.db``."""

__all__ = [
    "Actor",
    "AgentTrailError",
    "Anomaly",
    "AppendOnlyViolation",
    "Appended",
    "AsyncRecorder",
    "AsyncTurn",
    "ChainBroken",
    "Event",
    "FormatError",
    "ImportReport",
    "InputError",
    "LogStore",
    "NewEvent",
    "NewSession",
    "Pairing",
    "PayloadError",
    "PayloadTooLarge",
    "Recorder",
    "RedactRules",
    "Session",
    "SessionExists",
    "SessionNotFound",
    "SessionVerdict",
    "StoreError",
    "ToolCall",
    "Turn",
    "__version__",
    "event_actor",
    "import_paths",
    "instrument",
    "meta",
    "open_log",
    "open_store",
    "pair_tool_calls",
    "session",
    "tool",
    "tool_status",
    "usage",
    "verify",
]
