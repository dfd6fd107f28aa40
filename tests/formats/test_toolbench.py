"""ToolBench answer files (``agenttrail.formats.toolbench``): the real file, read in place, and
the files it must not claim.

The real file is ``toolbench/10_ChatGPT_DFS_woFilter_w2.json`` (``tests/formats/_recordings.py``
cites its SOURCES.md row). What is expected was read from it by eye / jq:
``answer_generation.train_messages`` holds three lists of 3, 5 and 7 messages, each a prefix of
the next; the last has roles system, user, assistant, function, assistant, function,
assistant; each assistant message has a ``function_call`` (transitaires_for_transitaires with
``{}``, transitaire_for_transitaires with ``is_id`` ACT_AGENCE_CALEDONIENNE_DE_TRANSIT, and
Finish), each ``function`` message names the call before it, and no message has an id.
Beside them ``answer_generation`` holds ``function``, three tool schemas (the two tools and
Finish), ``finish_type`` give_answer, ``query_count`` 3, ``total_tokens`` 2916,
``valid_data`` true and an empty ``chain``.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from agenttrail.errors import FormatError
from agenttrail.formats import detect, read_file, toolbench
from agenttrail.log.store import LogStore
from agenttrail.replay import to_anthropic, to_openai_chat, to_openai_responses, validate
from agenttrail.views.pairing import pair_tool_calls
from tests.conftest import REALDATA, run_cli
from tests.formats._recordings import TOOLBENCH, import_events


def test_the_answer_file_imports_its_last_conversation(store: LogStore) -> None:
    assert detect(TOOLBENCH, TOOLBENCH.read_bytes()) is toolbench
    [imported] = read_file(TOOLBENCH)
    assert imported.warnings == []
    assert imported.session.metadata["format"] == "toolbench"
    metadata = imported.session.metadata
    assert metadata["query"].startswith("Can you retrieve the contact details")
    # nothing of answer_generation is dropped: the tools the model was given, what it cost
    assert [f["name"] for f in metadata["function"]] == [
        "transitaire_for_transitaires",
        "transitaires_for_transitaires",
        "Finish",
    ]
    assert "parameters" in metadata["function"][0]
    assert (metadata["finish_type"], metadata["query_count"], metadata["total_tokens"]) == (
        "give_answer",
        3,
        2916,
    )
    assert (metadata["valid_data"], metadata["chain"]) == (True, [])
    events = import_events(store, TOOLBENCH)
    assert [(e.type, e.payload.get("role") or e.payload.get("name")) for e in events] == [
        ("message", "system"),
        ("message", "user"),
        ("message", "assistant"),
        ("tool_call", "transitaires_for_transitaires"),
        ("tool_result", "transitaires_for_transitaires"),
        ("message", "assistant"),
        ("tool_call", "transitaire_for_transitaires"),
        ("tool_result", "transitaire_for_transitaires"),
        ("message", "assistant"),
        ("tool_call", "Finish"),
    ]
    assert events[6].payload["input"] == {"is_id": "ACT_AGENCE_CALEDONIENNE_DE_TRANSIT"}
    pairing = pair_tool_calls(events)
    assert {c: r.seq for c, r in pairing.result_of.items()} == {4: 5, 7: 8}
    assert Counter(a.kind for a in pairing.anomalies.values()) == Counter({"no_result": 1})
    assert {e.payload.get("pairedBy") for e in events if e.type.startswith("tool_")} == {
        "legacy_function_call"
    }


def test_the_answer_file_shows_and_replays(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    done = run_cli("import", str(TOOLBENCH), "--db", db)
    assert done.returncode == 0, done.stderr
    session = done.stdout.strip()
    shown = run_cli("show", session, "--db", db)
    assert shown.returncode == 0, shown.stderr
    assert "4→5" in shown.stdout and "7→8" in shown.stdout  # one row per call and result
    assert shown.stdout.count("⚠") == 1 and "call with no result" in shown.stdout  # Finish
    replayed = run_cli("replay", session, "--db", db, "--format", "openai")
    assert replayed.returncode == 0, replayed.stderr
    messages = json.loads(replayed.stdout)["messages"]
    calls = [c["id"] for m in messages for c in m.get("tool_calls", [])]
    answers = [m["tool_call_id"] for m in messages if m["role"] == "tool"]
    assert calls == answers == ["legacy_call_4", "legacy_call_7", "legacy_call_10"]
    assert "note: seq 10: call 'legacy_call_10' (Finish) has no result recorded" in replayed.stderr


def test_the_answer_file_replays_valid_for_every_provider(store: LogStore) -> None:
    events = import_events(store, TOOLBENCH)
    for replayed, provider in [
        (to_openai_chat(events), "openai"),
        (to_anthropic(events), "anthropic"),
        (to_openai_responses(events), "responses"),
    ]:
        assert validate(replayed.messages, provider) == [], provider
        assert [n.seq for n in replayed.notes if n.kind == "legacy_call"] == [4, 7, 10]


def write_json(path: Path, value: Any) -> Path:
    path.write_text(json.dumps(value), encoding="utf-8")
    return path


def test_an_earlier_conversation_the_last_does_not_extend_is_named(tmp_path: Path) -> None:
    tree = json.loads(TOOLBENCH.read_text(encoding="utf-8"))
    tree["answer_generation"]["train_messages"][0][1]["content"] = "another question"
    [imported] = read_file(write_json(tmp_path / "answer.json", tree))
    assert imported.warnings == [
        f"{tmp_path / 'answer.json'}: answer_generation.train_messages[0] is not a prefix of "
        "answer_generation.train_messages[2]; only the last is imported"
    ]


@pytest.mark.parametrize(
    "path",
    [
        *sorted((REALDATA / "anthropic-sdk-python").glob("*")),
        *sorted((REALDATA / "otel-openai-v2-cassettes").glob("*")),
        *sorted((REALDATA / "claude-code-spotter").glob("*.jsonl")),
        REALDATA / "claude-code-simonw" / "sample_session.jsonl",
    ],
    ids=lambda p: p.name,
)
def test_sniff_leaves_other_real_files_alone(path: Path) -> None:
    assert not toolbench.sniff(path, path.read_bytes())


TRAIN = [[{"role": "user", "content": "hi"}]]


@pytest.mark.parametrize(
    "data",
    [
        TRAIN,  # the message lists alone are an OpenAI file
        {"answer_generation": {"query": "q"}},
        {"answer_generation": {"train_messages": []}},
        {"answer_generation": {"train_messages": [[]]}},
        {"answer_generation": {"train_messages": [['{"role": "user"}']]}},
        {"answer_generation": {"train_messages": TRAIN[0]}},  # one list, not a list of lists
        {"answer_generation": "train_messages"},
        {"messages": TRAIN[0], "note": "answer_generation"},
    ],
)
def test_sniff_leaves_near_misses_alone(tmp_path: Path, data: Any) -> None:
    path = write_json(tmp_path / "other.json", data)
    assert not toolbench.sniff(path, path.read_bytes())


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"answer_generation": []}, "answer_generation"),
        ({"answer_generation": {"train_messages": {}}}, "answer_generation.train_messages"),
        ({"answer_generation": {"train_messages": [[], 3]}}, "answer_generation.train_messages[1]"),
        (
            {"answer_generation": {"train_messages": [[{"role": 5}]]}},
            "answer_generation.train_messages[0][0].role",
        ),
    ],
)
def test_bad_answer_files_are_named(tmp_path: Path, data: Any, field: str) -> None:
    path = write_json(tmp_path / "bad.json", data)
    with pytest.raises(FormatError) as caught:
        read_file(path, "toolbench")
    assert caught.value.field == field and str(path) in str(caught.value)


@pytest.mark.parametrize(
    ("data", "said"),
    [
        # read as --format toolbench, a file of another format: "expected an object, not
        # null" of a field the file does not have told nothing
        ([{"request": {}}], "expected a ToolBench answer file (an object), not list"),
        ({"answer": "x"}, "field 'answer_generation': missing: not a ToolBench answer file"),
    ],
)
def test_a_file_of_another_shape_is_said_to_be_no_answer_file(
    tmp_path: Path, data: Any, said: str
) -> None:
    path = write_json(tmp_path / "other.json", data)
    with pytest.raises(FormatError) as caught:
        read_file(path, "toolbench")
    assert str(caught.value) == f"{path}: {said}"
