"""Redaction before append (docs/redaction.md), on both backends: no secret of a built-in kind
is stored, each becomes a marker naming its kind with a digest keyed per log, the payload
records what was redacted and where (never the value), and the user's rules and the switch
come from the API, the environment and ``agenttrail.toml``.

The secrets are in tests/_secrets.py.
"""

from __future__ import annotations

import json
import re
import sqlite3
import uuid
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agenttrail.codec import encode_payload
from agenttrail.errors import InputError
from agenttrail.log import redact
from agenttrail.log.redact import Redactor, RedactRules
from agenttrail.log.redact._detectors import _FOLDS_TO_ASCII
from agenttrail.log.store import LogStore, open_store
from agenttrail.model import NewEvent, NewSession, events
from tests._secrets import AWS_SECRET, CASES, SESSION_TOKEN

MARKER = re.compile(r"\[REDACTED:([a-z0-9_.-]+):([0-9a-f]{8})\]")


def stored_payloads(store: LogStore, session_id: str) -> list[dict[str, Any]]:
    return [e.payload for e in store.read(session_id)]


@pytest.mark.parametrize(("kind", "text", "secret"), CASES, ids=[c[0] for c in CASES])
def test_every_built_in_kind_is_replaced_by_a_marker_naming_it(
    store: LogStore, kind: str, text: str, secret: str
) -> None:
    session = store.create_session(NewSession())
    store.append(session.id, events.message("user", text))
    [payload] = stored_payloads(store, session.id)
    assert secret not in json.dumps(payload)
    assert [m.group(1) for m in MARKER.finditer(payload["content"])][-1] == kind
    assert payload["redactions"][-1] == {"kind": kind, "path": "$.content"}
    rows = list(store.read_rows(session.id))
    assert secret.encode() not in rows[0][2]  # the stored CBOR bytes


def test_secrets_deep_in_a_payload_and_in_json_text_are_found_by_field_name(
    store: LogStore,
) -> None:
    output = json.dumps(
        {"Credentials": {"AccessKeyId": "ASIAY34FZKBOKMUTVV7A", "SessionToken": SESSION_TOKEN}}
    )
    env = json.dumps({"env": {"AWS_SECRET_ACCESS_KEY": AWS_SECRET, "HOME": "/root"}})
    payload = {
        "type": "tool_result",
        "toolCallId": "c1",
        "output": output,
        "nested": {"stdout": json.dumps(env), "headers": [{"x-api-key": "abc123xyz789"}]},
        "password": {"value": 42},
    }
    session = store.create_session(NewSession())
    store.append(session.id, payload)
    [got] = stored_payloads(store, session.id)
    text = json.dumps(got)
    for secret in ("ASIAY34FZKBOKMUTVV7A", SESSION_TOKEN, AWS_SECRET, "abc123xyz789"):
        assert secret not in text
    assert json.loads(json.loads(got["nested"]["stdout"]))["env"]["HOME"] == "/root"
    assert got["password"].startswith("[REDACTED:password:")
    assert got["redactions"] == [
        {"kind": "aws-access-key-id", "path": "$.output"},
        {"kind": "session_token", "path": "$.output"},
        {"kind": "aws_secret_access_key", "path": "$.nested.stdout"},
        {"kind": "x_api_key", "path": '$.nested.headers[0]["x-api-key"]'},
        {"kind": "password", "path": "$.password"},
    ]
    assert got["toolCallId"] == "c1" and got["type"] == "tool_result"


def test_the_same_secret_gives_the_same_marker_in_a_log_and_another_in_another_log(
    tmp_path: Path,
) -> None:
    text = "first sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1GfAA"
    markers = []
    for name in ("a.db", "b.db"):
        with open_store(tmp_path / name) as store:
            one = store.create_session(NewSession()).id
            store.append(one, events.message("user", text))
            store.append(one, events.message("user", f"again: {text[6:]}"))
            first, second = (p["content"] for p in stored_payloads(store, one))
            assert MARKER.search(first).group(0) == MARKER.search(second).group(0)  # type: ignore[union-attr]
            markers.append(MARKER.search(first).group(2))  # type: ignore[union-attr]
    assert markers[0] != markers[1]  # each log draws its own key


def test_a_redacted_append_retried_with_its_key_writes_nothing_new(store: LogStore) -> None:
    session = store.create_session(NewSession())
    payload = events.message("user", f"my key is {AWS_SECRET[:8]} AKIAIOSFODNN7EXAMPLE")
    first = store.append_batch(session.id, [NewEvent(payload, key="k1")])
    again = store.append_batch(session.id, [NewEvent(payload, key="k1")])
    assert again[0].duplicate and again[0].seq == first[0].seq
    assert store.get_session(session.id).head_seq == 1


def test_a_payload_already_redacted_is_stored_as_it_is(store: LogStore) -> None:
    session = store.create_session(NewSession())
    store.append(session.id, {"type": "x", "password": "hunter2", "note": "password: hunter2"})
    [once] = stored_payloads(store, session.id)
    store.append(session.id, dict(once))  # an export of this log, imported back
    [_, twice] = stored_payloads(store, session.id)
    assert twice == once
    assert once["password"] == MARKER.search(once["note"]).group(0)  # type: ignore[union-attr]


def test_session_fields_and_metadata_are_redacted(store: LogStore) -> None:
    made = store.create_session(
        NewSession(
            title="debug sk-proj-Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zQ7",
            metadata={"token": 1, "db": {"password": "pw1"}},
        )
    )
    assert "Ab3dEf6hIj9k" not in (made.title or "")
    assert made.metadata["db"]["password"].startswith("[REDACTED:password:")
    assert made.metadata["redactions"] == [
        {"kind": "openai-key", "path": "$.title"},
        {"kind": "password", "path": "$.metadata.db.password"},
    ]
    sid = str(uuid.uuid4())
    create = NewSession(agent="bot client_secret=abc")
    store.append_batch(sid, [NewEvent({"type": "x"})], create=create)
    agent = store.get_session(sid).agent or ""
    assert agent.startswith("bot client_secret=[REDACTED:client_secret:") and "abc" not in agent


def test_redaction_off_stores_payloads_verbatim(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = "postgresql://app:S3cr3tPassw0rd@db/x AKIAIOSFODNN7EXAMPLE"
    with open_store(tmp_path / "off.db", redact=False) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, events.message("user", text))
        assert stored_payloads(store, sid)[0]["content"] == text
    monkeypatch.setenv("AGENTTRAIL_REDACT", "0")
    with open_store(tmp_path / "env.db") as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, events.message("user", text))
        assert stored_payloads(store, sid)[0] == events.message("user", text)


def test_user_rules_from_the_api_and_from_agenttrail_toml(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    payload = {
        "type": "tool_call",
        "arguments": {"query": "select 1", "tenant": "acme"},
        "text": "ticket itk_0123456789abcdef and x_internal=zzz9",
        "items": [{"q": "a"}, {"q": "b"}],
    }
    rules = RedactRules(
        fields=("x_internal",),
        patterns=(("internal-token", r"itk_[0-9a-f]{16}"),),
        paths=("$.arguments.query", "$.items[*].q"),
    )
    with open_store(tmp_path / "api.db", redact=rules) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, payload)
        [by_api] = stored_payloads(store, sid)
    assert by_api["arguments"]["tenant"] == "acme"
    assert [r["kind"] for r in by_api["redactions"]] == [
        "path",
        "internal-token",
        "x_internal",
        "path",
        "path",
    ]
    assert "itk_0123" not in json.dumps(by_api) and "zzz9" not in json.dumps(by_api)

    (tmp_path / "agenttrail.toml").write_text(
        "[redact]\n"
        'fields = ["x_internal"]\n'
        'paths = ["$.arguments.query", "$.items[*].q"]\n'
        '[[redact.patterns]]\nkind = "internal-token"\nregex = "itk_[0-9a-f]{16}"\n'
    )
    monkeypatch.chdir(tmp_path)
    with open_store(tmp_path / "toml.db") as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, payload)
        [by_file] = stored_payloads(store, sid)
    assert [r["kind"] for r in by_file["redactions"]] == [r["kind"] for r in by_api["redactions"]]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[redact]\nfields = 'x'\n", r"agenttrail\.toml \[redact\]: fields must be a list of str"),
        ("[redact]\nfield = ['x']\n", r"unknown key 'field'"),
        ("[redact\n", r"not TOML"),
        (
            '[[redact.patterns]]\nkind = "t"\nregex = "("\n',
            r"redact pattern 't': missing \), unterminated subpattern",
        ),
        ('[[redact.patterns]]\nkind = "T T"\nregex = "x"\n', r"kind 'T T' is not 1-40"),
    ],
)
def test_a_bad_config_is_one_line_naming_the_file_and_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    config = tmp_path / "agenttrail.toml"
    config.write_text(text)
    monkeypatch.setenv("AGENTTRAIL_REDACT_CONFIG", str(config))
    with pytest.raises(InputError, match=message) as raised:
        open_store(tmp_path / "x.db")
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "x.db").exists()


def test_a_version_1_log_gains_its_key_table_when_opened(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    script = resources.files("agenttrail.log.store").joinpath("schema/sqlite-0001.sql")
    conn = sqlite3.connect(path, isolation_level=None)
    conn.executescript(script.read_text("utf-8") + "\nPRAGMA user_version = 1;")
    conn.close()
    with open_store(path) as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, events.message("user", "AKIAIOSFODNN7EXAMPLE"))
        assert "AKIA" not in stored_payloads(store, sid)[0]["content"]


def test_text_with_lone_surrogates_is_redacted_and_kept_otherwise_as_it_was(
    store: LogStore,
) -> None:
    # docs/log-format.md, Lossless text: a lone surrogate is stored and read back as it is.
    text = "\ud800 İİ key AKIAIOSFODNN7EXAMPLE \udfff password=hunter2hunter2 日本"
    session = store.create_session(NewSession())
    store.append(session.id, {"type": "x", "text": text, "lone": "\udc80"})
    [got] = stored_payloads(store, session.id)
    assert got["lone"] == "\udc80"
    assert got["text"].startswith("\ud800 İİ key [REDACTED:aws-access-key-id:")
    assert "\udfff password=[REDACTED:password:" in got["text"] and got["text"].endswith(" 日本")


@pytest.mark.parametrize(("kind", "text", "secret"), CASES, ids=[c[0] for c in CASES])
def test_a_secret_after_an_escape_in_json_text_is_found(
    tmp_path: Path, kind: str, text: str, secret: str
) -> None:
    # A tool's output that is JSON text holds its lines as ...\nsecret: "n" then the secret.
    output = json.dumps({"log": f"start\n{text}\tend", "tab": f"\t{text}"})
    assert "\\n" in output
    with open_store(tmp_path / "x.db") as store:
        sid = store.create_session(NewSession()).id
        store.append(sid, {"type": "tool_result", "toolCallId": "c", "output": output})
        [got] = stored_payloads(store, sid)
    assert secret not in got["output"] and secret not in json.loads(got["output"])["log"]
    assert [r["kind"] for r in got["redactions"]].count(kind) >= 1


def test_the_byte_gate_knows_every_character_whose_lower_case_is_ascii() -> None:
    found = {
        chr(c).encode()
        for c in range(128, 0x110000)
        if not 0xD800 <= c <= 0xDFFF and any(x.isascii() and x.isalpha() for x in chr(c).lower())
    }
    assert found == set(_FOLDS_TO_ASCII)


_GATE_TEXTS = st.lists(
    st.sampled_from(
        [text for _, text, _ in CASES]
        + ["\u212aey=abc123xyz789", "\u0130", "PASSWORD=hunter2", "Authorization", "x", "é"]
        + ["sk-", "AKIA", "Bearer abc.def", "contraseña", "CONTRASEÑA", "\udc81"]
    )
    | st.text(max_size=12),
    max_size=4,
).map(" ".join)
_GATE_PAYLOADS = st.dictionaries(
    st.sampled_from(["type", "content", "password", "ApiKey", "CONTRASEÑA", "k"])
    | st.text(max_size=6),
    _GATE_TEXTS | st.lists(_GATE_TEXTS, max_size=3) | st.integers() | st.none(),
    max_size=4,
)


@settings(max_examples=300, deadline=None)
@given(payload=_GATE_PAYLOADS, fields=st.sampled_from([(), ("contraseña",)]))
def test_the_gate_over_a_payloads_cbor_redacts_as_the_gate_over_its_text(
    payload: dict[str, Any], fields: tuple[str, ...]
) -> None:
    # import looks first at the bytes it has (Redactor.payload's data): the outcome must be
    # the one a look at the payload itself gives, secrets, markers and paths alike
    redactor = Redactor(RedactRules(fields=fields), key=lambda: b"k" * 32)
    assert redactor.payload(payload, encode_payload(payload)) == redactor.payload(payload)


@settings(max_examples=200, deadline=None)
@given(
    payloads=st.lists(_GATE_PAYLOADS, max_size=6),
    fields=st.sampled_from([(), ("contraseña",)]),
    per_look=st.integers(1, 4),
)
def test_a_look_over_many_payloads_finds_every_one_redaction_changes(
    payloads: list[dict[str, Any]], fields: tuple[str, ...], per_look: int
) -> None:
    # import looks over all of an export's payloads at once (Redactor.may_change): when it
    # finds nothing, redacting each payload alone must change none of them
    redactor = Redactor(RedactRules(fields=fields), key=lambda: b"k" * 32)
    changed = [redactor.payload(p) is not p for p in payloads]
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(redact, "PAYLOADS_PER_LOOK", per_look)
        looked = redactor.may_change([encode_payload(p) for p in payloads])
    assert looked or not any(changed)
    assert not Redactor(RedactRules(enabled=False), key=bytes).may_change([b"sk-"])
