"""Every format's sniffing and reading fed arbitrary JSON: a FormatError or sessions, never a crash.

Bad input must end as one clear line (every error agenttrail raises on purpose is an
``AgentTrailError``, which the CLI prints as one line), so no importer may let a TypeError or
KeyError escape on a shape it did not expect.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
import sys
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from agenttrail.errors import FormatError
from agenttrail.formats import FORMATS, read_file

_scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8)
)
_keys = st.sampled_from(
    [
        "role",
        "content",
        "type",
        "messages",
        "message",
        "tool_calls",
        "id",
        "tool_call_id",
        "request",
        "response",
        "body",
        "status_code",
        "input",
        "output",
        "sessionId",
        "uuid",
        "name",
        "text",
        "tool_use_id",
        "interactions",
        "choices",
        "usage",
        "model",
        "seq",
        "session_id",
        "payload",
        "hash",
        "created_at",
        "function",
        "arguments",
        "parentUuid",
    ]
) | st.text(max_size=6)
_json = st.recursive(
    _scalars,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(_keys, children, max_size=6),
    max_leaves=30,
)


_ANTHROPIC_URL = "https://api.anthropic.com/v1/messages"
_START: dict[str, Any] = {"type": "message_start", "message": {}}


def _stream(*events: dict[str, Any]) -> dict[str, Any]:
    """A recorded Anthropic exchange whose response body is these server-sent events."""
    body = "".join(f"data: {json.dumps(event)}\n\n" for event in events)
    return {
        "request": {"url": _ANTHROPIC_URL, "body": {"messages": []}},
        "response": {"status_code": 200, "body": body},
    }


def _block_start(block: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"type": "content_block_start", "index": index, "content_block": block}


def _delta(delta: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return {"type": "content_block_delta", "index": index, "delta": delta}


_FAR_DATE = "Mon, 01 Jan 99999999999999999999 00:00:00 GMT"
_EXPORT_LINE = {"session_id": "s", "seq": 1, "payload": {}, "hash": "00"}


@settings(max_examples=300, deadline=None)
@given(doc=_json, as_lines=st.booleans())
@example(doc=[{"role": ["user"], "content": "x"}], as_lines=False)
@example(doc={"request": {"body": {"messages": [{"role": {}, "content": []}]}}}, as_lines=False)
@example(doc={"type": "user", "message": {"content": [{"type": 1}]}, "uuid": 5}, as_lines=True)
@example(doc={"interactions": [{"request": 1, "response": None}]}, as_lines=False)
# claude_code.sniff: a list or object ``type`` looked up in a frozenset
@example(doc={"type": []}, as_lines=False)
# openai._detect._is_items_list / _has_anthropic_blocks, openai._builder.comparable: the
# same, for item and part types
@example(doc=[{"type": []}], as_lines=False)
@example(doc=[{"role": "user", "content": [{"type": {}}]}], as_lines=False)
# claude_code._subagent_id / _summary_title: agentId and leafUuid put in / looked up in a set
@example(doc={"type": "x", "isSidechain": True, "agentId": []}, as_lines=True)
@example(doc={"type": "summary", "summary": "s", "leafUuid": []}, as_lines=True)
# urlsplit's ValueError: anthropic._exchange.read_exchange, openai._detect.endpoint (sniff and read)
@example(
    doc={"request": {"url": "https://[api.anthropic.com/v1/messages", "body": {}}, "response": {}},
    as_lines=False,
)
@example(doc={"request": {"url": "http://[x/chat/completions", "body": {}}}, as_lines=False)
@example(doc={"interactions": [{"request": {"uri": "http://[x"}}]}, as_lines=False)
# parsedate_to_datetime's OverflowError: http.recording.http_date (both importers)
@example(
    doc={
        "request": {"url": _ANTHROPIC_URL, "body": {"messages": []}},
        "response": {"status_code": 200, "headers": {"date": _FAR_DATE}, "body": {"content": []}},
    },
    as_lines=False,
)
@example(
    doc={
        "request": {"messages": [{"role": "user", "content": "x"}]},
        "response": {"status_code": 200, "headers": {"date": _FAR_DATE}, "body": {"choices": []}},
    },
    as_lines=False,
)
# openai._responses.Responses.item_key: an unhashable item id in the comparison key
@example(doc={"model": "m", "input": [{"type": "reasoning", "id": [1]}]}, as_lines=False)
# Infinity reaching codec.json_line (claude_code._reader.Reader._api_error,
# anthropic._builder.Builder.error)
@example(
    doc={
        "type": "assistant",
        "isApiErrorMessage": True,
        "message": {"content": [{"type": "x", "v": float("inf")}]},
    },
    as_lines=True,
)
@example(
    doc={
        "request": {"url": _ANTHROPIC_URL, "body": {"messages": []}},
        "response": {"status_code": 500, "body": [-math.inf]},
    },
    as_lines=False,
)
# jsonl: created_at and session_id that agenttrail.log.chain cannot encode
@example(doc={**_EXPORT_LINE, "created_at": "é" * 26 + "Z"}, as_lines=True)
@example(
    doc={**_EXPORT_LINE, "session_id": "\ud800", "created_at": "2024-01-01T00:00:00.000000Z"},
    as_lines=True,
)
# anthropic._stream.assemble_sse / _block_event: stream events of the wrong shape
@example(doc=_stream({"type": "message_start", "message": {"content": 5}}), as_lines=False)
@example(doc=_stream({"type": "message_start", "message": {"usage": "ab"}}), as_lines=False)
@example(
    doc=_stream(
        {"type": "message_start", "message": {"content": [1]}},
        _delta({"type": "text_delta", "text": "a"}),
    ),
    as_lines=False,
)
@example(doc=_stream(_START, {"type": "message_delta", "delta": {"content": 1}}), as_lines=False)
@example(
    doc=_stream(_START, {"type": "message_delta", "delta": {"usage": 1}, "usage": {"a": 1}}),
    as_lines=False,
)
@example(doc=_stream(_START, _block_start({"type": "text"}, index=10**15)), as_lines=False)
@example(
    doc=_stream(
        _START,
        _block_start({"type": "text", "text": 1}),
        _delta({"type": "text_delta", "text": "a"}),
    ),
    as_lines=False,
)
@example(
    doc=_stream(
        _START,
        _block_start({"type": "text", "citations": 1}),
        _delta({"type": "citations_delta", "citation": {}}),
    ),
    as_lines=False,
)
# claude_code._reader: the key of a merged message hashed ids holding a lone surrogate
# (found by tests/formats/test_fuzz.py)
@example(
    doc=[
        {"type": "assistant", "uuid": "\ud800", "message": {"id": "m", "content": "a"}},
        {"type": "assistant", "uuid": "b", "message": {"id": "m", "content": "b"}},
    ],
    as_lines=True,
)
def test_no_format_crashes_on_arbitrary_json(doc: object, as_lines: bool) -> None:
    text = json.dumps(doc)
    if as_lines:
        text = "\n".join(json.dumps(item) for item in (doc if isinstance(doc, list) else [doc]))
    read_every_way("doc.json", (text or "null").encode("utf-8"))


def read_every_way(name: str, data: bytes) -> None:
    """Write ``data`` to a file called ``name`` and read it as every format and by detection:
    each read gives sessions or a ``FormatError``, anything else fails the test (the mutation
    fuzzing of real files, tests/formats/test_fuzz.py, reads its inputs this way too)."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        path.write_bytes(data)
        for format in [None, *FORMATS]:
            with contextlib.suppress(FormatError):
                read_file(path, format)


_DEEP = "[" * 100_000 + "]" * 100_000


@pytest.mark.parametrize(
    "text",
    [
        pytest.param(_DEEP, id="nested-too-deep"),
        pytest.param('{"type": "user"}\n' + _DEEP, id="nested-too-deep-line"),
        pytest.param("1" * 5000, id="integer-too-long"),
        pytest.param(
            '{"model": "m", "messages": [{"role": "user", "content": "hi", "n": NaN}]}', id="nan"
        ),
        pytest.param(
            '{"type": "user", "message": {"content": [{"type": "text", "x": 1e999}]}}', id="1e999"
        ),
        pytest.param('[{"role": "user", "content": "x", "n": -Infinity}]', id="infinity"),
    ],
)
def test_json_that_cannot_be_held_is_a_format_error(tmp_path: Path, text: str) -> None:
    """What ``json.loads`` raises on or lets through beyond RFC 8259: refused, with a place."""
    path = tmp_path / "doc.json"
    path.write_text(text, encoding="utf-8")
    for name in [None, *FORMATS]:
        with pytest.raises(FormatError, match=re.escape(str(path))):
            read_file(path, name)


_CASSETTE_HEAD = """\
interactions:
- request:
    uri: https://api.openai.com/v1/chat/completions
    body: '{"messages": [{"role": "user", "content": "hi"}]}'
  response:
    status: {code: 200}
"""


@pytest.mark.parametrize(
    ("tail", "problem"),
    [
        pytest.param("    date: 2024-13-45\n", "not a valid timestamp", id="bad-date"),
        pytest.param("    code: !!int abc\n", "not a valid int", id="bad-int"),
        pytest.param("    when: !!timestamp x\n", "not a valid timestamp", id="bad-timestamp"),
        pytest.param("    headers: {1: a}\n", "key 1 is not text", id="int-key"),
        pytest.param("    headers: &h {self: *h}\n", r"alias \*h inside", id="recursive-alias"),
        pytest.param("    body: " + "[" * 5000 + "\n", "nested too deeply", id="nested-too-deep"),
        pytest.param(
            "".join(
                f"    l{n}: &l{n} [{', '.join([f'*l{n - 1}' if n else 'lol'] * 10)}]\n"
                for n in range(9)
            ),
            "aliases expand to more than 1,000,000 values",
            id="billion-laughs",
        ),
    ],
)
def test_yaml_cassette_pyyaml_cannot_construct_is_a_format_error(
    tmp_path: Path, tail: str, problem: str
) -> None:
    """A cassette's YAML that PyYAML would crash on or build a self-containing value from."""
    path = tmp_path / "cassette.yaml"
    path.write_text(_CASSETTE_HEAD + tail, encoding="utf-8")
    for name in [None, "openai"]:
        with pytest.raises(FormatError, match=problem):
            read_file(path, name)


_FOUNTAIN_HEAD = """\
Title: Harvey Session
Author: RSDOIEL

FADE IN:

INT. HARVEY AND RSDOIEL TALKING 2026-12-01 19:16:10

"""


@pytest.mark.parametrize(
    ("name", "format", "text", "problem"),
    [
        # Found by tests/formats/test_fuzz.py, each a traceback or a message of several lines.
        pytest.param(
            "rag.spmd",
            None,
            _FOUNTAIN_HEAD + "[[rag: " + "9" * 5000 + " chunks from docs.db, top score 0.9]]\n",
            ":8: a chunk count of 5000 digits is longer than agenttrail reads "
            f"({sys.get_int_max_str_digits()} digits)",
            id="fountain-chunk-count-too-long",
        ),
        pytest.param(
            "cassette.yaml",
            "openai",
            "interactions:\n- request:\n    body\x1a |-\n",
            ":3: invalid YAML: U+001A: special characters are not allowed",
            id="yaml-control-character",
        ),
    ],
)
def test_what_fuzzing_found_is_one_format_error_line(
    tmp_path: Path, name: str, format: str | None, text: str, problem: str
) -> None:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    with pytest.raises(FormatError) as raised:
        read_file(path, format)
    assert str(raised.value) == f"{path}{problem}"
