"""The command line's conventions: ``--json`` on the commands that print data, tab-separated
lines in a pipe and readable tables on an 80-column terminal (a real pseudo-terminal),
``-`` for standard input, shell completion."""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import stat
import struct
import subprocess
import sys
import termios
import threading
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agenttrail.cli._listing import tsv_field
from agenttrail.ingest.sample import SAMPLE_SESSION_ID, record_sample
from agenttrail.log.store import open_store
from agenttrail.model import NewEvent, NewSession, events
from agenttrail.views.safe import safe
from tests.conftest import REALDATA, read_terminal, run_cli, run_cli_subprocess

SPOTTER = REALDATA / "claude-code-spotter" / "short.jsonl"
"""SOURCES.md: marot/spotter, a Claude Code transcript (a UUID session id, a long title)."""
SPOTTER_ID = "55604662-cf2a-4331-851a-ec234028f8ca"

RECORDING = REALDATA / "anthropic-sdk-python" / "092be1de-d3f8-4c22-a4ea-a7ad54689836.json"
"""SOURCES.md: an Anthropic SDK recording; one of its two responses reports no cache counts."""


def _log(tmp_path: Path) -> str:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)
    assert run_cli("import", str(SPOTTER), "--db", str(db)).returncode == 0
    return str(db)


def _on_terminal(columns: int, *args: str, code: int = 0) -> str:
    """What ``agenttrail ARGS`` prints on a pseudo-terminal ``columns`` wide (exiting with
    ``code``)."""
    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, columns, 0, 0))
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR")}
    with subprocess.Popen(
        [sys.executable, "-m", "agenttrail.cli", *args],
        stdin=follower,
        stdout=follower,
        stderr=follower,
        env={**env, "TERM": "xterm"},
    ) as proc:
        os.close(follower)
        written = read_terminal(leader)
        assert proc.wait(timeout=60) == code
    os.close(leader)
    text = written.decode().replace("\r\n", "\n")
    return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # colours and cursor controls


def test_sessions_at_80_columns_keep_ids_and_titles_readable(tmp_path: Path) -> None:
    db = _log(tmp_path)
    for args in (("sessions",), ("sessions", "--usage")):
        shown = _on_terminal(80, *args, "--db", db)
        lines = shown.splitlines()
        assert all(len(line.rstrip()) <= 80 for line in lines), shown
        # the UUID is cut to a prefix every command takes, and the title stays in words
        [row] = [line for line in lines if line.startswith("55604662 ")]
        assert "mix phx.server" in row
        assert "Harvey Session" in shown
        assert run_cli("show", "55604662", "--db", db).returncode == 0
    wide = _on_terminal(160, "sessions", "--db", db)
    assert SPOTTER_ID in wide and "mix phx.server doesnt seem to start" in wide


def test_sessions_with_short_titles_keep_whole_ids_at_80_columns(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        record_sample(store)  # the id quickstart prints, and a 14-character title
    shown = _on_terminal(80, "sessions", "--db", str(db))
    [row] = [line for line in shown.splitlines() if "Harvey Session" in line]
    assert row.startswith(SAMPLE_SESSION_ID + " "), shown
    assert all(len(line.rstrip()) <= 80 for line in shown.splitlines()), shown


def test_usages_caption_names_where_its_costs_come_from(tmp_path: Path) -> None:
    # the price table is named only when it priced a call (it was named under costs that a
    # Langfuse export recorded, none priced by it)
    db = str(tmp_path / "log.db")
    recorded = {"total": 0.25, "currency": "USD", "source": "langfuse"}
    unnamed = {"total": 0.25}  # as a Langfuse export records it (its costDetails)
    with open_store(db) as store:
        for sid, cost in (("recorded", recorded), ("priced", None), ("unnamed", unnamed)):
            store.create_session(NewSession(sid))
            meta = events.meta(model="gpt-4o-mini-2024-07-18", usage=events.usage(1_000, 100))
            meta.update({"cost": cost} if cost else {})
            store.append(sid, events.message("assistant", "It is sunny.", meta=meta))
        store.create_session(NewSession("local"))  # a model no table prices: said why
        for model in ("llama3", "mistral"):
            meta = events.meta(model=model, usage=events.usage(1_000, 100))
            store.append("local", events.message("assistant", "It is sunny.", meta=meta))

    def caption(*args: str) -> list[str]:
        """The lines under the table's last row."""
        shown = _on_terminal(120, "usage", *args, "--db", db).splitlines()
        last = max(i for i, line in enumerate(shown) if "1,000" in line or "2,000" in line)
        return [line.strip() for line in shown[last + 1 :] if line.strip()]

    table = caption("recorded")
    assert table == ["costs as recorded: langfuse"], table
    table = caption("priced")
    assert len(table) == 1 and table[0].startswith("prices: genai-prices "), table
    assert caption("local") == ["unknown: no price for llama3, mistral"]
    assert caption("unnamed") == ["costs as recorded"]  # not "costs as recorded: recorded"
    assert caption("unnamed", "recorded") == ["costs as recorded: langfuse"]
    table = caption("recorded", "priced")
    assert table[0].startswith("prices: genai-prices ") and table[1:] == [
        "costs as recorded: langfuse"
    ], table


def test_usage_and_search_at_80_columns_keep_names_whole_and_snippets_under_themselves(
    tmp_path: Path,
) -> None:
    db = str(tmp_path / "log.db")
    models = ["claude-haiku-4-5-20251001", "gpt-4o-mini-2024-07-18"]
    ids = []
    with open_store(db) as store:
        for model in models:
            sid = store.create_session(NewSession(title=model)).id
            ids.append(sid)
            store.append(sid, events.message("user", "weather, " + "and more words " * 12))
            meta = events.meta(model=model, usage=events.usage(123_456, 7_890))
            store.append(sid, events.message("assistant", "It is sunny.", meta=meta))
    usage = _on_terminal(80, "usage", "--by", "model", "--db", db).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in usage), usage
    # the model's name whole on its row: two-word headers took two lines instead
    assert [line.split()[0] for line in usage if "123,456" in line] == models
    assert usage[0].split() == ["cache", "cache"]
    assert usage[1].split()[-3:] == ["read", "write", "cost"]
    # the last line before the price caption is the sum of the two models' rows
    [total] = [line for line in usage if line.startswith("total ")]
    assert total.split()[1:4] == ["2", "246,912", "15,780"], usage
    # a session's id is cut to a prefix that names it, as `sessions` cuts it, not folded
    by_session = _on_terminal(80, "usage", "--db", db).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in by_session), by_session
    shown = [line.split()[0] for line in by_session if "123,456" in line]
    assert len(ids[0]) == 36 and shown == [sid[:8] for sid in ids]
    assert run_cli("show", shown[0], "--db", db).returncode == 0
    found = _on_terminal(80, "search", "weather", "--db", db).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in found), found
    rows = [line for line in found if line.startswith(" ")]
    # each session's message is a row of two lines, the second under the snippet
    assert [line.startswith(" " * 23) for line in rows] == [False, True] * 2, found
    for line in rows:  # a seq and a type, or the snippet going on under itself
        assert re.match(r" {7}1  message {6}weather|^ {23}\S", line), found


def test_a_list_of_nothing_on_a_terminal_says_so_and_prints_no_table(tmp_path: Path) -> None:
    # usage's table of no rows worked out its widths from none: a traceback, exit 1
    # (a new user's `usage --until 2020-01-01`); sessions printed a lone header line
    db = _log(tmp_path)
    usage = _on_terminal(80, "usage", "--until", "2020-01-01", "--db", db)
    assert usage.strip() == "no model calls with usage on or before 2020-01-01 in 2 sessions"
    listed = _on_terminal(80, "sessions", "--since", "2030-01-01", "--db", db)
    assert listed.strip() == "no session matches (since 2030-01-01)"


def test_a_sum_not_every_call_reported_is_marked_and_said_under_the_table(
    tmp_path: Path,
) -> None:
    # one of the recording's two responses reports no cache counts: its sums were 0, as
    # if both had (a new-user check); they are `0 + ?`, said what that is under the table
    db = str(tmp_path / "log.db")
    assert run_cli("import", str(RECORDING), "--db", db).returncode == 0
    shown = _on_terminal(100, "usage", "--db", db).splitlines()
    row = next(line for line in shown if line.startswith("59176132"))
    assert row.split()[1:] == ["2", "3,182", "237", "0", "+", "?", "0", "+", "?", "$0.021835"]
    assert shown[-1].strip() == "+ ?: not every call reported it; the sum is of those that did"


def test_a_total_that_is_partial_is_said_so_too(tmp_path: Path) -> None:
    # Chat Completions reports no cache writes: its row says `-`, the Claude Code row its
    # own, and their total is the Claude Code sum of a kind one of the groups never reported
    db = str(tmp_path / "log.db")
    cassette = (
        REALDATA / "otel-openai-v2-cassettes" / "test_chat_completion_tool_calls_with_content.yaml"
    )
    assert run_cli("import", str(SPOTTER), str(cassette), "--db", db).returncode == 0
    shown = _on_terminal(120, "usage", "--db", db).splitlines()
    total = next(line for line in shown if line.startswith("total"))
    assert total.split()[-4:-1] == ["13,835", "+", "?"]  # short.jsonl's cache writes
    assert shown[-1].strip() == "+ ?: not every call reported it; the sum is of those that did"


def test_search_on_a_terminal_says_how_many_matches_it_did_not_show(tmp_path: Path) -> None:
    # the header said `7 events` over five rows, and nothing said where the other two were
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        sid = store.create_session(NewSession(title="t")).id
        for n in range(7):
            store.append(sid, events.message("user", f"weather {n}"))
    shown = _on_terminal(80, "search", "weather", "--db", db).splitlines()
    assert shown[0].split()[1:3] == ["7", "events"]
    assert [line.split()[0] for line in shown[1:6]] == ["1", "2", "3", "4", "5"]
    assert shown[6].split() == ["…", "2", "more:", "--hits", "7", "shows", "them"]
    every = _on_terminal(80, "search", "weather", "--hits", "7", "--db", db).splitlines()
    assert len(every) == 8 and "more" not in every[-1]


def test_usage_total_with_an_unpriced_model_keeps_names_whole_at_80_columns(
    tmp_path: Path,
) -> None:
    # The total's cost `$… + unknown` is wider than any row's: on one line it took the
    # room of the model column, which folded every long name (`claude-sonnet-4-5-2` / `0250929`).
    db = str(tmp_path / "log.db")
    models = ["claude-sonnet-4-5-20250929", "claude-opus-4-5-20251101", "llama3"]
    with open_store(db) as store:
        for model in models:
            sid = store.create_session(NewSession(title=model)).id
            store.append(sid, events.message("user", "hello"))
            meta = events.meta(model=model, usage=events.usage(1_000, 10, 29_274, 18_814))
            store.append(sid, events.message("assistant", "hi", meta=meta))
    usage = _on_terminal(80, "usage", "--by", "model", "--db", db).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in usage), usage
    assert [line.split()[0] for line in usage if "29,274" in line] == models
    [at] = [n for n, line in enumerate(usage) if line.startswith("total ")]
    assert usage[at].split()[1:4] == ["3", "3,000", "30"], usage
    assert usage[at].split()[-1].startswith("$"), usage  # the known part, then the rest
    assert usage[at + 1].strip() == "+ unknown", usage


def test_usage_names_an_unpriced_model_as_text_not_markup_or_terminal_control(
    tmp_path: Path,
) -> None:
    # the caption under the table names the models with no price: "[/m]" in a name was read
    # as Rich markup (a traceback instead of the table), ESC reached the terminal
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        sid = store.create_session(NewSession()).id
        meta = events.meta(model="tuned[/m]\x1b[2J", usage=events.usage(1_000, 10))
        store.append(sid, events.message("assistant", "hi", meta=meta))
    usage = _on_terminal(100, "usage", "--by", "model", "--db", db)
    assert "unknown: no price for tuned[/m]\\x1b[2J" in usage, usage


def test_a_recorded_costs_currency_and_source_are_shown_as_text(tmp_path: Path) -> None:
    # a cost as recorded (Langfuse's costDetails) names its currency and source: "[/m]" was
    # Rich markup in usage's cells (a traceback), ESC reached the terminal in show's header
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        sid = store.create_session(NewSession("s")).id
        meta = events.meta(model="gpt-4o", usage=events.usage(10, 5))
        meta["cost"] = {"total": 1.5, "currency": "[/m]", "source": "src\x1b[2J"}
        store.append(sid, events.message("assistant", "hi", meta=meta))
    usage = _on_terminal(100, "usage", "--db", db)
    assert "1.50 [/m]" in usage, usage
    shown = _on_terminal(100, "show", "s", "--db", db)
    assert "cost: 1.50 [/m] · src\\x1b[2J" in shown, shown


def test_notes_and_reports_on_stderr_make_the_logs_values_safe(tmp_path: Path) -> None:
    # replay's notes quote tool names and event types, import's report the file's name:
    # an ESC in either reached the terminal as it is
    db = str(tmp_path / "log.db")
    with open_store(db) as store:
        called = events.tool_call("c1", "t\x1b[31mRED", {})
        store.append_batch("s", [NewEvent(called)], create=NewSession("s"))
    replayed = run_cli("replay", "s", "--db", db)
    assert replayed.returncode == 0 and "\x1b" not in replayed.stderr
    assert "(t\\x1b[31mRED)" in replayed.stderr, replayed.stderr
    named = tmp_path / "a\x1b[2Jb.jsonl"
    named.write_text(run_cli("export", "s", "--db", db).stdout, encoding="utf-8")
    imported = run_cli("import", str(named), "--db", str(tmp_path / "copy.db"))
    assert imported.returncode == 0 and "\x1b" not in imported.stderr
    assert "a\\x1b[2Jb.jsonl: 1 event written" in imported.stderr, imported.stderr


def test_verify_makes_a_session_id_changed_by_hand_safe(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # verify is what an auditor runs on a suspect log: an id that breaks the id rule (made
    # here past the store's check, as a hand edit would) wrote its ESC to the terminal
    db = str(tmp_path / "log.db")
    with monkeypatch.context() as patch:
        patch.setattr("agenttrail.log.store._rules.check_session_id", lambda value: value)
        with open_store(db) as store:
            said = NewEvent(events.message("user", "hi"))
            store.append_batch("x\x1b[2J", [said], create=NewSession("x\x1b[2J"))
    verified = run_cli("verify", "--db", db)
    assert verified.returncode == 0 and "\x1b" not in verified.stdout
    assert verified.stdout.startswith("ok    x\\x1b[2J  1 events  head "), verified.stdout


def test_lists_in_a_pipe_are_tab_separated_lines(tmp_path: Path) -> None:
    db = _log(tmp_path)
    piped = run_cli_subprocess("sessions", "--usage", "--db", db)
    assert piped.returncode == 0, piped.stderr
    rows = [line.split("\t") for line in piped.stdout.splitlines()]
    assert [(r[0], r[3], r[4]) for r in rows] == [
        (SPOTTER_ID, "13", "mix phx.server doesnt seem to start"),
        (SAMPLE_SESSION_ID, "18", "Harvey Session"),
    ]
    assert rows[0][1] == "2026-02-10T21:11:52.438000Z" and rows[0][5] == "25366"
    usage = run_cli("usage", "--by", "model", "--db", db).stdout.splitlines()
    assert "claude-opus-4-6\t1\t3\t13\t11515\t13835\t$0.144448" in usage
    found = run_cli("search", "undefined variable", "--db", db).stdout
    assert found.startswith(f"{SAMPLE_SESSION_ID}\t12\tmessage\t")
    claims = run_cli("claims", SAMPLE_SESSION_ID, "--db", db).stdout.splitlines()
    assert [line.split("\t")[:3] for line in claims] == [
        ["2", "3", "4"],
        ["7", "12", "42"],
        ["14", "17", "38"],
    ]


def test_a_tab_or_newline_in_a_field_stays_in_its_field(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    with open_store(db) as store:
        from agenttrail.model import NewSession

        store.create_session(NewSession(id="odd", title="a\ttab\x1b[2J"))
    [row] = run_cli("sessions", "--db", str(db)).stdout.splitlines()
    assert row.split("\t") == ["odd", "", "", "0", "a\\ttab\\x1b[2J"]


def test_emoji_codes_in_printed_ids_and_quoted_input_are_printed_as_written(
    tmp_path: Path,
) -> None:
    # Rich writes ":smile:" in a printed string as an emoji unless told not to: the id that
    # `import` prints for a pipe and an input that an error quotes must not change
    db = tmp_path / "log.db"
    with open_store(db) as store:
        said = events.message("user", "say :thumbs_up: please")
        store.append_batch("run:smile:1", [NewEvent(said)], create=NewSession("run:smile:1"))
    exported = tmp_path / "run.jsonl"
    assert run_cli("export", "run:smile:1", "--db", str(db), "-o", str(exported)).returncode == 0
    imported = run_cli("import", str(exported), "--db", str(tmp_path / "copy.db"))
    assert imported.stdout == "run:smile:1\n", imported.stderr
    missing = run_cli("show", "no:smile:", "--db", str(db))
    assert missing.returncode == 2 and "no session 'no:smile:'" in missing.stderr


def test_show_verify_trace_import_and_migrate_print_json(tmp_path: Path) -> None:
    db = _log(tmp_path)
    rows = [
        json.loads(line)
        for line in run_cli("show", SAMPLE_SESSION_ID, "--json", "--db", db).stdout.splitlines()
    ]
    assert [r["seq"] for r in rows] == list(range(1, 19))
    assert rows[-1]["view"] == "note" and rows[-1]["text"] == "session closed"
    tail = run_cli("show", SAMPLE_SESSION_ID, "--json", "--tail", "2", "--db", db).stdout
    assert [json.loads(line)["seq"] for line in tail.splitlines()] == [17, 18]
    verdicts = [
        json.loads(line) for line in run_cli("verify", "--json", "--db", db).stdout.splitlines()
    ]
    assert {(v["session_id"], v["ok"], v["events"]) for v in verdicts} == {
        (SAMPLE_SESSION_ID, True, 18),
        (SPOTTER_ID, True, 13),
    }
    missing = run_cli("trace", "1", "--json", "--db", db)
    assert missing.returncode == 2 and missing.stderr.startswith("error: ")
    again = run_cli("import", str(SPOTTER), "--json", "--db", db)
    assert json.loads(again.stdout) == {
        "session_id": SPOTTER_ID,
        "path": str(SPOTTER),
        "written": 0,
        "skipped": 13,
        "warnings": [],
    }
    copied = run_cli("migrate", "--from", db, "--to", str(tmp_path / "copy.db"), "--json")
    assert [json.loads(line)["ok"] for line in copied.stdout.splitlines()] == [True, True]
    erased = run_cli("erase", SAMPLE_SESSION_ID, "2", "--reason", "test", "--json", "--db", db)
    assert json.loads(erased.stdout) == {
        "session_id": SAMPLE_SESSION_ID,
        "seqs": [2],
        "erasure_seq": 19,
    }


def test_a_checkpoint_and_a_key_are_read_from_stdin(tmp_path: Path) -> None:
    db = _log(tmp_path)
    key = tmp_path / "k.pem"
    assert run_cli("keygen", "--out", str(key)).returncode == 0
    signed = run_cli_subprocess(
        "checkpoint", SAMPLE_SESSION_ID, "--key", "-", "--db", db, input=key.read_text()
    )
    assert signed.returncode == 0, signed.stderr
    proved = run_cli_subprocess(
        "verify",
        "--checkpoint",
        "-",
        "--pubkey",
        f"{key}.pub",
        "--json",
        "--db",
        db,
        input=signed.stdout,
    )
    assert proved.returncode == 0, proved.stderr
    assert json.loads(proved.stdout.splitlines()[-1])["checkpoint"]["ok"] is True
    both = run_cli("verify", "--checkpoint", "-", "--pubkey", "-", "--db", db)
    assert both.returncode == 2 and "cannot both read stdin" in both.stderr


def test_shell_completion_is_available() -> None:
    script = run_cli("--show-completion", "bash")
    assert script.returncode == 0
    assert "_AGENTTRAIL_COMPLETE=complete_bash" in script.stdout
    assert "complete -o default -F _agenttrail_completion agenttrail" in script.stdout
    words = run_cli(
        env={
            "_AGENTTRAIL_COMPLETE": "complete_bash",
            "COMP_WORDS": "agenttrail sess",
            "COMP_CWORD": "1",
        }
    )
    assert words.stdout.split() == ["sessions"]


def test_session_ids_complete_from_the_log(tmp_path: Path) -> None:
    db = _log(tmp_path)

    def completed(words: str, cword: int) -> list[str]:
        env = {"_AGENTTRAIL_COMPLETE": "complete_bash", "COMP_WORDS": words}
        return run_cli(env={**env, "COMP_CWORD": str(cword)}).stdout.split()

    assert completed(f"agenttrail show --db {db} sam", 4) == [SAMPLE_SESSION_ID]
    assert completed(f"agenttrail diff --db {db} {SAMPLE_SESSION_ID} 556", 5) == [SPOTTER_ID]
    assert sorted(completed(f"agenttrail verify --db {db} ", 4)) == [SPOTTER_ID, SAMPLE_SESSION_ID]
    # a log that cannot be opened completes nothing, and says nothing
    missing = f"agenttrail show --db {tmp_path / 'none.db'} s"
    assert completed(missing, 4) == []
    assert not (tmp_path / "none.db").exists()


def test_a_dash_is_standard_input_and_output(tmp_path: Path) -> None:
    db = _log(tmp_path)
    exported = run_cli("export", SAMPLE_SESSION_ID, "-o", "-", "--db", db)
    assert exported.stdout == run_cli("export", SAMPLE_SESSION_ID, "--db", db).stdout
    assert not (tmp_path / "-").exists()
    play = run_cli("fountain", SAMPLE_SESSION_ID, "-o", "-", "--db", db).stdout
    assert play.startswith("Title: Harvey Session")
    fresh = tmp_path / "fresh.db"
    started = run_cli_subprocess(
        "quickstart", "-", "--db", str(fresh), input=SPOTTER.read_text(encoding="utf-8")
    )
    assert started.returncode == 0, started.stderr
    assert "mix phx.server doesnt seem to start" in started.stdout
    assert "verify: 1 of 1 sessions intact (13 events)" in started.stdout


def test_an_output_file_never_replaces_a_database_and_is_as_readable_as_a_shells(
    tmp_path: Path,
) -> None:
    # -o naming the log by mistake (a new user did, with export, fountain and checkpoint)
    # replaced the database with the output, exit 0: now refused, the log left as it was.
    db = _log(tmp_path)
    before = Path(db).read_bytes()
    key = str(tmp_path / "k.pem")
    assert run_cli("keygen", "--out", key).returncode == 0
    for command in (
        ["export", SAMPLE_SESSION_ID],
        ["export", SAMPLE_SESSION_ID, "--format", "html"],
        ["fountain", SAMPLE_SESSION_ID],
        ["checkpoint", SAMPLE_SESSION_ID, "--key", key],
    ):
        refused = run_cli(*command, "--db", db, "-o", db)
        assert refused.returncode == 2, refused.stdout
        assert refused.stderr == f"error: {db} is a database file; writing there would replace it\n"
        assert Path(db).read_bytes() == before
    # nor one of the files SQLite keeps beside it (an export there was lost, or deleted later)
    for side in ("-wal", "-shm", "-journal"):
        refused = run_cli("export", SAMPLE_SESSION_ID, "--db", db, "-o", db + side)
        assert refused.returncode == 2
        assert (
            refused.stderr
            == f"error: {db}{side} is a file of the database beside it; name another file\n"
        )
        assert Path(db).read_bytes() == before and not Path(db + side).exists()
        assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".log.db")) == []
    # a new file gets 0666 less the umask, as a shell's > gives; a file replaced keeps its mode
    umask = os.umask(0o022)
    try:
        written = run_cli("export", SAMPLE_SESSION_ID, "--db", db, "-o", "new.jsonl", cwd=tmp_path)
    finally:
        os.umask(umask)
    assert written.returncode == 0, written.stderr
    assert ((tmp_path / "new.jsonl").stat().st_mode & 0o777) == 0o644
    # and it says what it wrote, as import does (it said nothing: noticed by a new user)
    size = (tmp_path / "new.jsonl").stat().st_size
    assert written.stderr == f"new.jsonl: {size:,} bytes written\n"
    # a FIFO (or /dev/null) named by -o is written to, not replaced by a regular file
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert run_cli("export", SAMPLE_SESSION_ID, "--db", db, "-o", str(fifo)).returncode == 0
    reader.join(30)
    assert stat.S_ISFIFO(fifo.stat().st_mode)
    assert got == [run_cli("export", SAMPLE_SESSION_ID, "--db", db).stdout.encode()]
    kept = tmp_path / "kept.md"
    kept.write_text("old")
    kept.chmod(0o640)
    replaced = run_cli("export", SAMPLE_SESSION_ID, "--db", db, "-o", str(kept), "--format", "md")
    assert replaced.returncode == 0, replaced.stderr
    assert (kept.stat().st_mode & 0o777) == 0o640 and kept.read_text() != "old"


TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"
"""SOURCES.md: marot/spotter, a Claude Code transcript with many tool calls."""
SUBAGENT = REALDATA / "claude-code-spotter" / "agent-aac57f5.jsonl"
"""SOURCES.md: marot/spotter, a subagent's transcript (a long title)."""


def _column(header: str, name: str, following: str) -> int:
    """The width of column ``name`` in a borderless table's header: up to the next one."""
    return header.index(following) - header.index(name)


def test_sessions_usage_keeps_a_readable_title_at_80_and_100_columns(tmp_path: Path) -> None:
    db = _log(tmp_path)
    assert run_cli("import", str(TOOL_HEAVY), str(SUBAGENT), "--db", db).returncode == 0
    narrow = _on_terminal(80, "sessions", "--usage", "--db", db).splitlines()
    assert all(len(line.rstrip()) <= 80 for line in narrow)
    header = narrow[0]
    # the title kept 17 columns at 80 (it folded to "Search hex.pm for" / "the latest"):
    # the events column goes first, the agent's name stays whole
    assert "events" not in header
    assert _column(header, "title", "tokens") >= 24
    [row] = [line for line in narrow if line.startswith("ae4a77f8 ")]
    assert "claude-code" in row and "Search hex.pm for the" in row
    wide = _on_terminal(100, "sessions", "--usage", "--db", db).splitlines()
    assert "events" in wide[0] and _column(wide[0], "title", "tokens") >= 24


def _text_column(shown: str) -> str:
    """The transcript's text column, its lines joined by one space: a break that fell inside
    a word shows as a space in it."""
    cells = [line.split("│")[5].strip() for line in shown.splitlines() if line.count("│") == 6]
    return " ".join(cell for cell in cells if cell)


def test_show_wraps_tool_inputs_between_json_tokens(tmp_path: Path) -> None:
    db = _log(tmp_path)
    assert run_cli("import", str(TOOL_HEAVY), "--db", db).returncode == 0
    for columns in (80, 100):
        sample = _on_terminal(columns, "show", SAMPLE_SESSION_ID, "--db", db)
        assert all(len(line) <= columns for line in sample.splitlines())
        # it printed `read_file({"path":"har` / `vey.go"})` at 80 columns
        assert 'read_file({"path": "harvey.go"}) — ok' in _text_column(sample)
        heavy = _on_terminal(columns, "show", "d6e0bada", "--db", db)
        assert all(len(line) <= columns for line in heavy.splitlines() if "│" in line)
        # Glob's input (tool_heavy.jsonl line 31) breaks, if at all, after its colon
        assert 'Glob({"pattern": "assets/js/**/*.js"}) — ok' in _text_column(heavy)


def test_show_at_80_columns_cuts_long_event_labels_before_the_text(tmp_path: Path) -> None:
    db = _log(tmp_path)
    assert run_cli("import", str(TOOL_HEAVY), "--db", db).returncode == 0
    narrow = _on_terminal(80, "show", "d6e0bada", "--db", db)
    header = next(line for line in narrow.splitlines() if "┃ text" in line)
    # `file-history-snapshot` (21 characters) took the event column and left the text 27
    assert len(header.split("┃")[5]) >= 30
    assert "file-history-sn…" in narrow
    wide = _on_terminal(120, "show", "d6e0bada", "--db", db)
    assert "file-history-snapshot" in wide


@given(st.one_of(st.none(), st.integers(), st.text(), st.text(st.characters(codec=None))))
def test_a_tsv_field_is_the_safe_text_with_tabs_and_newlines_escaped(value: object) -> None:
    # The rule of tsv_field's docstring, composed the plain way: its fast path for text with
    # nothing to escape (str.isprintable) must give the same field for any value.
    plain = "" if value is None else safe(str(value)).replace("\t", "\\t").replace("\n", "\\n")
    assert tsv_field(value) == plain


def test_reconcile_at_80_columns_shows_the_trace_and_fresh_columns_only_when_filled(
    tmp_path: Path,
) -> None:
    # the sample's claims have no trace row and no re-run: the empty columns folded the
    # header "fresh" into "fres" / "h" and squeezed the reason (a new user's check)
    db = _log(tmp_path)
    shown = _on_terminal(80, "reconcile", "sample-harvey-session", "--db", db, code=1)
    lines = shown.splitlines()
    assert lines[0].split() == ["turn", "claim", "stated", "class", "why"]
    assert all(len(line.rstrip()) <= 80 for line in lines), shown
    assert "no trace row in the turn" in shown
