"""The Anthropic Messages API's vocabulary: content block types, tool calls, tool ids.

Sources: the Messages API reference (https://platform.claude.com/docs/en/api/messages), tool
use (https://platform.claude.com/docs/en/agents-and-tools/tool-use/overview and
.../handle-tool-calls), server tools such as code execution and web search
(https://platform.claude.com/docs/en/agents-and-tools/tool-use/code-execution-tool), extended
thinking (https://platform.claude.com/docs/en/build-with-claude/extended-thinking) and the API's
error texts where the reference states no rule. Claude Code writes the same blocks inside its
transcripts (:mod:`agenttrail.formats.claude_code`).

Used by the importers (:mod:`agenttrail.formats.anthropic`, :mod:`agenttrail.formats.claude_code`,
and :mod:`agenttrail.formats.openai` to refuse what is Anthropic's), by replay
(:mod:`agenttrail.replay.anthropic`) and by the validator (:mod:`agenttrail.replay.validate`).
"""

from __future__ import annotations

import re

__all__ = [
    "BLOCKS",
    "CLAUDE_CODE_RUNTIME_RECORDS",
    "CLIENT_TOOL_CALL_BLOCKS",
    "DISTINCT_BLOCKS",
    "DISTINCT_REQUEST_FIELDS",
    "ROLES",
    "SERVER_TOOL_CALL_BLOCKS",
    "SERVER_TOOL_RESULT_BLOCKS",
    "STOP_REASONS",
    "TEXT_BLOCK",
    "THINKING_BLOCKS",
    "TOOL_CALL_BLOCKS",
    "TOOL_ID",
    "TOOL_RESULT_BLOCK",
    "TOOL_RESULT_CONTENT_BLOCKS",
    "USER_BLOCKS",
    "is_server_tool_error",
    "is_tool_result",
]

CLAUDE_CODE_RUNTIME_RECORDS = frozenset({"progress", "file-history-snapshot", "queue-operation"})
"""Claude Code transcript record types that are the runtime's bookkeeping, not the
conversation: a hook's or tool's progress, a snapshot of the files it edits, its prompt queue.
Imported as ``annotation`` events of that ``kind`` (:mod:`agenttrail.formats.claude_code`); the
viewer can hide them. Read off real transcripts (Claude Code 2.1.38/2.1.39): Anthropic
publishes no schema for these files."""

ROLES = frozenset({"user", "assistant"})
"""Message roles: the system prompt is the top-level ``system`` parameter, not a message
(Messages API reference)."""

TEXT_BLOCK = "text"
"""The block type that carries ``text``; a string ``content`` is "shorthand for an array of one
content block of type text" (Messages API reference)."""

CLIENT_TOOL_CALL_BLOCKS = frozenset({"tool_use"})
"""Tool calls the client runs and answers with a ``tool_result`` block in the next user message
(handle tool calls)."""

SERVER_TOOL_CALL_BLOCKS = frozenset({"server_tool_use", "mcp_tool_use"})
"""Tool calls that run on Anthropic's side (server tools, the MCP connector): the answer is the
server's own ``*_tool_result`` block in the same assistant message, never the client's."""

TOOL_CALL_BLOCKS = CLIENT_TOOL_CALL_BLOCKS | SERVER_TOOL_CALL_BLOCKS
"""Every block type that is a tool call."""

TOOL_RESULT_BLOCK = "tool_result"
"""The client's answer to a ``tool_use``, in a user message, before any other content."""

TOOL_RESULT_CONTENT_BLOCKS = frozenset(
    {TEXT_BLOCK, "image", "document", "search_result", "tool_reference", "browser_state"}
)
"""The block types a ``tool_result``'s ``content`` takes (Messages API reference,
``ToolResultBlockParam``; the SDK's ``Content`` union)."""

SERVER_TOOL_RESULT_BLOCKS = frozenset(
    {
        "web_search_tool_result",
        "web_fetch_tool_result",
        "code_execution_tool_result",
        "mcp_tool_result",
    }
)
"""Server tool result blocks known by name; any block type ending in ``_tool_result`` is one
(:func:`is_tool_result`)."""

USER_BLOCKS = frozenset({"image", "document", "search_result", "container_upload"})
"""User content block types the Messages API takes besides text and tool results (Messages API
reference, ``content`` of a user message)."""

THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
"""Assistant block types that go back to the API verbatim, signature included, besides text and
tool blocks (extended thinking)."""

BLOCKS = (
    frozenset({TEXT_BLOCK, TOOL_RESULT_BLOCK}) | USER_BLOCKS | THINKING_BLOCKS | TOOL_CALL_BLOCKS
)
"""Content block types of the Messages API, besides any ``*_tool_result``."""

DISTINCT_BLOCKS = (BLOCKS - {TEXT_BLOCK, "image"}) | SERVER_TOOL_RESULT_BLOCKS
"""Block types no OpenAI API has: content holding one is Anthropic's. ``text`` is every
provider's; ``image`` is Anthropic's only with a ``source`` (an OpenAI importer checks that)."""

DISTINCT_REQUEST_FIELDS = frozenset({"system", "stop_sequences", "top_k", "anthropic_version"})
"""Request body fields of the Messages API (``anthropic_version`` on Bedrock and Vertex) that
an OpenAI Chat Completions request does not have."""

TOOL_ID = re.compile(r"[a-zA-Z0-9_-]+")
"""What the Messages API requires of a ``tool_use`` id, matched whole (API error "String should
match pattern '^[a-zA-Z0-9_-]+$'", quoted in https://github.com/HKUDS/nanobot/pull/4356)."""


def is_tool_result(kind: str) -> bool:
    """True for a block type that answers a tool call: the client's ``tool_result`` or a
    server tool's ``*_tool_result`` (``web_search_tool_result``, ...)."""
    return kind == TOOL_RESULT_BLOCK or kind.endswith("_tool_result")


def is_server_tool_error(content: object) -> bool:
    """True when a server tool result's ``content`` reports a failure.

    Server tools report failure as content ``{"type": "<tool>_tool_result_error",
    "error_code": ...}`` instead of an ``is_error`` flag (code execution tool, web search tool).
    """
    if not isinstance(content, dict):
        return False
    kind = content.get("type")
    return isinstance(kind, str) and kind.endswith("_error")


STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "max_tokens": "length",
    "tool_use": "tool_call",
    "refusal": "content_filter",
}
"""Messages ``stop_reason`` values (docs.anthropic.com/en/api/messages) and what each means in
the OpenTelemetry GenAI conventions' ``FinishReason`` (stop, length, content_filter,
tool_call)."""
