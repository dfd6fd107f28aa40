"""The event model: what every format, the log and every view agree on.

Payload shapes and their builders (:mod:`.events`), stored events, sessions
(:mod:`.sessions`) and trace-row records (:mod:`.traces`). The model imports nothing of
agenttrail above :mod:`agenttrail.codec` and :mod:`agenttrail.errors` (docs/architecture.md).
"""

from agenttrail.model.events import (
    Actor,
    Event,
    NewEvent,
    ToolStatus,
    error,
    event_actor,
    message,
    meta,
    payload_text,
    rag,
    recall,
    shell,
    tool_call,
    tool_result,
    tool_status,
    usage,
)
from agenttrail.model.sessions import NewSession, Session
from agenttrail.model.traces import NewTrace, TraceRow

__all__ = [
    "Actor",
    "Event",
    "NewEvent",
    "NewSession",
    "NewTrace",
    "Session",
    "ToolStatus",
    "TraceRow",
    "error",
    "event_actor",
    "message",
    "meta",
    "payload_text",
    "rag",
    "recall",
    "shell",
    "tool_call",
    "tool_result",
    "tool_status",
    "usage",
]
