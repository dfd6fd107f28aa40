"""Limits in bytes: each is a keyword argument, else an ``AGENTTRAIL_*`` environment variable,
else a default: the payload limit of :func:`agenttrail.log.store.open_store` and the read limit of
the user's tools (docs/server.md lists both)."""

from __future__ import annotations

import os

from agenttrail.errors import InputError

__all__ = ["byte_limit"]


def byte_limit(value: int | None, variable: str, default: int, what: str) -> int:
    """``value``, else the integer in the environment ``variable``, else ``default``.

    Args:
        value: the limit given by the caller (bytes), or ``None``.
        variable: the environment variable that sets it, e.g. ``AGENTTRAIL_MAX_READ_BYTES``.
        default: the limit when neither is given (bytes).
        what: the limit's name in the error message, e.g. ``"read limit"``.

    Raises:
        InputError: the variable is not an integer, or the limit is not positive.
    """
    limit = value
    if limit is None:
        raw = os.environ.get(variable)
        try:
            limit = default if raw is None else int(raw)
        except ValueError:
            raise InputError(f"{variable}={raw!r} is not an integer") from None
    if limit <= 0:
        raise InputError(f"the {what} must be a positive number of bytes, not {limit}")
    return limit
