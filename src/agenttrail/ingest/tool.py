"""Recording a Python function as a tool: ``@agenttrail.tool``.

Example::

    @agenttrail.tool
    def read_file(path: str) -> str:
        return Path(path).read_text()

    with rec.turn(model="m") as turn:
        ids = turn.assistant(tool_calls=[("read_file", {"path": "a.txt"})], usage=...)
        read_file("a.txt")      # its result answers the model's call ids[0]

Each run records, in the current turn (:func:`agenttrail.ingest.turn.current_turn`):

- the call: the tool's name and its input, the arguments bound to the function's parameters
  by name (``{"path": "a.txt"}``, defaults not filled in, ``**kwargs`` merged in, a first
  ``self``/``cls`` left out). When the turn holds a call of that name and input without a
  result (the model's, from :meth:`Turn.assistant`), the run answers it; otherwise a new
  ``tool_call`` is recorded (:meth:`Turn.call_for`);
- the result: the return value as the ``output`` of a ``tool_result``, or an exception as its
  ``error`` (``"<type>: <message>"``), the exception then re-raised unchanged;
- ``duration_ms``: the function's wall time, in milliseconds (``time.perf_counter``).

Inputs and outputs are recorded JSON-shaped: mappings (keys as text), lists and tuples,
text, numbers, booleans and ``None`` as they are, dataclasses and pydantic models as their
fields, paths as text; anything else as its ``repr``, so that a run is recorded whatever it
took or returned. A non-finite float is recorded as its ``repr`` (the log holds finite ones).

Outside every turn the decorated function raises :class:`~agenttrail.errors.NoTurn` before it
runs, rather than running unrecorded: the log is an audit trail, and a tool that ran but is not
in it is silent data loss (and it would run without the turn lock that keeps the user's own
tools out meanwhile). Code that means to run it unrecorded calls ``fn.__wrapped__``.

A coroutine function is recorded the same way, its store calls run in a worker thread
(``asyncio.to_thread``) so the event loop never waits on the database. A run cancelled or
interrupted (``asyncio.CancelledError``, ``KeyboardInterrupt``) leaves its call without a
result, as a killed agent does; replay gives such a call a placeholder (docs/replay.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import inspect
import math
import os
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ParamSpec, TypeVar, cast, overload

from agenttrail.errors import NoTurn
from agenttrail.ingest.turn import Turn, current_turn

__all__ = ["jsonable", "tool"]

P = ParamSpec("P")
R = TypeVar("R")


@overload
def tool(fn: Callable[P, R], /) -> Callable[P, R]: ...


@overload
def tool(*, name: str | None = None) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def tool(
    fn: Callable[P, R] | None = None, /, *, name: str | None = None
) -> Callable[P, R] | Callable[[Callable[P, R]], Callable[P, R]]:
    """Record each run of a function as a tool call and its result in the current turn.

    Use as ``@agenttrail.tool`` or ``@agenttrail.tool(name="read_file")``; sync and
    ``async def`` functions alike (what is recorded: the module docstring).

    Args:
        fn: the function.
        name: the tool's name in the log; default the function's ``__name__``.

    Returns:
        The function, wrapped (``functools.wraps``: ``__wrapped__`` is the function itself).

    Raises:
        NoTurn: (from the wrapped function) it was called outside every turn; it did not run.
        Whatever the function raises, unchanged, once its error result is recorded; and what
        the store raises when it cannot record (``StoreError``, ``PayloadTooLarge``).
    """

    def decorate(fn: Callable[P, R]) -> Callable[P, R]:
        return _recorded(fn, name or fn.__name__)

    return decorate if fn is None else decorate(fn)


def _recorded(fn: Callable[P, R], name: str) -> Callable[P, R]:
    signature = inspect.signature(fn)
    if inspect.iscoroutinefunction(fn):
        run = cast(Callable[..., Awaitable[Any]], fn)

        @functools.wraps(fn)
        async def recorded_async(*args: Any, **kwargs: Any) -> Any:
            turn = _turn(name)
            input = _input(signature, args, kwargs)
            call_id = await asyncio.to_thread(turn.call_for, name, input)
            started = time.perf_counter()
            try:
                value = await run(*args, **kwargs)
            except Exception as e:
                await asyncio.to_thread(_failed, turn, call_id, name, e, started)
                raise
            await asyncio.to_thread(_returned, turn, call_id, name, value, started)
            return value

        return cast(Callable[P, R], recorded_async)

    @functools.wraps(fn)
    def recorded(*args: P.args, **kwargs: P.kwargs) -> R:
        turn = _turn(name)
        call_id = turn.call_for(name, _input(signature, args, kwargs))
        started = time.perf_counter()
        try:
            value = fn(*args, **kwargs)
        except Exception as e:
            _failed(turn, call_id, name, e, started)
            raise
        _returned(turn, call_id, name, value, started)
        return value

    return recorded


def _turn(name: str) -> Turn:
    turn = current_turn()
    if turn is None:
        raise NoTurn(name)
    return turn


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _returned(turn: Turn, call_id: str, name: str, value: Any, started: float) -> None:
    duration_ms = _elapsed_ms(started)
    turn.tool_result(call_id, jsonable(value), name=name, duration_ms=duration_ms)


def _failed(turn: Turn, call_id: str, name: str, error: Exception, started: float) -> None:
    duration_ms = _elapsed_ms(started)
    message = f"{type(error).__name__}: {error}"
    turn.tool_result(call_id, name=name, error=message, duration_ms=duration_ms)


def _input(
    signature: inspect.Signature, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> dict[str, Any]:
    """The arguments of one run by parameter name (rules in the module docstring); when
    they do not bind (the function will raise ``TypeError``), ``{"args", "kwargs"}``."""
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError:
        return {"args": jsonable(list(args)), "kwargs": jsonable(kwargs)}
    params = list(signature.parameters.values())
    skip = params[0].name if params and params[0].name in ("self", "cls") else None
    out: dict[str, Any] = {}
    for key, value in bound.arguments.items():
        if key == skip:
            continue
        if signature.parameters[key].kind is inspect.Parameter.VAR_KEYWORD:
            out.update((str(k), jsonable(v)) for k, v in value.items())
        else:
            out[key] = jsonable(value)
    return out


def jsonable(value: Any) -> Any:
    """``value`` as a JSON-shaped value the log can hold (rules in the module docstring)."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, int):
        return int(value)  # an IntEnum as its number
    if isinstance(value, str):
        return str.__str__(value)  # a str enum as its text
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    dump = getattr(value, "model_dump", None)  # a pydantic model
    if callable(dump) and not isinstance(value, type):
        return jsonable(dump(mode="json"))
    return repr(value)
