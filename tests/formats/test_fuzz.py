"""Every importer's real inputs, mutated: one clear error or sessions, never a traceback, and
never a changed database when the import fails.

The inputs are the real recordings each format reads (the real data's SOURCES.md, read in
place from ``../shared/realdata``: the Anthropic SDK's recorded exchanges and stream, the
OpenAI cassettes, the Claude Code transcripts, Harvey's Fountain sessions) and agenttrail's
own export of the sample session. Each example applies one to three mutations of the kinds a
damaged or hostile file has: truncation, flipped bytes, deleted or duplicated lines, deep
nesting, numbers beyond a double or too long to read, invalid UTF-8 and JSON-escaped lone
surrogates. The example counts are bounded so that the file runs in well under a minute;
tests/formats/test_detect.py fuzzes detection with arbitrary JSON documents the same way.
"""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agenttrail.formats.jsonl import jsonl_from_events
from agenttrail.ingest.sample import record_sample
from agenttrail.log.store import open_store
from tests.conftest import REALDATA, run_cli
from tests.formats.test_detect import read_every_way

# SOURCES.md rows "anthropic-sdk-python/…", "otel-openai-v2-cassettes/…",
# "claude-code-spotter/…", "claude-code-simonw/…" and "harvey/…": what our importers read.
_REAL_INPUTS = sorted(
    [
        *(REALDATA / "anthropic-sdk-python").glob("*"),
        *(REALDATA / "otel-openai-v2-cassettes").glob("*.yaml"),
        *(REALDATA / "claude-code-spotter").glob("*.jsonl"),
        *(REALDATA / "claude-code-simonw").glob("*.jsonl"),
        *(REALDATA / "harvey").glob("*.spmd"),
    ]
)


class _Corpus(dict[str, bytes]):
    """The inputs, shown by their names only: Hypothesis prints a failing example's arguments,
    and the whole corpus in a report hides the one mutation that failed."""

    def __repr__(self) -> str:
        return f"<{len(self)} real inputs: {', '.join(sorted(self))}>"


@pytest.fixture(scope="module")
def real_inputs() -> dict[str, bytes]:
    """File name → bytes: the real inputs, and an export of our sample session (the input
    of the ``jsonl`` format). Without the corpus the tests that take it are skipped
    (tests/conftest.py)."""
    found = _Corpus((path.name, path.read_bytes()) for path in _REAL_INPUTS)
    with tempfile.TemporaryDirectory() as tmp, open_store(Path(tmp) / "s.db") as store:
        lines = jsonl_from_events(store.read(record_sample(store)))
        found["sample-export.jsonl"] = "".join(line + "\n" for line in lines).encode()
    return found


_STRING = re.compile(rb'"(?:[^"\\\n]|\\.)*"')
_NUMBER = re.compile(rb"(?<![\w.])-?[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?(?![\w.])")
_HUGE = [b"1e999", b"-1e400", b"9" * 5000, b"1" + b"0" * 400, b"2.5e-400", b"1" * 30]
_BAD_UTF8 = [b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf", b"\x00"]
_MUTATIONS = (
    "truncate",
    "flip",
    "delete-line",
    "duplicate-line",
    "nest",
    "huge-number",
    "bad-utf8",
    "lone-surrogate",
)


def _tokens(pattern: re.Pattern[bytes], data: bytes) -> list[tuple[int, int]]:
    return [m.span() for m in pattern.finditer(data)]


_Mutation = tuple[str, int, int]
"""``(kind, where, pick)``: ``where`` places it in the file (a byte, a line or a JSON value,
modulo their count) and ``pick`` chooses what it puts there."""

_cases = st.tuples(
    st.integers(0, 2**16),
    st.lists(
        st.tuples(st.sampled_from(_MUTATIONS), st.integers(0, 2**32), st.integers(0, 2**16)),
        min_size=1,
        max_size=3,
    ),
)
"""``(input, mutations)``: which real input (modulo their count), then one to three
mutations. Drawn as numbers and applied to the file by :func:`_mutate`, so a failing case
shows as a few numbers, not as tens of kB of bytes."""


def _mutate(inputs: dict[str, bytes], case: tuple[int, list[_Mutation]]) -> tuple[str, bytes]:
    """The file name and mutated bytes of a drawn case."""
    names = sorted(inputs)
    name = names[case[0] % len(names)]
    data = inputs[name]
    for kind, where, pick in case[1]:
        at = where % max(len(data), 1)
        if kind == "truncate":
            data = data[:at]
        elif kind == "flip" and data:
            data = data[:at] + bytes([data[at] ^ (1 + pick % 255)]) + data[at + 1 :]
        elif kind in ("delete-line", "duplicate-line"):
            lines = data.split(b"\n")
            at = where % len(lines)
            lines[at:at] = [lines[at]] if kind == "duplicate-line" else []
            if kind == "delete-line":
                del lines[at]
            data = b"\n".join(lines)
        elif kind == "bad-utf8":
            data = data[:at] + _BAD_UTF8[pick % len(_BAD_UTF8)] + data[at:]
        else:  # a JSON value replaced: by deep nesting, a huge number, a lone surrogate
            spans = _tokens(_NUMBER if kind == "huge-number" else _STRING, data)
            if not spans:
                continue
            start, end = spans[where % len(spans)]
            if kind == "nest":
                depth = (50, 999, 100_000)[pick % 3]
                value = b"[" * depth + data[start:end] + b"]" * depth
            elif kind == "huge-number":
                value = _HUGE[pick % len(_HUGE)]
            else:
                value = data[start : end - 1] + rb"\ud800" + b'"'
            data = data[:start] + value + data[end:]
    return name, data


_BOUNDED = settings(
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
"""What both tests share; each sets its own example count (the file runs in about 15 s)."""


@settings(_BOUNDED, max_examples=250)
@given(case=_cases)
def test_mutated_real_inputs_are_read_or_refused_with_a_format_error(
    real_inputs: dict[str, bytes], case: tuple[int, list[_Mutation]]
) -> None:
    read_every_way(*_mutate(real_inputs, case))


@pytest.fixture(scope="module")
def log_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A log that already holds a real session, shared by the examples below."""
    db = tmp_path_factory.mktemp("fuzz") / "log.db"
    imported = run_cli("import", str(_REAL_INPUTS[0]), "--db", str(db))
    assert imported.returncode == 0, imported.stderr
    return db


def _state(db: Path) -> list[tuple[str, int, bytes, int]]:
    """Every session with its head and number of trace rows: what a failed import must leave
    as it was."""
    with open_store(db) as store:
        return [(s.id, s.head_seq, s.head_hash, len(store.traces(s.id))) for s in store.sessions()]


@settings(_BOUNDED, max_examples=60)
@given(case=_cases)
def test_a_mutated_import_ends_in_one_error_line_and_an_unchanged_log(
    log_db: Path, real_inputs: dict[str, bytes], case: tuple[int, list[_Mutation]]
) -> None:
    name, data = _mutate(real_inputs, case)
    before = _state(log_db)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        result = run_cli("import", str(path), "--db", str(log_db))
    if result.returncode == 0:
        return
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, result.stderr
    assert _state(log_db) == before
