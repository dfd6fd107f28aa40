"""Limits: each is a keyword argument, else an ``AGENTTRAIL_*`` environment variable, else a
default: in bytes, the payload limit of :func:`agenttrail.log.store.open_store` and the read
limit of the user's tools (docs/server.md lists both); in counts, the conversations and the
queue of live capture (docs/capture.md)."""

from __future__ import annotations

import os

from agenttrail.errors import InputError

__all__ = ["DEFAULT_MAX_IMPORT_BYTES", "byte_limit", "count_limit", "import_limit"]

DEFAULT_MAX_IMPORT_BYTES = 256 * 1024 * 1024
"""Largest file :func:`agenttrail.formats.read_file` reads (bytes) unless told otherwise. A
parsed transcript takes several times its size in memory, so a few hundred MiB is already a
lot of memory for one import; larger files are refused before a byte is read
(``--max-bytes``, ``AGENTTRAIL_MAX_IMPORT_BYTES``)."""


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
    return count_limit(value, variable, default, what, unit="bytes")


def import_limit(value: int | None) -> int:
    """The import limit (bytes of a file read): ``value`` (``--max-bytes``), else the
    integer in ``AGENTTRAIL_MAX_IMPORT_BYTES``, else :data:`DEFAULT_MAX_IMPORT_BYTES`, as
    :func:`byte_limit` reads it (``import``, ``watch`` and the import of an export alike).

    Raises:
        InputError: the variable is not an integer, or the limit is not positive.
    """
    return byte_limit(
        value, "AGENTTRAIL_MAX_IMPORT_BYTES", DEFAULT_MAX_IMPORT_BYTES, "import limit"
    )


def count_limit(value: int | None, variable: str, default: int, what: str, *, unit: str) -> int:
    """``value``, else the integer in the environment ``variable``, else ``default``: a limit
    counted in ``unit`` (``"bytes"``, ``"conversations"``, ``"exchanges"``).

    Raises:
        InputError: the variable is not an integer, or the limit is not positive; names the
            limit and its variable.
    """
    limit = value
    if limit is None:
        raw = os.environ.get(variable)
        try:
            limit = default if raw is None else int(raw)
        except ValueError:
            raise InputError(f"{variable}={raw!r} is not an integer") from None
    if limit <= 0:
        raise InputError(f"the {what} must be a positive number of {unit}, not {limit}")
    return limit
