"""The event model: what every format, the log and every view agree on.

Payload shapes and their builders (:mod:`.events`), stored events, sessions (:mod:`.sessions`),
trace-row records (:mod:`.traces`), the read views every reader of a payload uses
(:mod:`.reading`), and :class:`LogReader`, the read side of a log as the layers above it see
it. The model imports nothing of agenttrail above :mod:`agenttrail.codec` and
:mod:`agenttrail.errors` (docs/architecture.md).
"""

from agenttrail.model.events import (
    Actor,
    Event,
    NewEvent,
    block_order,
    error,
    event_actor,
    message,
    meta,
    rag,
    recall,
    shell,
    tool_call,
    tool_result,
    usage,
)
from agenttrail.model.reader import LogReader
from agenttrail.model.reading import (
    Attachment,
    ContentPart,
    ToolStatus,
    attachment_of,
    attachments,
    content_order,
    content_text,
    context_text,
    end_text,
    failed,
    message_text,
    other_blocks,
    output_text,
    payload_attachments,
    prose_text,
    text_of,
    tool_status,
    usage_of,
    usage_totals,
)
from agenttrail.model.sessions import (
    SESSION_ID_RULE,
    NewSession,
    Session,
    check_session_id,
    is_session_id,
)
from agenttrail.model.traces import NewTrace, TraceRow

__all__ = [
    "SESSION_ID_RULE",
    "Actor",
    "Attachment",
    "ContentPart",
    "Event",
    "LogReader",
    "NewEvent",
    "NewSession",
    "NewTrace",
    "Session",
    "ToolStatus",
    "TraceRow",
    "attachment_of",
    "attachments",
    "block_order",
    "check_session_id",
    "content_order",
    "content_text",
    "context_text",
    "end_text",
    "error",
    "event_actor",
    "failed",
    "is_session_id",
    "message",
    "message_text",
    "meta",
    "other_blocks",
    "output_text",
    "payload_attachments",
    "prose_text",
    "rag",
    "recall",
    "shell",
    "text_of",
    "tool_call",
    "tool_result",
    "tool_status",
    "usage",
    "usage_of",
    "usage_totals",
]
