"""Every format's sniffing and reading, fed arbitrary JSON: a FormatError or sessions, never a crash.

Bad input must end as one clear line (issue 2, "Bad input"), so no importer may let a
TypeError or KeyError escape on a shape it did not expect.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

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


@settings(max_examples=300, deadline=None)
@given(doc=_json, as_lines=st.booleans())
@example(doc=[{"role": ["user"], "content": "x"}], as_lines=False)
@example(doc={"request": {"body": {"messages": [{"role": {}, "content": []}]}}}, as_lines=False)
@example(doc={"type": "user", "message": {"content": [{"type": 1}]}, "uuid": 5}, as_lines=True)
@example(doc={"interactions": [{"request": 1, "response": None}]}, as_lines=False)
def test_no_format_crashes_on_arbitrary_json(doc: object, as_lines: bool) -> None:
    text = json.dumps(doc)
    if as_lines:
        text = "\n".join(json.dumps(item) for item in (doc if isinstance(doc, list) else [doc]))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "doc.json"
        path.write_text(text or "null", encoding="utf-8")
        for name in [None, *FORMATS]:
            try:
                read_file(path, name)
            except FormatError:
                pass
