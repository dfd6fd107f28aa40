"""Replay: rebuild the exact message list a model sees from a session's events.

The log is the source of truth for what the model sees (docs/specs.md, The log: What the log
is the source of truth for): replay rebuilds the model's entire message list from events on
every turn, so a session can be continued, re-run or audited. Three targets::

    to_openai_chat(events)       -> Replay(messages=[{role, content?, tool_calls?, ...}])
    to_anthropic(events)         -> Replay(system=..., messages=[{role, content}])
    to_openai_responses(events)  -> Replay(messages=[input items], instructions=...)
    validate(messages, provider) -> [Violation(index, block, rule, message, provider_path)]

Rules (each from the log spec, docs/specs.md, or a provider's documentation; ``docs/replay.md`` has
them all):

- Tool results are reattached directly behind their calls, whatever their order in the log
  (the log spec: "tool results reattached behind their calls"). N parallel calls give, for OpenAI, N
  ``tool`` messages right after the assistant message with ``tool_calls``
  (https://platform.openai.com/docs/guides/function-calling), and for Anthropic N
  ``tool_result`` blocks, first, in the one user message after the assistant message, any text
  after them (https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls).
- A call with no result gets a labelled placeholder result, :data:`PLACEHOLDER` (the log spec:
  "still-running children given honest placeholders"); a result with no call is never sent.
  Both are reported in :attr:`Replay.notes`.
- Never an assistant message with neither content nor tool calls; empty text blocks are
  dropped (Anthropic: "all messages must have non-empty content except for the optional final
  assistant message", "text content blocks must contain non-whitespace text"). Only assembled
  messages are replayed: streamed partials are never events (docs/architecture.md, Vocabulary).
- The user's own tool invocations reach the agent as ``<user_action>`` /
  ``<user_action_result>`` context, never as the agent's calls (the log spec, The symmetric half).
- Messages the runtime wrote (actor ``system``) never wear the user's voice (the log spec, Actors):
  OpenAI gets them with role ``system``; Anthropic, whose messages have no system role, gets
  them as ``<system_message>`` text in the user turn.
- The promoted tool set (tool names in order of first use) is rebuilt from ``tool_call``
  events and returned with the messages (the log spec: "the transcript is the pin").
- Deterministic: the same events give the same bytes (:meth:`Replay.json`); an export and
  import of the session (``agenttrail.formats.jsonl``) replays identically.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from agenttrail.codec import escaped_surrogates, indented_json_chunks, json_line
from agenttrail.errors import InputError
from agenttrail.model import Event
from agenttrail.replay.anthropic import AnthropicRenderer
from agenttrail.replay.chat import ChatRenderer
from agenttrail.replay.plan import Note, plan
from agenttrail.replay.render import PLACEHOLDER, Message
from agenttrail.replay.responses import ResponsesRenderer
from agenttrail.replay.validate import PROVIDERS, Violation, validate

__all__ = [
    "PLACEHOLDER",
    "PROVIDERS",
    "Note",
    "Replay",
    "Violation",
    "replay",
    "to_anthropic",
    "to_openai_chat",
    "to_openai_responses",
    "validate",
]


@dataclass(frozen=True)
class Replay:
    """A replayed message list for one provider, and what replay did to get it."""

    provider: str
    """``openai`` (Chat Completions), ``anthropic`` (Messages) or ``responses``."""
    messages: list[Message]
    """Chat messages, Anthropic messages, or Responses input items: JSON-ready."""
    tools: tuple[str, ...]
    """The promoted tool set: tool names in order of first use, from ``tool_call`` events."""
    notes: tuple[Note, ...]
    """What was left out or filled in (placeholders, orphans, dropped empties, conversions),
    in seq order; a note with ``seq`` ``None`` is about the whole replay."""
    system: str | list[Message] | None = None
    """Anthropic only: the top-level ``system`` parameter (the latest system prompt)."""
    instructions: str | None = None
    """Responses only: the ``instructions`` parameter (the latest recorded one)."""
    previous_response_id: str | None = None
    """Responses only: the stored response the input continues (only the items after it
    are in :attr:`messages`)."""

    def body(self) -> Message:
        """The request body's conversation fields: ``{"messages"}`` for OpenAI Chat,
        ``{"system"?, "messages"}`` for Anthropic, ``{"instructions"?,
        "previous_response_id"?, "input"}`` for Responses."""
        if self.provider == "anthropic":
            head: Message = {} if self.system is None else {"system": self.system}
            return {**head, "messages": self.messages}
        if self.provider == "responses":
            out: Message = {}
            if self.instructions is not None:
                out["instructions"] = self.instructions
            if self.previous_response_id is not None:
                out["previous_response_id"] = self.previous_response_id
            return {**out, "input": self.messages}
        return {"messages": self.messages}

    def json(self, *, indent: int | None = None) -> str:
        """:meth:`body` as JSON text: the same events always give the same text.

        Compact (``json_line``) by default; ``indent`` pretty-prints. Lone surrogates are
        written as ``\\u`` escapes (``\\udc81``), so the text always encodes to UTF-8.
        """
        if indent is None:
            return json_line(self.body())
        return "".join(self.json_chunks(indent=indent))

    def json_chunks(self, *, indent: int) -> Iterator[str]:
        """:meth:`json` with ``indent``, in pieces whose concatenation is that text: the
        messages a thousand at a time (:func:`agenttrail.codec.indented_json_chunks`), so
        that a long session's text is written as it is made."""
        for text in indented_json_chunks(self.body(), indent):
            yield escaped_surrogates(text)


# --- public entry points -----------------------------------------------------------------


def to_openai_chat(events: Iterable[Event], upto_seq: int | None = None) -> Replay:
    """Replay events as an OpenAI Chat Completions ``messages`` list.

    Shapes (https://platform.openai.com/docs/api-reference/chat/create)::

        {"role": "system" | "developer", "content": str}        system prompts, runtime text
        {"role": "user", "content": str | [part, ...], "name"?}
        {"role": "assistant", "content"?: str, "refusal"?, "name"?,
         "tool_calls"?: [{"id", "type": "function", "function": {"name", "arguments"}}
                         | {"id", "type": "custom", "custom": {"name", "input"}}]}
        {"role": "tool", "tool_call_id": str, "content": str | [text part, ...]}

    Rules: ``tool`` messages follow the assistant message with ``tool_calls`` and answer
    each id ("messages with role 'tool' must be a response to a preceeding message with
    'tool_calls'"; "An assistant message with 'tool_calls' must be followed by tool messages
    responding to each 'tool_call_id'", OpenAI API errors; guide:
    https://platform.openai.com/docs/guides/function-calling). ``content`` is left out of an
    assistant message that only calls tools ("Required unless tool_calls or function_call is
    specified"). ``arguments`` is the string the model produced, kept by the importer, else
    the input as compact JSON. Calls the provider ran itself (Anthropic server tools) and
    non-function Responses calls have no Chat form and are left out with their results
    (noted); thinking and other non-text blocks are not sent (noted).

    Args:
        events: one session's events (any order; seq decides).
        upto_seq: replay only events with ``seq <= upto_seq``; ``None`` for all.

    Returns:
        A :class:`Replay` with ``provider="openai"``.

    Raises:
        InputError: ``upto_seq`` is negative, or the events span several sessions.
    """
    renderer = ChatRenderer(plan(events, upto_seq))
    messages = renderer.render()
    return Replay("openai", messages, renderer.planned.tools, renderer.finish(messages))


def to_anthropic(events: Iterable[Event], upto_seq: int | None = None) -> Replay:
    """Replay events as an Anthropic Messages request: ``system`` and ``messages``.

    Shapes (https://platform.claude.com/docs/en/api/messages)::

        system:   str | [{"type": "text", "text", ...}]          the latest system prompt
        messages: [{"role": "user" | "assistant", "content": str | [block, ...]}]
        assistant blocks: text, thinking, redacted_thinking, then in call order tool_use
                  {"type", "id", "name", "input", "caller"?} / server_tool_use (and the
                  server's own *_tool_result block right after it, when recorded)
        user blocks: tool_result {"type", "tool_use_id", "content"?, "is_error"?} first, in
                  call order, then text, images, documents, and context text

    Rules: every ``tool_use`` is answered by a ``tool_result`` in the next user message, and
    the results come first in it ("Tool result blocks must immediately follow their
    corresponding tool use blocks", "the tool_result blocks must come FIRST in the content
    array. Any text must come AFTER all tool results":
    https://platform.claude.com/docs/en/agents-and-tools/tool-use/handle-tool-calls). So all
    user-side content between two assistant messages is one user message (the API combines
    consecutive same-role turns anyway: "Consecutive user or assistant turns in your request
    will be combined into a single turn", Messages API reference). A message whose content
    would be empty is not sent and empty or whitespace-only text blocks are dropped ("all
    messages must have non-empty content except for the optional final assistant message",
    "text content blocks must contain non-whitespace text", API errors). Tool ids are unique
    ("`tool_use` ids must be unique", API error): a repeated call id is sent once (noted).
    Server tool calls run on Anthropic's side and get no placeholder. ``system`` is the
    latest ``system`` message: the API has one system prompt, and the importer records a new
    one each time a request changed it (earlier ones are noted as replaced). A single plain
    text block is sent as a string ("a string for content is shorthand for an array of one
    content block of type text", Messages API reference).

    Args:
        events: one session's events (any order; seq decides).
        upto_seq: replay only events with ``seq <= upto_seq``; ``None`` for all.

    Returns:
        A :class:`Replay` with ``provider="anthropic"`` and :attr:`Replay.system`.

    Raises:
        InputError: ``upto_seq`` is negative, or the events span several sessions.
    """
    renderer = AnthropicRenderer(plan(events, upto_seq))
    system, messages = renderer.render()
    notes = renderer.finish(messages)
    return Replay("anthropic", messages, renderer.planned.tools, notes, system=system)


def to_openai_responses(
    events: Iterable[Event],
    upto_seq: int | None = None,
    *,
    previous_response_id: str | None = None,
) -> Replay:
    """Replay events as OpenAI Responses API ``input`` items.

    Shapes (https://platform.openai.com/docs/api-reference/responses/create)::

        {"role": "user" | "assistant" | "system" | "developer", "content": str | [part]}
        {"type": "message" | "reasoning" | ..., ...}     assistant output items, verbatim
        {"type": "function_call", "call_id", "name", "arguments", "id"?}
        {"type": "function_call_output", "call_id", "output", "id"?}
        {"type": "custom_tool_call", "call_id", "name", "input"} / "custom_tool_call_output"

    Rules: every call item is followed, after it, by its output ("No tool output found for
    function call …" and "No tool call found for function call output with call_id …", API
    errors); outputs come right after their calls, in call order. ``instructions`` is the
    latest ``system`` message the importer took from ``instructions`` (``sourceField``); other
    ``system`` messages are input items. With ``previous_response_id``, the input continues a
    response stored by OpenAI, and only the items after that response's items are returned
    (https://platform.openai.com/docs/guides/conversation-state).

    Args:
        events: one session's events (any order; seq decides).
        upto_seq: replay only events with ``seq <= upto_seq``; ``None`` for all.
        previous_response_id: a response id (``responseId`` of an imported response) to
            continue from.

    Returns:
        A :class:`Replay` with ``provider="responses"``.

    Raises:
        InputError: ``upto_seq`` is negative, the events span several sessions, or
            ``previous_response_id`` names no response in the replayed events.
    """
    renderer = ResponsesRenderer(plan(events, upto_seq))
    items, instructions, marks = renderer.render()
    notes = renderer.finish(items)
    if previous_response_id is not None:
        mark = marks.get(previous_response_id)
        if mark is None:
            raise InputError(
                f"previous_response_id {previous_response_id!r} names no response in the "
                "replayed events"
            )
        items = items[mark.index :]
        # notes about items the stored response already holds are not about this request
        held = Note(
            None,
            "previous_response",
            f"items up to response {previous_response_id} (seq {mark.last_seq}) are held by "
            "OpenAI: not sent",
        )
        notes = (
            *(
                n
                for n in notes
                if n.seq is not None
                and (n.seq > mark.last_seq or (n.kind == "placeholder" and n.seq in mark.call_seqs))
            ),
            *(n for n in notes if n.seq is None),
            held,
        )
    return Replay(
        "responses",
        items,
        renderer.planned.tools,
        notes,
        instructions=instructions,
        previous_response_id=previous_response_id,
    )


def replay(events: Iterable[Event], provider: str, *, upto_seq: int | None = None) -> Replay:
    """Replay events for ``provider``: ``openai``, ``anthropic`` or ``responses``.

    Calls :func:`to_openai_chat`, :func:`to_anthropic` or :func:`to_openai_responses`.

    Raises:
        InputError: an unknown provider, a negative ``upto_seq``, several sessions.
    """
    chosen: dict[str, Callable[[Iterable[Event], int | None], Replay]] = {
        "openai": to_openai_chat,
        "anthropic": to_anthropic,
        "responses": to_openai_responses,
    }
    if provider not in chosen:
        raise InputError(f"unknown replay format {provider!r} (use {', '.join(PROVIDERS)})")
    return chosen[provider](events, upto_seq)
