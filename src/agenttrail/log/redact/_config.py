"""The rules of redaction: the built-in ones, a config file's, the caller's, the switch.

Where they come from, first found wins (docs/redaction.md, Configuration):

1. the caller: ``open_store(redact=RedactRules(...))`` or ``redact=False``;
2. ``AGENTTRAIL_REDACT=0`` (or ``false``, ``no``, ``off``): redaction off;
3. the ``[redact]`` table of the file ``AGENTTRAIL_REDACT_CONFIG`` names, else of
   ``./agenttrail.toml`` when there is one;
4. the built-in rules, on.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.errors import InputError
from agenttrail.log.redact._detectors import DEFAULT_FIELDS

__all__ = [
    "CONFIG_ENV",
    "CONFIG_FILE",
    "DEFAULT_RULES",
    "REDACT_ENV",
    "RedactRules",
    "redact_rules",
]

REDACT_ENV = "AGENTTRAIL_REDACT"
"""``0`` (``false``, ``no``, ``off``) turns redaction off; anything else leaves it on."""

CONFIG_ENV = "AGENTTRAIL_REDACT_CONFIG"
"""A TOML file whose ``[redact]`` table holds the user's rules."""

CONFIG_FILE = "agenttrail.toml"
"""The file read, in the working directory, when :data:`CONFIG_ENV` is not set."""

_KIND = re.compile(r"^[a-z0-9][a-z0-9_.-]{0,39}$")


@dataclass(frozen=True)
class RedactRules:
    """What a store redacts before it appends (docs/redaction.md).

    Example::

        RedactRules(fields=("x_internal_token",), patterns=(("acme-token", r"acme_[0-9a-f]{32}"),))
    """

    enabled: bool = True
    """False: payloads are stored verbatim (``--no-redact``, ``AGENTTRAIL_REDACT=0``)."""
    fields: tuple[str, ...] = ()
    """Field names whose values are secrets, besides :data:`DEFAULT_FIELDS`."""
    patterns: tuple[tuple[str, str], ...] = ()
    """``(kind, regular expression)``: text the expression matches is a secret of that kind
    (a ``secret`` group, when the expression has one, is the part replaced)."""
    paths: tuple[str, ...] = ()
    """JSON paths of a payload (``$.arguments.query``, ``$.content[*].text``) whose values are
    replaced whole, kind ``path``."""
    default_fields: bool = True
    """False: only :attr:`fields` are field rules, not :data:`DEFAULT_FIELDS`."""
    builtin: bool = True
    """False: only :attr:`patterns`, not the built-in detectors."""
    source: str = field(default="built-in", compare=False)
    """Where the rules came from, for messages."""

    def all_fields(self) -> tuple[str, ...]:
        """The field rules in force."""
        return (DEFAULT_FIELDS if self.default_fields else ()) + self.fields

    def compiled(self) -> list[tuple[str, re.Pattern[str]]]:
        """The user's patterns, compiled.

        Raises:
            InputError: a kind is not lower-case letters, digits, ``_ . -``, or a pattern
                does not compile; naming it and :attr:`source`.
        """
        out = []
        for kind, regex in self.patterns:
            if not _KIND.match(kind):
                raise InputError(
                    f"{self.source}: redact pattern kind {kind!r} is not 1-40 of a-z 0-9 _ . -"
                )
            try:
                out.append((kind, re.compile(regex)))
            except re.error as e:
                raise InputError(f"{self.source}: redact pattern {kind!r}: {e}") from None
        return out


DEFAULT_RULES = RedactRules()
"""The built-in rules, on: what a store applies unless told otherwise."""


def redact_rules(redact: RedactRules | bool | None = None) -> RedactRules:
    """The rules a store opened with ``redact`` applies (the order is the module's docstring).

    Raises:
        InputError: the config file cannot be read, is not TOML, or its ``[redact]`` table
            holds something else than documented; one line naming the file and the key.
    """
    if isinstance(redact, RedactRules):
        return redact
    if redact is False:
        return RedactRules(enabled=False, source="redact=False")
    if os.environ.get(REDACT_ENV, "").strip().lower() in ("0", "false", "no", "off"):
        return RedactRules(enabled=False, source=REDACT_ENV)
    named = os.environ.get(CONFIG_ENV)
    path = Path(named) if named else Path(CONFIG_FILE)
    if not named and not path.is_file():
        return DEFAULT_RULES
    return _from_file(path)


def _from_file(path: Path) -> RedactRules:
    try:
        document = tomllib.loads(path.read_text("utf-8"))
    except OSError as e:
        raise InputError(f"{path}: cannot read redaction config ({e.strerror or e})") from None
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise InputError(f"{path}: not TOML ({e})") from None
    table = document.get("redact", {})
    where = f"{path} [redact]"
    if not isinstance(table, dict):
        raise InputError(f"{where}: expected a table")
    known = {"enabled", "fields", "default_fields", "builtin", "patterns", "paths"}
    for name in table:
        if name not in known:
            raise InputError(f"{where}: unknown key {name!r} (known: {', '.join(sorted(known))})")
    patterns = []
    for index, entry in enumerate(_list(table, "patterns", where, dict), start=1):
        kind, regex = entry.get("kind"), entry.get("regex")
        if not isinstance(kind, str) or not isinstance(regex, str) or len(entry) != 2:
            raise InputError(f"{where}: patterns[{index}] needs exactly kind = '…', regex = '…'")
        patterns.append((kind, regex))
    rules = RedactRules(
        enabled=_bool(table, "enabled", where),
        fields=tuple(_list(table, "fields", where, str)),
        patterns=tuple(patterns),
        paths=tuple(_list(table, "paths", where, str)),
        default_fields=_bool(table, "default_fields", where),
        builtin=_bool(table, "builtin", where),
        source=str(path),
    )
    rules.compiled()  # a bad pattern is refused when the store opens, not at the first append
    return rules


def _bool(table: dict[str, Any], name: str, where: str) -> bool:
    value = table.get(name, True)
    if not isinstance(value, bool):
        raise InputError(f"{where}: {name} must be true or false, not {value!r}")
    return value


def _list(table: dict[str, Any], name: str, where: str, item: type) -> list[Any]:
    value = table.get(name, [])
    if not isinstance(value, list) or not all(isinstance(v, item) for v in value):
        raise InputError(f"{where}: {name} must be a list of {item.__name__}")
    return value
