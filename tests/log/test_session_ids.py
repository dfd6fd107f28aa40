"""The id rule for new sessions (docs/log-format.md, Session ids), on both backends: ids that
are not one URL path segment and one command-line argument are refused where a session is
created, with one line naming the id and the rule; sessions made before the rule stay
readable, appendable and verifiable."""

from __future__ import annotations

import re
import uuid

import pytest

from agenttrail import Recorder
from agenttrail.errors import InputError
from agenttrail.evidence.audit import audit
from agenttrail.log.chain import verify
from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import session_made_before_the_id_rule

REFUSED = [
    "a/b",  # splits the URL path segment: /v1/sessions/a/b is another route
    "..",  # removed by URL normalisation (RFC 3986 §5.2.4)
    ".",
    ".hidden",
    "-rf",  # reads as an option on the command line
    ":x",
    "_x",
    "",
    "x" * 201,
    "hard é",
    "a b",
    "a?b",
    "a#b",
    "a%2Fb",
    "a\\b",
    "line\nbreak",
    "tab\tid",
]

ACCEPTED = [
    "x",
    "0",
    "a..b",
    "a.b",
    "A_b:c-d.e",
    "x" * 200,
    str(uuid.uuid4()),
    "ae4a77f8-aedd-4bc1-888f-c94edc91af04:agent-aac57f5",  # a Claude Code subagent
    "sample-harvey-session",
]

RULE = re.compile(r"does not follow the id rule: 1 to 200 characters of A-Z a-z 0-9 \. _ : -")


@pytest.mark.parametrize("session_id", REFUSED)
def test_an_id_outside_the_rule_is_refused_naming_the_id_and_the_rule(
    store: LogStore, session_id: str
) -> None:
    with pytest.raises(InputError) as refused:
        store.create_session(NewSession(session_id))
    message = str(refused.value)
    assert "\n" not in message.replace(repr(session_id), "")
    assert repr(session_id) in message and RULE.search(message)
    with pytest.raises(InputError, match=RULE):
        store.append_batch(session_id, [NewEvent({"type": "x"})], create=NewSession())
    with pytest.raises(InputError, match=RULE):
        Recorder.start(store, session_id=session_id)
    assert store.sessions() == []  # nothing half-written


def test_every_id_the_rule_admits_is_created(store: LogStore) -> None:
    for session_id in ACCEPTED:
        assert store.create_session(NewSession(session_id)).id == session_id
    created = store.append_batch("made-by-append", [NewEvent({"type": "x"})], create=NewSession())
    assert created[0].seq == 1
    assert [s.id for s in store.sessions()] == [*ACCEPTED, "made-by-append"]


def test_a_session_made_before_the_rule_is_read_appended_to_and_verified(
    store: LogStore, db_url: str
) -> None:
    session_made_before_the_id_rule(db_url, "team/run 1", title="old")
    rec = Recorder(store, "team/run 1")
    rec.append(events.message("user", "still here"))
    store.append_batch(
        "team/run 1", [NewEvent({"type": "x"}, key="k")], create=NewSession(title="ignored")
    )
    assert store.get_session("team/run 1").head_seq == 2
    assert [e.seq for e in store.read("team/run 1")] == [1, 2]
    assert [v.ok for v in verify(store)] == [True]
    assert [a.ok for a in audit(store, ["team/run 1"])] == [True]
