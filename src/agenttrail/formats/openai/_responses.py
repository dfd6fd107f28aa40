"""Responses API exchanges: input items, instructions and output items, read into events.

A request with ``previous_response_id`` continues that response, and all its input items are
new; one without starts afresh (its input appended as given) unless it strictly extends the
conversation so far, which is how a stateless client (``store: false``) resends history.
Reasoning items and hosted tools' calls are left out of that comparison (:func:`compared`): a
client may send them back or leave them out, as one that keeps only a response's text does.
Shapes and mapping: the docstring of :mod:`agenttrail.formats.openai`; the API:
https://platform.openai.com/docs/api-reference/responses/create.
"""

from __future__ import annotations

import json
from typing import Any

from agenttrail.formats.http.recording import Exchange, join, type_name
from agenttrail.formats.openai._builder import PROVIDER, Builder, Key, common_prefix, comparable
from agenttrail.model import events
from agenttrail.providers import openai

__all__ = ["Responses"]


class Responses:
    """Reads Responses API bodies into the session ``builder`` holds."""

    created_field = "created_at"
    """A ``response``'s time: Unix seconds."""

    def __init__(self, builder: Builder) -> None:
        self.builder = builder
        self.by_response: dict[str, tuple[int, list[frozenset[Key]]]] = {}
        """Response id → (exchange, conversation after it)."""
        self.last_response_id: str | None = None
        self.instructions: str | None = None
        """The instructions in force (the last request's)."""

    def request(self, exchange: Exchange, time: str | None) -> None:
        """Append the request's instructions (when new) and its input items that are new."""
        request = exchange.request
        if request is None:
            return
        items, at, keys = self.keyed_items(exchange)
        places = compared(keys)
        previous = request.get("previous_response_id")
        sent = [frozenset([keys[i]]) for i in places]
        start = 0
        held = len(self.builder.conversation)
        if previous is not None:
            if not isinstance(previous, str):
                problem = f"expected a string, not {type_name(previous)}"
                raise self.builder.fail(
                    problem, join(exchange.request_where, "previous_response_id")
                )
            sent = self.continued(exchange, previous) + sent
        elif (
            len(places) > held > 0
            and common_prefix([keys[i] for i in places], self.builder.conversation) == held
        ):
            start = places[held]  # the whole history resent (store: false)
        instructions = request.get("instructions")
        if (
            isinstance(instructions, str)
            and instructions
            and (instructions != self.instructions or (previous is None and start == 0))
        ):
            payload = events.message(
                "system", instructions, actor="system", sourceField="instructions"
            )
            self.builder.append(payload, f"x{exchange.number}:instructions", time)
        self.instructions = instructions if isinstance(instructions, str) else None
        self.input_items(exchange, items, at, start, time)
        self.builder.conversation = sent

    def keyed_items(self, exchange: Exchange) -> tuple[list[Any], list[str], list[Key]]:
        """The request's input as items (a string input is one user message), the field path
        of each, and each one's comparison key (:meth:`item_key`).

        Raises:
            FormatError: the input is neither a string nor a list, or an item is malformed.
        """
        request = exchange.request or {}
        where = exchange.list_where
        if where is None:
            where = join(exchange.request_where, "input")
        raw = request.get("input")
        if isinstance(raw, str):
            items: list[Any] = [{"role": "user", "content": raw}]
        elif raw is None:
            items = []
        elif isinstance(raw, list):
            items = raw
        else:
            raise self.builder.fail(
                f"expected a string or a list of items, not {type_name(raw)}", where
            )
        at = [where if isinstance(raw, str) else f"{where}[{i}]" for i in range(len(items))]
        return items, at, [self.item_key(item, at[i]) for i, item in enumerate(items)]

    def continued(self, exchange: Exchange, previous: str) -> list[frozenset[Key]]:
        """The conversation a ``previous_response_id`` continues."""
        found = self.by_response.get(previous)
        if found is None:
            self.builder.warn(exchange, f"previous_response_id {previous} is not in this file")
            return []
        number, conversation = found
        if previous != self.last_response_id:
            self.builder.warn(
                exchange,
                f"continues the response of exchange {number}, not the previous exchange",
            )
        return list(conversation)

    def item_key(self, item: Any, where: str) -> Key:
        """Check a Responses item's shape and give its comparison key."""
        if not isinstance(item, dict):
            raise self.builder.fail(f"expected an item object, not {type_name(item)}", where)
        kind = item.get("type")
        if kind is not None and not isinstance(kind, str):
            raise self.builder.fail(f"expected a string, not {type_name(kind)}", f"{where}.type")
        item_id = item.get("id")
        if item_id is not None and not isinstance(item_id, str):
            raise self.builder.fail(f"expected a string, not {type_name(item_id)}", f"{where}.id")
        if kind is None or kind == "message":
            role = item.get("role")
            if not isinstance(role, str):
                problem = "missing" if role is None else f"expected a string, not {type_name(role)}"
                raise self.builder.fail(problem, f"{where}.role")
            return ("message", role, comparable(item.get("content")))
        call_id = item.get("call_id")
        if "call_id" in item and not isinstance(call_id, str):
            raise self.builder.fail(
                f"expected a string, not {type_name(call_id)}", f"{where}.call_id"
            )
        if call_id is not None:
            return ("output" if openai.is_output_item(kind) else "call", call_id)
        return ("item", kind, item_id or json.dumps(item, sort_keys=True, default=str))

    def input_items(
        self,
        exchange: Exchange,
        items: list[dict[str, Any]],
        at: list[str],
        start: int,
        time: str | None,
    ) -> None:
        """Request items from ``start`` on; runs of assistant-side items become one turn."""
        group: list[tuple[int, dict[str, Any]]] = []
        prefix = f"x{exchange.number}:i"

        def flush() -> None:
            if group:
                self.assistant_items(group, f"{prefix}{group[0][0]}", at, time)
                group.clear()

        for i in range(start, len(items)):
            item = items[i]
            kind = item.get("type")
            if openai.is_output_item(kind) and "call_id" in item:
                flush()
                result = events.tool_result(
                    item.get("call_id"),
                    output=item.get("output"),
                    itemId=item.get("id"),
                    toolType=None if kind == "function_call_output" else kind,
                )
                self.builder.append(result, f"{prefix}{i}", time)
            elif kind in (None, "message") and item.get("role") != "assistant":
                flush()
                self.builder.plain_message(
                    item["role"],
                    item.get("content"),
                    f"{prefix}{i}",
                    join(at[i], "content"),
                    time,
                    itemId=item.get("id"),
                )
            else:
                group.append((i, item))
        flush()

    def assistant_items(
        self,
        group: list[tuple[int, dict[str, Any]]],
        key: str,
        at: list[str],
        time: str | None,
        meta: dict[str, Any] | None = None,
        response_id: Any = None,
        **extra: Any,
    ) -> None:
        """One assistant turn from Responses items: text from ``message`` items, other
        non-call items kept as ``blocks``, then one ``tool_call`` per item with a ``call_id``."""
        texts: list[str] = []
        blocks: list[dict[str, Any]] = []
        calls: list[tuple[int, dict[str, Any]]] = []
        order: list[tuple[str, int | str]] = []
        message_id, plain = None, True
        for i, item in group:
            kind = item.get("type")
            if "call_id" in item and kind not in (None, "message"):
                calls.append((i, item))
                call_id = item.get("call_id")
                order.append(("toolCall", call_id if isinstance(call_id, str) else ""))
                continue
            order.append(("block", len(blocks)))
            blocks.append(item)
            if kind in (None, "message"):
                text, parts = self.builder.content(item.get("content"), join(at[i], "content"))
                texts += [text] if text else []
                plain = plain and parts is None
                message_id = message_id or item.get("id")
        interleaved = events.block_order(order)
        plain = (
            interleaved is None
            and plain
            and len(blocks) <= 1
            and all(b.get("type") in (None, "message") for b in blocks)
        )
        payload = events.message(
            "assistant",
            "\n".join(texts),
            meta=meta,
            blocks=None if plain else blocks,
            order=interleaved,
            messageId=message_id,
            responseId=response_id,
            **extra,
        )
        self.builder.append(payload, key, time)
        for i, item in calls:
            kind = item.get("type")
            name = item.get("name")
            if not isinstance(name, str):
                name = kind.removesuffix("_call") if isinstance(kind, str) else ""
            raw = None
            if kind == "function_call":
                parsed, raw = self.builder.arguments(
                    item.get("arguments"), join(at[i], "arguments")
                )
            elif "input" in item:  # custom_tool_call: free text
                parsed = item["input"]
            else:  # computer_call, local_shell_call, ...: the action requested
                parsed = item.get("action")
            call = events.tool_call(
                item["call_id"],
                name,
                parsed,
                arguments=raw,
                itemId=item.get("id"),
                responseId=response_id,
                toolType=None if kind == "function_call" else kind,
            )
            self.builder.append(call, f"{key}:c{i}", time)

    def response(self, exchange: Exchange, body: dict[str, Any], time: str | None) -> None:
        """Append the response's output as one assistant turn, and remember it by id."""
        where = exchange.response_where
        output = self.builder.list_field(body, "output", where)
        at = [join(where, f"output[{i}]") for i in range(len(output))]
        keys = [self.item_key(item, at[i]) for i, item in enumerate(output)]
        counts, raw = self.builder.usage(
            body.get("usage"),
            join(where, "usage"),
            "input_tokens",
            "input_tokens_details",
            "output_tokens",
        )
        model = body.get("model") if isinstance(body.get("model"), str) else None
        meta = events.meta(
            model=model, provider=PROVIDER, usage=counts, usage_raw=raw, location="remote"
        )
        status = body.get("status")
        self.assistant_items(
            list(enumerate(output)),
            f"x{exchange.number}:r",
            at,
            time,
            meta=meta,
            response_id=body.get("id"),
            status=status if status != "completed" else None,
            incompleteDetails=body.get("incomplete_details"),
        )
        self.builder.conversation = self.builder.conversation + [
            frozenset([keys[i]]) for i in compared(keys)
        ]
        response_id = body.get("id")
        if isinstance(response_id, str):
            self.by_response[response_id] = (exchange.number, list(self.builder.conversation))
            self.last_response_id = response_id


def compared(keys: list[Key]) -> list[int]:
    """Which of a request's or a response's items (by their keys, :meth:`Responses.item_key`)
    the conversation is compared on: every message and every call or call output, not an
    item that is neither (``("item", type, id)``: a reasoning item, a hosted tool's call such
    as ``web_search_call``). A client may send those back or leave them out: one that keeps
    only a response's text, or its function calls, leaves them out, and the API answers
    either way (passing reasoning items back is advised, not required:
    https://cookbook.openai.com/examples/responses_api/reasoning_items); compared, they would
    make each such request a conversation of its own."""
    return [i for i, key in enumerate(keys) if key[0] != "item"]
