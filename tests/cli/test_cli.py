"""The ``agenttrail`` command, run as a real subprocess against real SQLite files."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from agenttrail import Recorder
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.replay import validate
from tests.conftest import REALDATA, run_cli


def _snapshot(db_path: Path) -> list[tuple[object, ...]]:
    """Everything stored, to compare a database before and after a refused command."""
    conn = sqlite3.connect(db_path)
    try:
        rows = conn.execute("SELECT * FROM sessions ORDER BY id").fetchall()
        rows += conn.execute("SELECT * FROM session_events ORDER BY session_id, seq").fetchall()
        rows += conn.execute("SELECT * FROM session_event_keys ORDER BY session_id, key").fetchall()
        return rows
    finally:
        conn.close()


def test_quickstart_records_the_sample_when_there_are_no_transcripts(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    first = run_cli("quickstart", cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr
    assert "Harvey Session" in first.stdout
    assert "@mistral review this fix" in first.stdout
    assert "verify: 1 of 1 sessions intact (18 events)" in first.stdout
    assert (tmp_path / "agenttrail.db").exists()  # the embedded default, ./agenttrail.db
    second = run_cli("quickstart", cwd=tmp_path, env=env)
    assert second.returncode == 0
    assert "verify: 1 of 1 sessions intact (18 events)" in second.stdout
    # it ended with the verify line; now it names what to run next, and each one runs
    assert "next: read it again" in first.stderr
    assert "not on PATH" not in first.stderr  # run in-process: `agenttrail` is the name
    suggested = [line.split()[1:] for line in first.stderr.splitlines() if line.startswith("  ")]
    assert suggested[0] == ["show", "sample-harvey-session"]
    assert suggested[1] == ["export", "sample-harvey-session", "-o", "session.html"]
    assert suggested[2] == ["serve"]
    for args in suggested[:2]:
        assert run_cli(*args, cwd=tmp_path, env=env).returncode == 0
    assert "Harvey Session" in (tmp_path / "session.html").read_text(encoding="utf-8")
    named = run_cli("quickstart", "--db", str(tmp_path / "other.db"), cwd=tmp_path, env=env)
    assert f"  agenttrail show sample-harvey-session --db {tmp_path / 'other.db'}" in named.stderr


def test_quickstart_says_which_session_it_shows_when_it_reads_none(tmp_path: Path) -> None:
    # Run again with no transcripts to read, it showed one of the Claude Code sessions
    # imported earlier without saying which rule chose it.
    db = tmp_path / "log.db"
    spotter = REALDATA / "claude-code-spotter"
    assert run_cli("import", str(spotter), "--db", str(db)).returncode == 0
    # the files' first timestamps: short 2026-02-10T21:11, tool_heavy 22:57, and the
    # subagent's transcript 2026-02-12T14:12, the latest to start but one step of a session
    # (a new user's check: quickstart showed it): tool_heavy's session is the latest main one
    latest = "d6e0bada-1959-4eec-a9d2-0bfade768d8f"
    result = run_cli("quickstart", "--db", str(db), cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    said = result.stderr.splitlines()
    assert said[0] == (
        "no Claude Code transcript read: showing the most recently started of the 2 Claude Code "
        "sessions here (1 subagent transcript left out)"
    )
    assert f"  agenttrail show {latest} --db {db}" in said
    # read now: of the 3 read, 1 a subagent's, it chose among 2 ("of the 3" read wrong)
    read = run_cli("quickstart", str(spotter), "--db", str(tmp_path / "new.db"), cwd=tmp_path)
    assert (
        "showing the most recently started of the 2 sessions read (1 subagent transcript "
        "left out)" in read.stderr.splitlines()
    )


def test_quickstart_says_the_transcripts_it_found_could_not_be_read(tmp_path: Path) -> None:
    # Only a transcript that is not one: it was skipped, then "no transcripts found" was said.
    project = tmp_path / ".claude" / "projects" / "p"
    project.mkdir(parents=True)
    (project / "x.jsonl").write_text('{"type": "user"}\n', encoding="utf-8")
    result = run_cli("quickstart", cwd=tmp_path, env={"HOME": str(tmp_path)})
    assert result.returncode == 0, result.stderr
    said = result.stderr.splitlines()
    assert said[0].startswith(f"skipped: {project / 'x.jsonl'}: ")
    assert said[1] == "none of 1 Claude Code transcript could be read: recording the sample session"
    assert "Harvey Session" in result.stdout


def _mixed_log(db_path: Path) -> str:
    with open_store(db_path) as store:
        record_sample(store)
        rec = Recorder.start(store, session_id="hard", title="hard text")
        with rec.turn(model="m") as turn:
            turn.user("café \udc81 done [bold]not markup[/bold]")
            call = turn.tool_call("read_file", {"path": "big"})
            turn.tool_result(call, "x" * (2 * 1024 * 1024))
            call = turn.tool_call("echo", {"text": "hi"})
            turn.tool_result(call, "0123456789")
        rec.append({"type": "from-the-future", "shape": [1, {"deep": None}]})
        rec.append(events.tool_result("nobody", "ghost", output="lost"))
    return "hard"


def test_export_import_export_gives_identical_bytes(tmp_path: Path) -> None:
    first_db, second_db = tmp_path / "a.db", tmp_path / "b.db"
    _mixed_log(first_db)
    for session in (SAMPLE_SESSION_ID, "hard"):
        exported = run_cli("export", session, "--format", "jsonl", "--db", str(first_db))
        assert exported.returncode == 0, exported.stderr
        path = tmp_path / f"{session}.jsonl"
        path.write_text(exported.stdout, encoding="utf-8")
        imported = run_cli("import", str(path), "--db", str(second_db))
        assert imported.returncode == 0, imported.stderr
        assert imported.stdout == f"{session}\n"
        again = run_cli("export", session, "--db", str(second_db))
        assert again.stdout.encode() == exported.stdout.encode()
        # Importing the export again writes nothing.
        twice = run_cli("import", str(path), "--db", str(second_db))
        assert "0 events written" in twice.stderr
    lines = [json.loads(line) for line in (tmp_path / "hard.jsonl").read_text().splitlines()]
    assert lines[0]["payload"]["content"] == "café \udc81 done [bold]not markup[/bold]"
    assert len(lines[2]["payload"]["output"]) == 2 * 1024 * 1024
    assert {"session_id", "seq", "created_at", "actor", "payload"} <= set(lines[0])
    assert all("type" in line["payload"] for line in lines)
    assert run_cli("verify", "--db", str(second_db)).returncode == 0


def test_export_without_format_takes_it_from_the_files_suffix(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    _mixed_log(Path(db))
    given = {"a.html": (), "b.HTM": (), "c.md": (), "d.jsonl": (), "e.html": ("--format", "jsonl")}
    for name, extra in given.items():
        done = run_cli("export", SAMPLE_SESSION_ID, "-o", str(tmp_path / name), *extra, "--db", db)
        assert done.returncode == 0, done.stderr
    against = {
        f: run_cli("export", SAMPLE_SESSION_ID, "--format", f, "--db", db).stdout
        for f in ("html", "md", "jsonl")
    }
    wrote = {name: (tmp_path / name).read_text(encoding="utf-8") for name in given}
    assert wrote == {
        "a.html": against["html"],
        "b.HTM": against["html"],
        "c.md": against["md"],
        "d.jsonl": against["jsonl"],
        "e.html": against["jsonl"],  # --format given: the suffix says nothing
    }
    assert wrote["a.html"].startswith("<!doctype html>") and wrote["c.md"].startswith("# ")


def test_an_altered_export_is_refused(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    with open_store(db) as store:
        record_sample(store)
    exported = run_cli("export", SAMPLE_SESSION_ID, "--db", str(db)).stdout
    altered = exported.replace("What is 2+2?", "What is 2+3?")
    path = tmp_path / "altered.jsonl"
    path.write_text(altered, encoding="utf-8")
    target = tmp_path / "b.db"
    result = run_cli("import", str(path), "--db", str(target))
    assert result.returncode == 2
    assert (
        "field 'hash': hash does not match the line's contents: the export, or the log it "
        "came from, was altered (a JSON tool" in result.stderr
    )
    assert "altered.jsonl:2" in result.stderr
    # its hashes are checked as it is written, in the log made for it: that log is taken
    # away again, the absence of one left as it was (README: exit codes)
    assert sorted(p.name for p in tmp_path.glob("b.db*")) == []
    # a log that was there stays, empty or not, as it was
    open_store(target).close()
    for kept in (target, db):
        before = run_cli("sessions", "--json", "--db", str(kept)).stdout
        assert run_cli("import", str(path), "--db", str(kept)).returncode == 2
        assert kept.exists() and run_cli("sessions", "--json", "--db", str(kept)).stdout == before


_BAD_INPUTS = {
    "malformed.json": (
        b'{"messages": [\n  {"role": "user", "content": "hi"},\n  {"role": \n',
        ":4: invalid JSON",
    ),
    "malformed.jsonl": (
        b'{"type": "user"}\n{"type": "assistant", "message": \n',
        ":2: invalid JSON",
    ),
    "garbage.bin": (bytes(range(256)) * 4, "not UTF-8"),
    "empty.json": (b"", "empty file"),
    "blank.jsonl": (b"\n\n  \n", "empty file"),
    "unknown.txt": (b"just some prose, not a transcript\n", "unknown format"),
    # a file named as a secret field is: the message after its name is not a value to redact
    "passwd": (b"root:x:0:0:root:/root:/bin/bash\n", "unknown format"),
    # a TOML table opens with "[": no format, rather than "invalid JSON" of a JSON array
    "pyproject.toml": (b'[project]\nname = "x"\n', ": unknown format (not one of: jsonl,"),
    # a .jsonl names its first bad line, even the first
    "notes.jsonl": (
        b'not json\n{"type": "user"}\n',
        ":1: invalid JSON: Expecting value (column 1)",
    ),
    # json's "starting at" takes the column after it, not in parentheses
    "cut.json": (b'{"a": "x', ":1: invalid JSON: Unterminated string starting at column 7"),
}


@pytest.mark.parametrize("name", sorted(_BAD_INPUTS))
def test_bad_input_is_one_line_exit_2_and_leaves_the_database_as_it_was(
    tmp_path: Path, name: str
) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    before = _snapshot(db)
    content, expected = _BAD_INPUTS[name]
    bad = tmp_path / name
    bad.write_bytes(content)
    other = tmp_path / "other.db"
    with open_store(other) as store:
        store.append_batch("copy", [NewEvent(events.message("user", "hi"))], create=NewSession())
    good = tmp_path / "good.jsonl"
    good.write_text(run_cli("export", "copy", "--db", str(other)).stdout, encoding="utf-8")
    # The good file comes first: it must not be written either.
    result = run_cli("import", str(good), str(bad), "--db", str(db))
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith(f"error: {bad}") and expected in lines[0]
    assert "Traceback" not in result.stderr
    assert result.stdout == ""
    assert _snapshot(db) == before


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        # a "[" with no "]" in the host, a %-escape that is not UTF-8: tracebacks from the
        # URL parser and from libpq's (and no password in what is said)
        (
            ("sessions", "--db", "postgresql://app:hunter2@db[/x"),
            "error: database URL: Invalid IPv6 URL (a host in [ ] is an IPv6 address)",
        ),
        (
            ("sessions", "--db", "postgresql://%ff:hunter2@db/x"),
            "error: database URL 'postgresql://%ff@db/x': a %-escape in it is not UTF-8 text",
        ),
        # an argument that is not UTF-8 (Python reads its bytes as lone surrogates): an id
        # holds none, where the lookup was a traceback
        (("show", "\udcff"), "error: no session '\\udcff'; agenttrail sessions lists those"),
        (("usage", "s\udcff"), "error: no session 's\\udcff'; agenttrail sessions lists those"),
    ],
)
def test_a_bad_database_url_or_session_argument_is_one_line(
    tmp_path: Path, args: tuple[str, ...], expected: str
) -> None:
    if "--db" not in args:
        args = (*args, "--db", str(tmp_path / "log.db"))
        open_store(tmp_path / "log.db").close()
    done = run_cli(*args)
    assert (done.returncode, done.stdout) == (2, "")
    [line] = done.stderr.splitlines()
    assert line.startswith(expected) and "hunter2" not in line, done.stderr


@pytest.mark.parametrize("name", ["nope.jsonl", "api_key"])
def test_a_missing_file_is_named(tmp_path: Path, name: str) -> None:
    result = run_cli("import", str(tmp_path / name), "--db", str(tmp_path / "x.db"))
    assert result.returncode == 2
    assert (
        result.stderr == f"error: {tmp_path / name}: cannot read file: No such file or directory\n"
    )


def test_show_pairs_calls_flags_anomalies_and_prints_markup_literally(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _mixed_log(db)
    result = run_cli("show", "hard", "--db", str(db))
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "[bold]not markup[/bold]" in out
    assert "read_file" in out and "2→3" in out and "— ok" in out
    assert "⚠ result with no call" in out
    assert "from-the-future" in out
    assert "user" in out and "agent" in out


def test_show_gives_the_date_when_a_session_spans_days(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        store.create_session(NewSession(id="days"))
        for stamp in ("2026-06-24T23:59:58.000000Z", "2026-06-25T00:00:03.000000Z"):
            store.append("days", events.message("user", "hi"), created_at=stamp)
        store.create_session(NewSession(id="day"))
        store.append("day", events.message("user", "hi"), created_at="2026-06-24T10:00:00.000000Z")
    spans = run_cli("show", "days", "--db", str(db)).stdout
    assert "06-24 23:59:58" in spans and "06-25 00:00:03" in spans
    one_day = run_cli("show", "day", "--db", str(db)).stdout
    assert "10:00:00" in one_day and "06-24 10:00:00" not in one_day


def test_show_prints_a_window_of_a_long_session(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        store.create_session(NewSession(id="long"))
        store.append("long", events.tool_call("c1", "read_file", {"path": "a"}))
        for i in range(2, 10):
            store.append("long", events.message("user", f"message number {i}"))
        store.append("long", events.tool_result("c1", "read_file", output="the file"))
    tail = run_cli("show", "long", "--tail", "3", "--db", str(db)).stdout
    assert [n for n in range(2, 10) if f"message number {n}" in tail] == [8, 9]
    # the result is in the window and its call before it: the call's row comes first
    assert tail.index("1→10") < tail.index("message number 8")
    assert "the file" in tail and "result with no call" not in tail
    since = run_cli("show", "long", "--since", "1", "--db", str(db)).stdout
    assert "1→10" in since and "result with no call" not in since  # paired across the gap
    assert "chain intact: 10 events" in tail
    both = run_cli("show", "long", "--tail", "3", "--since", "2", "--db", str(db))
    assert (both.returncode, both.stderr) == (
        2,
        "error: --since and --tail do not go together: give one\n",
    )


def test_sessions_lists_sessions_as_a_table_and_as_json(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    _mixed_log(db)
    table = run_cli("sessions", "--db", str(db))
    assert table.returncode == 0 and "Harvey Session" in table.stdout
    rows = [
        json.loads(line)
        for line in run_cli("sessions", "--json", "--db", str(db)).stdout.splitlines()
    ]
    assert [(r["id"], r["events"]) for r in rows] == [(SAMPLE_SESSION_ID, 18), ("hard", 7)]


def test_a_unique_prefix_names_a_session(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        store.append_batch("abc-1", [NewEvent({"type": "x"})], create=NewSession())
        store.append_batch("abd-2", [NewEvent({"type": "x"})], create=NewSession())
    assert run_cli("show", "abc", "--db", str(db)).returncode == 0
    ambiguous = run_cli("show", "ab", "--db", str(db))
    assert ambiguous.returncode == 2 and "matches 2 sessions" in ambiguous.stderr
    missing = run_cli("verify", "zzz", "--db", str(db))
    assert (missing.returncode, missing.stderr) == (
        2,
        "error: no session 'zzz'; agenttrail sessions lists those in this log\n",
    )
    with open_store(db) as store:  # one session left for "" to match: it is refused still
        store.remove_session("abd-2", reason="test")
    blank = run_cli("show", "", "--db", str(db))
    assert (blank.returncode, blank.stdout, blank.stderr) == (
        2,
        "",
        "error: the session id is blank: give an id or a unique prefix of one\n",
    )


def test_read_commands_do_not_create_a_database(tmp_path: Path) -> None:
    result = run_cli("sessions", "--db", str(tmp_path / "none.db"))
    assert result.returncode == 2 and "no agenttrail database" in result.stderr
    assert not (tmp_path / "none.db").exists()


def test_a_database_in_a_folder_that_is_not_there_is_named_as_such(tmp_path: Path) -> None:
    db = tmp_path / "no-such-folder" / "log.db"
    result = run_cli(
        "import", str(REALDATA / "claude-code-spotter" / "short.jsonl"), "--db", str(db)
    )
    assert (result.returncode, result.stderr) == (
        2,
        f"error: cannot create database {db}: no folder {db.parent}\n",
    )
    assert not db.parent.exists()


@pytest.mark.parametrize("command", [["sessions"], ["show", "x"], ["verify"]])
def test_a_database_that_is_a_folder_is_named_as_such(tmp_path: Path, command: list[str]) -> None:
    result = run_cli(*command, "--db", str(tmp_path))
    assert (result.returncode, result.stderr) == (
        2,
        f"error: {tmp_path} is a folder, not a database file\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_a_blank_database_is_refused_not_read_as_the_default(tmp_path: Path) -> None:
    result = run_cli("sessions", "--db", "", cwd=tmp_path)
    assert (result.returncode, result.stderr) == (
        2,
        "error: --db is blank: give a database file or URL\n",
    )
    assert list(tmp_path.iterdir()) == []


def test_the_environment_names_the_database(tmp_path: Path) -> None:
    db = tmp_path / "env.db"
    with open_store(db) as store:
        record_sample(store)
    result = run_cli("sessions", "--json", env={"AGENTTRAIL_DATABASE_URL": f"sqlite:///{db}"})
    assert json.loads(result.stdout)["id"] == SAMPLE_SESSION_ID
    # a log the variable names that cannot be opened: the error says where the name came from
    for url, said in [
        ("mysql://db.example/log", "unknown scheme 'mysql'"),
        (str(tmp_path / "none.db"), "no agenttrail database at"),
    ]:
        result = run_cli("sessions", env={"AGENTTRAIL_DATABASE_URL": url})
        assert result.returncode == 2, result.stderr
        assert said in result.stderr
        assert result.stderr.endswith("(the log AGENTTRAIL_DATABASE_URL names)\n")
    # given with --db, the option is the name: no note
    result = run_cli("sessions", "--db", str(tmp_path / "none.db"))
    assert result.stderr.endswith("(import something first)\n")


def test_a_truncated_real_transcript_is_refused_naming_the_line(tmp_path: Path) -> None:
    # claude-code-spotter/short.jsonl of the real data (marot/spotter, SOURCES.md), cut in
    # the middle of its 7th line as a crash mid-write would leave it.
    lines = (REALDATA / "claude-code-spotter" / "short.jsonl").read_bytes().split(b"\n")
    torn = tmp_path / "torn.jsonl"
    torn.write_bytes(b"\n".join(lines[:6]) + b"\n" + lines[6][: len(lines[6]) // 2])
    db = tmp_path / "log.db"
    result = run_cli("import", str(torn), "--db", str(db))
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {torn}:7: invalid JSON")
    # what the user then most likely has: a transcript Claude Code is still writing
    assert "the file was cut short, or is still being written (agenttrail watch" in result.stderr
    assert len(result.stderr.splitlines()) == 1
    with open_store(db) as store:
        assert store.sessions() == []


def test_a_failed_import_does_not_create_the_database(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"messages": [', encoding="utf-8")
    result = run_cli("import", str(bad), "--db", str(tmp_path / "new.db"))
    assert result.returncode == 2
    assert not (tmp_path / "new.db").exists()


@pytest.mark.parametrize("target", ["missing-folder/x.jsonl", "."])
def test_writing_to_a_bad_path_is_one_line_and_exit_2(tmp_path: Path, target: str) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    for command in ("export", "fountain"):
        result = run_cli(command, SAMPLE_SESSION_ID, "--db", str(db), "-o", str(tmp_path / target))
        assert result.returncode == 2, result.stderr
        assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        p.name for p in tmp_path.iterdir() if not p.name.endswith(".tmp")
    )


def test_quickstart_takes_named_paths_strictly_and_shows_what_it_imported(tmp_path: Path) -> None:
    env = {"HOME": str(tmp_path)}
    missing = run_cli("quickstart", str(tmp_path / "nope"), cwd=tmp_path, env=env)
    assert missing.returncode == 2 and "nope: cannot read file: No such file" in missing.stderr
    # otel-openai-v2-cassettes of the real data (SOURCES.md): OpenAI, not Claude Code.
    cassette = (
        REALDATA / "otel-openai-v2-cassettes" / "test_chat_completion_tool_calls_with_content.yaml"
    )
    result = run_cli("quickstart", str(cassette), cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    assert "What's the weather in Seattle and San Francisco today?" in result.stdout
    assert "sample session" not in result.stderr


def test_direction_controls_never_reach_the_terminal_raw(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        rec = Recorder.start(store, session_id="bidi")
        with rec.turn(model="m") as turn:
            turn.user("pay \u202eevil\u202c now \x1b[2J")
    shown = run_cli("show", "bidi", "--db", str(db)).stdout
    assert "\u202e" not in shown and "\x1b" not in shown
    assert "\\u202e" in shown and "\\x1b" in shown
    screenplay = run_cli("fountain", "bidi", "--db", str(db)).stdout
    assert "\u202e" not in screenplay and "\\u{202e}" in screenplay


def test_replay_prints_the_body_and_notes_on_stderr(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    with open_store(db) as store:
        sid = store.create_session(NewSession(id="todo")).id
        payloads = [
            events.message("user", "find TODOs", actor="user"),
            events.message("assistant", ""),
            events.tool_call("c1", "grep", {"pattern": "TODO"}),
            events.tool_call("c2", "ls", {}),
            events.tool_result("c1", output="a.py:3"),
            events.message("user", "hi", actor="user"),
        ]
        store.append_batch(sid, [NewEvent(p) for p in payloads])
    got = run_cli("replay", "todo", "--format", "anthropic", "--db", str(db))
    assert got.returncode == 0, got.stderr
    assert validate(json.loads(got.stdout)["messages"], "anthropic") == []
    assert got.stderr == (
        "note: seq 4: call 'c2' (ls) has no result recorded: a placeholder result was sent\n"
    )
    early = run_cli("replay", "todo", "--upto", "1", "--db", str(db))
    assert json.loads(early.stdout) == {"messages": [{"role": "user", "content": "find TODOs"}]}
    # past the head: the whole session, and a note that says so (a slip of a seq, perhaps)
    late = run_cli("replay", "todo", "--format", "anthropic", "--upto", "99", "--db", str(db))
    assert late.stdout == got.stdout
    assert late.stderr.endswith("note: --upto 99 is past the last event (seq 6)\n")
    below = run_cli("replay", "todo", "--upto", "-1", "--db", str(db))
    assert below.returncode == 2 and "--upto -1: must be 0 or more" in below.stderr
    bad = run_cli("replay", "todo", "--format", "gemini", "--db", str(db))
    assert bad.returncode == 2 and bad.stderr.startswith("error: unknown replay format")


def test_a_session_without_a_date_shows_no_start_time(tmp_path: Path) -> None:
    # A message list carries no date: nothing may stand in for the start (before, `sessions`
    # printed the time of the import as "started").
    db = tmp_path / "log.db"
    dateless = tmp_path / "dateless.json"
    dateless.write_text(json.dumps([{"role": "user", "content": "no date here"}]))
    dated = tmp_path / "dated.json"
    response = {
        "object": "chat.completion",
        "created": 1700000000,  # 2023-11-14T22:13:20Z
        "model": "gpt-4o",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "hi"}}],
    }
    request = {"model": "gpt-4o", "messages": [{"role": "user", "content": "dated"}]}
    dated.write_text(json.dumps({"request": request, "response": response}))
    assert run_cli("import", str(dateless), str(dated), "--db", str(db)).returncode == 0
    with open_store(db) as store:
        by_title = {s.title: s for s in store.sessions()}
    undated = by_title["no date here"]
    assert undated.started is None
    assert by_title["dated"].started == "2023-11-14T22:13:20.000000Z"

    records = [
        json.loads(line)
        for line in run_cli("sessions", "--json", "--db", str(db)).stdout.splitlines()
    ]
    assert [(r["title"], r["started"]) for r in records] == [
        ("dated", "2023-11-14T22:13:20.000000Z"),
        ("no date here", None),  # no start time: after the dated ones, its field null
    ]
    # in a pipe: id, started, agent, events, title, tab-separated; no start time is empty
    listed = [line.split("\t") for line in run_cli("sessions", "--db", str(db)).stdout.splitlines()]
    assert [(row[1], row[4]) for row in listed] == [
        ("2023-11-14T22:13:20.000000Z", "dated"),
        ("", "no date here"),
    ]
    shown = run_cli("show", undated.id, "--db", str(db)).stdout
    assert "started" not in shown
    # Fountain's title page gives the session's date only when there is one (before, the time
    # of the first event, here the time of the import).
    screenplay = run_cli("fountain", undated.id, "--db", str(db)).stdout
    assert "Date:" not in screenplay and undated.created_at[:10] not in screenplay.split("\n\n")[0]
    dated_play = run_cli("fountain", by_title["dated"].id, "--db", str(db)).stdout
    assert "Draft date: 2023-11-14" in dated_play
