"""OpenAI's vocabulary: Chat Completions messages and parts, Responses items, custom tools.

Sources: the Chat Completions reference
(https://platform.openai.com/docs/api-reference/chat/create), the Responses reference
(https://platform.openai.com/docs/api-reference/responses/create), function calling and custom
tools (https://platform.openai.com/docs/guides/function-calling), and conversation state
(https://platform.openai.com/docs/guides/conversation-state).

Used by the importer (:mod:`agenttrail.formats.openai`, and :mod:`agenttrail.formats.anthropic`
to refuse what is OpenAI's), by replay (:mod:`agenttrail.replay.chat`,
:mod:`agenttrail.replay.responses`) and by the validator (:mod:`agenttrail.replay.validate`).
"""

from __future__ import annotations

__all__ = [
    "CHAT_CALL_FIELDS",
    "CHAT_ROLES",
    "CHAT_USER_PARTS",
    "CUSTOM_TOOL_TYPES",
    "FINISH_REASONS",
    "INPUT_ITEM_MARKS",
    "LEGACY_PAIRING",
    "OUTPUT_ITEMS_AS_INPUT",
    "RESPONSES_ROLES",
    "RESPONSES_USER_PARTS",
    "TEXT_PARTS",
    "is_output_item",
]

TEXT_PARTS = frozenset({"text", "input_text", "output_text"})
"""Content part types that carry ``text``: Chat Completions ``text``, Responses ``input_text``
(what is sent) and ``output_text`` (what a response returns)."""

# --- Chat Completions ---------------------------------------------------------------------

CHAT_ROLES = frozenset({"system", "developer", "user", "assistant", "tool", "function"})
"""Message roles of Chat Completions (``function`` is the legacy result role)."""

CHAT_CALL_FIELDS = frozenset({"tool_calls", "tool_call_id", "function_call"})
"""Message fields that carry tool calls and their results (``function_call`` is the legacy
single call); no Anthropic message has them."""

LEGACY_PAIRING = "legacy_function_call"
"""``pairedBy`` of a call from a legacy ``function_call`` and of the role ``function`` message
that answers it. That protocol has no ids: an assistant message holds at most one call, and the
next ``function`` message, with the same ``name``, is its result (the deprecated
``function_call`` of https://platform.openai.com/docs/api-reference/chat/create). The importer
gives the call a synthetic id (``legacy_call_<seq>``) and the result that id as its
``toolCallId`` (docs/log-format.md, Payload types)."""

CHAT_USER_PARTS = frozenset({"image_url", "input_audio", "file"})
"""User content part types of Chat Completions besides text."""

# --- Responses ------------------------------------------------------------------------------

RESPONSES_ROLES = frozenset({"user", "assistant", "system", "developer"})
"""Roles of a Responses ``message`` input item."""

RESPONSES_USER_PARTS = frozenset({"input_image", "input_file", "input_audio"})
"""Input content part types of the Responses API besides ``input_text``."""

OUTPUT_ITEMS_AS_INPUT = frozenset(
    {
        "message",
        "reasoning",
        "web_search_call",
        "file_search_call",
        "code_interpreter_call",
        "image_generation_call",
        "mcp_call",
        "mcp_list_tools",
        "mcp_approval_request",
    }
)
"""Output item types without a ``call_id`` that a later request takes back in ``input``, as they
were returned (the importer keeps them as ``blocks``; replay sends them verbatim)."""

INPUT_ITEM_MARKS = frozenset(
    {"message", "function_call", "function_call_output", "reasoning", "custom_tool_call"}
)
"""The input item types a recorded Responses input most often holds. A Chat Completions message
has no ``type``, so a bare list with one of these is Responses input (the importer's sniffing)."""


def is_output_item(kind: object) -> bool:
    """True for the type of an item that answers a call: ``<call type>_output``
    (``function_call_output``, ``custom_tool_call_output``, ``computer_call_output``, ...)."""
    return isinstance(kind, str) and kind.endswith("_output")


# --- both -----------------------------------------------------------------------------------

CUSTOM_TOOL_TYPES = frozenset({"custom", "custom_tool_call"})
"""``toolType`` of a call to a custom tool, which takes free text instead of JSON arguments:
Chat ``custom``, Responses ``custom_tool_call`` (function calling guide, custom tools)."""


FINISH_REASONS = {
    "stop": "stop",
    "length": "length",
    "content_filter": "content_filter",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
}
"""Chat Completions ``finish_reason`` values (platform.openai.com/docs/api-reference/chat/object)
and what each means in the OpenTelemetry GenAI conventions' ``FinishReason`` (stop, length,
content_filter, tool_call)."""
