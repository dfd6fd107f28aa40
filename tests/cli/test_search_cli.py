"""``agenttrail search`` and ``agenttrail sessions`` filters, in-process (run_cli) on a real
SQLite log, and once through the real console script."""

from __future__ import annotations

import json
from pathlib import Path

from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import run_cli, run_cli_subprocess


def _log(tmp_path: Path) -> str:
    """Three sessions written by hand: their agents, users, start days, models and errors are
    what the filters below are checked against."""
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        rows = [
            ("s-jan", "harvey", "ana", "2026-01-05T10:00:00.000000Z", "gpt-4o", False),
            ("s-feb", "harvey", "bo", "2026-02-10T10:00:00.000000Z", "claude-x", True),
            ("s-mar", "mistral", "ana", "2026-03-15T10:00:00.000000Z", "gpt-4o", True),
        ]
        for sid, agent, user, started, model, failing in rows:
            store.create_session(NewSession(sid, f"title {sid}", agent, user, None, started))
            payloads = [
                events.message("user", "Wie ist das Wetter in Köln?"),
                events.message("assistant", "Sonnig", meta={"model": model}),
                events.tool_call("c", "fetch", {"url": "https://example.test/köln"}),
                events.tool_result("c", output="ok", error="timeout" if failing else None),
            ]
            store.append_batch(sid, [NewEvent(p, created_at=started) for p in payloads])
    return db


def _ids(result_stdout: str) -> list[str]:
    return [json.loads(line)["id"] for line in result_stdout.splitlines()]


def test_sessions_filters_and_limit(tmp_path: Path) -> None:
    db = _log(tmp_path)

    def ids(*args: str) -> list[str]:
        result = run_cli("sessions", "--json", "--db", db, *args)
        assert result.returncode == 0, result.stderr
        return _ids(result.stdout)

    assert ids() == ["s-jan", "s-feb", "s-mar"]
    assert ids("--agent", "harvey") == ["s-jan", "s-feb"]
    assert ids("--user", "ana") == ["s-jan", "s-mar"]
    # in any case, as --agent: a Harvey file's user is its cue, RSDOIEL (a new-user check)
    assert ids("--user", "ANA") == ids("--user", "Ana") == ["s-jan", "s-mar"]
    assert ids("--since", "2026-02-10") == ["s-feb", "s-mar"]
    assert ids("--until", "2026-02-10") == ["s-jan", "s-feb"]
    assert ids("--since", "2026-02-10T11:00:00Z") == ["s-mar"]
    # a time compares as a time: the same instant without microseconds, or with an offset
    assert ids("--since", "2026-02-10T10:00:00Z") == ["s-feb", "s-mar"]
    assert ids("--since", "2026-02-10T12:00:00+02:00") == ["s-feb", "s-mar"]
    assert ids("--until", "2026-02-10T10:00:00Z") == ["s-jan", "s-feb"]
    assert ids("--until", "2026-02-10T09:59:59.999999Z") == ["s-jan"]
    assert ids("--model", "gpt-4o") == ["s-jan", "s-mar"]
    assert ids("--errors") == ["s-feb", "s-mar"]
    assert ids("--errors", "--model", "gpt-4o", "--user", "ana") == ["s-mar"]
    assert ids("--limit", "2") == ["s-jan", "s-feb"]
    table = run_cli("sessions", "--db", db, "--agent", "mistral").stdout
    assert "s-mar" in table and "s-jan" not in table
    # filters that leave none say so on stderr, as search does; the output stays empty
    for args in ([], ["--json"]):
        none = run_cli("sessions", "--db", db, "--agent", "nobody", "--errors", *args)
        assert (none.returncode, none.stdout) == (0, "")
        assert none.stderr == "no session matches (agent nobody, errors only)\n"
    bad = run_cli("sessions", "--db", db, "--since", "last week")
    assert bad.returncode == 2 and "error: --since 'last week': expected a date" in bad.stderr
    # a range that ends before it starts is a slip: said, not an empty list
    backwards = run_cli("sessions", "--db", db, "--since", "2026-03-01", "--until", "2026-02-28")
    assert (backwards.returncode, backwards.stdout) == (2, "")
    assert backwards.stderr == (
        "error: --since 2026-03-01 is after --until 2026-02-28: no session can match\n"
    )
    assert ids("--since", "2026-02-10T10:00:00Z", "--until", "2026-02-10") == ["s-feb"]
    # a blank filter would match nothing and say nothing of why
    for option in ("--agent", "--user", "--model"):
        blank = run_cli("sessions", "--db", db, option, " ")
        assert (blank.returncode, blank.stdout) == (2, "")
        assert blank.stderr == f"error: {option} is blank: give a name, or leave the option out\n"
    blank = run_cli("search", "köln", "--db", db, "--tool", "")
    assert blank.returncode == 2 and "--tool is blank" in blank.stderr
    assert "Traceback" not in bad.stderr


def _found(db: str, *args: str) -> dict[str, list[int]]:
    """What ``agenttrail search --json ARGS`` finds: each session's seqs shown."""
    result = run_cli("search", "--json", "--db", db, *args)
    assert result.returncode == 0, result.stderr
    return {
        m["session_id"]: [h["seq"] for h in m["hits"]]
        for m in map(json.loads, result.stdout.splitlines())
    }


def test_search_prints_sessions_and_snippets_and_takes_the_filters(tmp_path: Path) -> None:
    db = _log(tmp_path)

    def found(*args: str) -> dict[str, list[int]]:
        return _found(db, *args)

    assert found("KOLN") == {"s-jan": [1, 3], "s-feb": [1, 3], "s-mar": [1, 3]}
    assert found("koln", "--tool", "fetch") == {"s-jan": [3], "s-feb": [3], "s-mar": [3]}
    assert found("koln", "--tool", "FETCH") == found("koln", "--tool", "fetch")
    assert found("timeout", "--errors") == {"s-feb": [4], "s-mar": [4]}
    assert found("timeout", "--agent", "mistral") == {"s-mar": [4]}
    assert found("köln", "--session", "s-fe") == {"s-feb": [1, 3]}
    assert found("köln", "--since", "2026-03-01") == {"s-mar": [1, 3]}
    assert found("köln", "--until", "2026-02-10") == {"s-jan": [1, 3], "s-feb": [1, 3]}
    assert found("köln", "--until", "2026-02-10T09:59:59Z") == {"s-jan": [1, 3]}
    assert found("köln", "--since", "2026-02-01", "--until", "2026-02-28") == {"s-feb": [1, 3]}
    assert found("köln", "--since", "2026-03-15T10:00:00Z") == {"s-mar": [1, 3]}
    assert found("köln", "--since", "2026-03-15T06:00:00-04:00") == {"s-mar": [1, 3]}
    # in a pipe: one tab-separated line per matching event (session, seq, type, snippet)
    text = run_cli("search", "wetter", "--db", db, "--session", "s-jan").stdout
    assert text == "s-jan\t1\tmessage\tWie ist das Wetter in Köln?\n"
    assert run_cli("search", "nowhere", "--db", db).stdout == ""
    # a session found by its own fields has a line too, as on a terminal (it had none)
    text = run_cli("search", "title s-feb", "--db", db).stdout
    assert text == "s-feb\t\tsession\tmatches title\n"
    text = run_cli("search", "bo", "--db", db).stdout.splitlines()
    assert text[0] == "s-feb\t\tsession\tmatches user"


def test_a_search_without_text_lists_what_its_filters_pick(tmp_path: Path) -> None:
    # "every error in my log" needs no text to find (a query was required, a new user's
    # `agenttrail search --errors` refused)
    db = _log(tmp_path)

    def found(*args: str) -> dict[str, list[int]]:
        return _found(db, *args)

    assert found("--errors") == {"s-feb": [4], "s-mar": [4]}
    assert found("--errors", "--agent", "harvey") == {"s-feb": [4]}
    assert found("--tool", "FETCH", "--session", "s-jan") == {"s-jan": [3, 4]}
    assert found("--since", "2026-03-01") == {"s-mar": [1, 2, 3, 4]}
    # in a pipe, each event with the start of its text; no session matches by its fields
    text = run_cli("search", "--errors", "--db", db, "--session", "s-feb").stdout
    assert text == "s-feb\t4\ttool_result\tok timeout\n"
    none = run_cli("search", "--errors", "--until", "2026-01-31", "--db", db)
    assert (none.returncode, none.stdout, none.stderr) == (
        0,
        "",
        "no event (errors only, until 2026-01-31)\n",
    )
    # with nothing to narrow to, a blank query is still a slip, said
    for args, why in (
        ([], ""),
        ([""], ""),
        (["   "], ""),
        (["--agent", "harvey"], " (--agent picks sessions, not events)"),
        (["--session", "s-jan"], " (--session picks sessions, not events)"),
        (
            ["--agent", "harvey", "--session", "s-jan"],
            " (--agent and --session pick sessions, not events)",
        ),
    ):
        blank = run_cli("search", *args, "--db", db)
        assert (blank.returncode, blank.stdout) == (2, "")
        assert blank.stderr == (
            "error: the query is blank: give the text to find, or --errors, --tool, --since "
            f"or --until for every event they pick{why}\n"
        ), args


def test_the_console_script_searches(tmp_path: Path) -> None:
    db = _log(tmp_path)
    result = run_cli_subprocess("search", "SONNIG", "--json", "--db", db, "--agent", "harvey")
    assert result.returncode == 0, result.stderr
    hits = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(m["session_id"], m["hits"][0]["snippet"]) for m in hits] == [
        ("s-jan", "Sonnig"),
        ("s-feb", "Sonnig"),
    ]


def test_a_search_that_finds_nothing_says_so_on_stderr(tmp_path: Path) -> None:
    db = _log(tmp_path)
    result = run_cli("search", "no such words anywhere", "--db", db)
    assert (result.returncode, result.stdout) == (0, "")
    assert result.stderr.strip() == "no match for 'no such words anywhere'"
    globbed = run_cli("search", "sonn*", "--db", db)  # "Sonnig" is there, "sonn*" is not
    assert (globbed.returncode, globbed.stdout) == (0, "")
    assert "* and ? are not wildcards" in globbed.stderr
    quoted = run_cli("search", '"Sonnig"', "--db", db)  # a search engine's phrase quotes
    assert (quoted.returncode, quoted.stdout) == (0, "")
    assert quoted.stderr == (
        "no match for '\"Sonnig\"'; the query is text as written: its quotes are searched for too\n"
    )
    narrowed = run_cli("search", "Sonnig", "--since", "2031-01-01", "--errors", "--db", db)
    assert (narrowed.returncode, narrowed.stdout) == (0, "")
    assert narrowed.stderr == "no match for 'Sonnig' (errors only, since 2031-01-01)\n"


def test_agent_and_model_are_named_in_any_case_and_a_model_by_its_snapshots(
    tmp_path: Path,
) -> None:
    # what responses name (a dated snapshot of the model asked for), and what a user types
    db = str(tmp_path / "log.db")
    models = {
        "s-4o": "gpt-4o-2024-08-06",
        "s-4o-caps": "GPT-4O",
        "s-mini": "gpt-4o-mini-2024-07-18",
        "s-sonnet": "claude-sonnet-4-5-20250929",
        "s-vertex": "claude-3-5-sonnet@20240620",
    }
    with open_store(db) as store:
        for sid, model in models.items():
            store.create_session(NewSession(sid, sid, "Harvey"))
            store.append(sid, events.message("assistant", "hi", meta={"model": model}))

    def ids(*args: str) -> list[str]:
        result = run_cli("sessions", "--json", "--db", db, *args)
        assert result.returncode == 0, result.stderr
        return sorted(_ids(result.stdout))

    assert ids("--model", "gpt-4o") == ["s-4o", "s-4o-caps"]  # not gpt-4o-mini
    assert ids("--model", "GPT-4o-Mini") == ["s-mini"]
    assert ids("--model", "gpt-4o-2024-08-06") == ["s-4o"]
    assert ids("--model", "claude-sonnet-4-5") == ["s-sonnet"]
    assert ids("--model", "claude-3-5-sonnet") == ["s-vertex"]
    assert ids("--model", "claude") == []
    assert ids("--agent", "harvey") == sorted(models)
    found = run_cli("search", "hi", "--agent", "HARVEY", "--json", "--db", db)
    assert sorted(json.loads(line)["session_id"] for line in found.stdout.splitlines()) == sorted(
        models
    )
