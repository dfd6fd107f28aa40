"""An event to append made from its payload's bytes (``NewEvent.from_data``, what an import
holds until it writes): equal to one made from the payload, decoded only when its payload is
read, its type answered without decoding.

The payloads are those of a real Claude Code transcript (``tests/formats/_recordings.py``
cites its SOURCES.md row) and arbitrary JSON-shaped ones.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agenttrail.codec import encode_payload
from agenttrail.formats import read_file
from agenttrail.model import NewEvent, events
from tests.formats._recordings import CLAUDE_CODE_SPOTTER

AT = "2026-06-24T10:00:05.000000Z"
SALT = bytes(range(32))

_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(), children),
    max_leaves=12,
)


def _pair(payload: dict[str, Any], key: str | None = "k") -> tuple[NewEvent, NewEvent]:
    """The event made from ``payload``'s bytes, and the one made from ``payload`` itself."""
    data = encode_payload(payload)
    made = NewEvent.from_data(data, AT, key, SALT, type=payload.get("type"))
    return made, NewEvent(payload, AT, key, SALT, data)


@given(payload=st.dictionaries(st.text(max_size=8), _values, max_size=5))
def test_an_event_from_its_bytes_equals_one_from_its_payload(payload: dict[str, Any]) -> None:
    made, plain = _pair(payload)
    assert made == plain and plain == made
    assert made.payload == payload and made.data == plain.data
    assert (made.created_at, made.key, made.salt) == (AT, "k", SALT)
    assert made != NewEvent(payload, AT, "other key", SALT)


def test_a_real_transcript_reads_back_the_same_from_its_bytes() -> None:
    [session] = read_file(CLAUDE_CODE_SPOTTER / "tool_heavy.jsonl")
    kinds = set()
    for event in session.events:
        made, plain = _pair(event.payload, event.key)
        assert made == plain
        for kind in ("message", "tool_call", "tool_result"):
            assert made.has_type(kind) == plain.has_type(kind) == (event.payload["type"] == kind)
        kinds.add(event.payload["type"])
    assert {"message", "tool_call", "tool_result"} <= kinds


def test_the_type_is_answered_without_decoding_the_payload() -> None:
    made, _ = _pair(events.tool_call("toolu_1", "Read", {"file_path": "/etc/hosts"}))
    assert made.has_type("tool_call") and not made.has_type("tool_result")
    assert "payload" not in vars(made)  # nothing decoded yet
    assert made.payload["input"] == {"file_path": "/etc/hosts"}
    assert "payload" in vars(made)  # decoded once, then kept


def test_an_event_made_anew_from_one_reads_its_own_payload() -> None:
    made, _ = _pair(events.message("user", "hi"))
    changed = replace(made, payload=events.error("boom"), data=None)
    assert changed.has_type("error") and not changed.has_type("message")
    assert changed == NewEvent(events.error("boom"), AT, "k", SALT)
