"""A tool result's status (agenttrail.model.tool_status): the W1 rule of the Harvey audit
trail (docs/specs.md), read from the result alone."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from agenttrail.model import ToolStatus, events, tool_status


def test_an_error_field_an_exit_code_a_flag_or_an_error_line_says_it_failed() -> None:
    assert tool_status(events.tool_result("c", "t", output="fine")) == ToolStatus(True, "")
    assert tool_status(events.tool_result("c", "t", output="x", exit_code=2)).detail == "exit 2"
    failed = tool_status(events.tool_result("c", "t", output="  Error: no such file\nmore"))
    assert failed == ToolStatus(False, "no such file")


@given(
    st.text(alphabet=st.sampled_from([*"errorERROR: \n\tıxé", "\u0130", "\u212a"]), max_size=12),
    st.text(max_size=20),
)
def test_an_output_fails_when_its_first_words_lowered_are_error_colon(head: str, tail: str) -> None:
    # the rule as written: the output, its leading space stripped, lowered, starts with
    # "error:" (İ, U+0130, lowers to two characters; the Kelvin sign, U+212A, to k)
    output = head + tail
    says_error = output.lstrip().lower().startswith("error:")
    assert tool_status({"type": "tool_result", "output": output}).ok is not says_error
