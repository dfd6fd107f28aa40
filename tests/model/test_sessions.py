"""``Session.stored``, the store's constructor of session rows, against the dataclass's own."""

from __future__ import annotations

from dataclasses import astuple
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from agenttrail.model import Session

_text = st.one_of(st.none(), st.text(max_size=20))


@given(
    st.tuples(
        st.text(min_size=1, max_size=20),
        _text,
        _text,
        _text,
        _text,
        _text,
        st.dictionaries(st.text(max_size=5), st.integers(), max_size=3),
        st.text(max_size=30),
        st.integers(min_value=0),
        st.binary(min_size=32, max_size=32),
        st.sampled_from([1, 2]),
    )
)
def test_a_stored_session_is_the_session_its_fields_make(fields: tuple[Any, ...]) -> None:
    made = Session(*fields)
    stored = Session.stored(*fields)
    assert stored == made and astuple(stored) == astuple(made)
    assert repr(stored) == repr(made)
    assert stored.record() == made.record()
