"""agenttrail: a flight recorder for AI agents.

Each agent session is an append-only, hash-chained event log (SQLite by default). Record a live
agent's OpenAI or Anthropic client with :func:`instrument` (one line), or write a session by
hand with :class:`Recorder` (:class:`AsyncRecorder` under asyncio, :func:`tool` for a function
the agent calls as a tool); read it back with :meth:`LogStore.read`, prove it was not altered
with :func:`verify`.
"""

import importlib
from typing import TYPE_CHECKING, Any

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

if TYPE_CHECKING:
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

    open_log = open_store

__version__ = "0.1.0"

# What each public name is imported from, on first use (PEP 562): `agenttrail --version` and
# a script that needs only the store do not pay for the clients, the server or the formats.
_LAZY: dict[str, str] = {
    "ToolCall": "agenttrail.ingest.assistant",
    "AsyncRecorder": "agenttrail.ingest.async_recorder",
    "AsyncTurn": "agenttrail.ingest.async_recorder",
    "session": "agenttrail.ingest.capture",
    "ImportReport": "agenttrail.ingest.importer",
    "import_paths": "agenttrail.ingest.importer",
    "instrument": "agenttrail.ingest.instrument",
    "Recorder": "agenttrail.ingest.recorder",
    "tool": "agenttrail.ingest.tool",
    "Turn": "agenttrail.ingest.turn",
    "SessionVerdict": "agenttrail.log.chain",
    "verify": "agenttrail.log.chain",
    "RedactRules": "agenttrail.log.redact",
    "Appended": "agenttrail.log.store",
    "LogStore": "agenttrail.log.store",
    "open_store": "agenttrail.log.store",
    "Actor": "agenttrail.model",
    "Event": "agenttrail.model",
    "NewEvent": "agenttrail.model",
    "NewSession": "agenttrail.model",
    "Session": "agenttrail.model",
    "event_actor": "agenttrail.model",
    "meta": "agenttrail.model",
    "tool_status": "agenttrail.model",
    "usage": "agenttrail.model",
    "Anomaly": "agenttrail.views.pairing",
    "Pairing": "agenttrail.views.pairing",
    "pair_tool_calls": "agenttrail.views.pairing",
    "open_log": "agenttrail.log.store",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'agenttrail' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), "open_store" if name == "open_log" else name)
    globals()[name] = value
    return value


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
