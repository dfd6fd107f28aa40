"""Server-sent events (``agenttrail.formats.http.sse``) parsed as WHATWG HTML §9.2.5, "Parsing
an event stream", says: CR, LF and CRLF line ends, a leading byte order mark ignored.

The real stream is the Anthropic SDK's recorded ``tool_use_response.txt``
(``tests/formats/_recordings.py`` cites its SOURCES.md row), read in place and given each of
the three line ends the standard allows.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agenttrail.formats import anthropic, detect
from agenttrail.formats.http.sse import SSEEvent, sse_events
from tests.formats._recordings import SSE


@pytest.mark.parametrize("end", ["\n", "\r", "\r\n"], ids=["lf", "cr", "crlf"])
def test_every_line_end_of_the_standard_ends_a_line(end: str) -> None:
    text = f"event: a{end}data: 1{end}{end}data: 2{end}data: 3{end}{end}"
    assert sse_events(text) == [
        SSEEvent(2, "a", "1", True),
        SSEEvent(4, None, "2\n3", True),
    ]


def test_cr_alone_separates_events() -> None:
    # Before: one event whose data was "a\r\rdata: b\r".
    assert [e.data for e in sse_events("data: a\r\rdata: b\r\r")] == ["a", "b"]


def test_line_ends_may_be_mixed() -> None:
    assert [e.data for e in sse_events("data: a\r\n\rdata: b\n\r\ndata: c\r")] == ["a", "b", "c"]


def test_a_leading_byte_order_mark_is_ignored() -> None:
    # Before: the first field was named "\ufeffdata" and the first event was lost.
    events = sse_events("\ufeffdata: first\n\ndata: second\n\n")
    assert [e.data for e in events] == ["first", "second"]


def test_only_one_leading_byte_order_mark_is_ignored() -> None:
    # §9.2.5: "One leading U+FEFF BYTE ORDER MARK character must be ignored if any are
    # present"; a second one is part of the first field's name, which is then unknown.
    assert [e.data for e in sse_events("\ufeff\ufeffdata: a\n\ndata: b\n\n")] == ["b"]


def test_a_last_event_without_its_blank_line_is_marked_incomplete() -> None:
    assert sse_events("data: a\r\rdata: b\r") == [
        SSEEvent(1, None, "a", True),
        SSEEvent(3, None, "b", False),
    ]


@pytest.mark.parametrize("end", ["\r", "\r\n"], ids=["cr", "crlf"])
def test_a_real_stream_reads_the_same_with_any_line_end(tmp_path: Path, end: str) -> None:
    original = SSE.read_text()
    assert "\r" not in original  # recorded with LF line ends
    path = tmp_path / "stream.txt"
    path.write_bytes(("\ufeff" + original.replace("\n", end)).encode())
    assert detect(path, path.read_bytes()) is anthropic
    [expected] = anthropic.read(SSE, SSE.read_bytes())
    [imported] = anthropic.read(path, path.read_bytes())
    assert [e.payload for e in imported.events] == [e.payload for e in expected.events]
    assert imported.warnings == expected.warnings == []
