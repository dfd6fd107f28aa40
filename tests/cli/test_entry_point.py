"""The real ``agenttrail`` command, in subprocesses: the console script, ``python -m``, exit
codes and pipes. Every other CLI test calls ``agenttrail.cli.main`` in-process
(``tests.conftest.run_cli``); these few keep the entry point itself honest."""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

from agenttrail import __version__
from tests.conftest import REALDATA, run_cli_subprocess

SIMONW = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
"""SOURCES.md: simonw/claude-code-transcripts tests/sample_session.jsonl."""


def test_the_console_script_prints_its_version() -> None:
    script = shutil.which("agenttrail", path=str(Path(sys.executable).parent))
    assert script is not None, "the agenttrail console script is installed beside python"
    result = subprocess.run([script, "--version"], capture_output=True, text=True, check=False)
    assert (result.returncode, result.stdout.strip()) == (0, f"agenttrail {__version__}")


HEAVY_MODULES = (
    "agenttrail.formats",
    "agenttrail.ingest",
    "agenttrail.replay",
    "agenttrail.log.store",
    "rich.table",
    "fastapi",
    "httpx",
    "jsonschema",
    "cryptography",
    "jwt",
)
"""What building the command and printing ``--version`` must not import: each command imports
what it uses (its start-up is measured in bench/scale.py, not timed here)."""


def _imported_after(code: str, prefixes: tuple[str, ...]) -> list[str]:
    """The lines ``code`` prints, then the modules it imported whose names start with one
    of ``prefixes``, in a fresh interpreter."""
    listed = f"sorted(m for m in sys.modules if m.startswith({prefixes!r}))"
    probe = f"import sys\n{code}\nprint({listed})"
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result.stdout.splitlines()


def test_the_command_starts_without_the_heavy_modules() -> None:
    version = _imported_after(
        "from agenttrail.cli import main\nmain(['--version'])", (*HEAVY_MODULES, "typer", "rich")
    )
    assert version == [f"agenttrail {__version__}", "[]"]
    # building every command's options and help imports none of what the commands use
    built = _imported_after(
        "import typer.main\nfrom agenttrail.cli._app import app\ntyper.main.get_command(app)",
        HEAVY_MODULES,
    )
    assert built == ["[]"]


def test_a_command_builds_and_imports_only_itself(tmp_path: Path) -> None:
    # Typer builds the options and help of every command of its app before it parses:
    # agenttrail runs an app of the one command named (cli/_app.py, app_for)
    db = tmp_path / "log.db"
    code = f"from agenttrail.cli import main\nmain(['sessions', '--db', {str(db)!r}])"
    modules = _imported_after(code, ("agenttrail.cli.",))[-1]
    assert modules == str(
        [
            "agenttrail.cli._app",
            "agenttrail.cli._common",
            "agenttrail.cli._listing",
            "agenttrail.cli._options",
            "agenttrail.cli.log",
        ]
    )
    # an import draws no progress bar in a pipe, and imports none (0.015 s)
    code = (
        f"from agenttrail.cli import main\nmain(['import', {str(SIMONW)!r}, '--db', {str(db)!r}])"
    )
    assert _imported_after(code, ("rich.progress",))[-1] == "[]"


def test_import_format_names_are_the_formats() -> None:
    from agenttrail.cli.log import FORMAT_NAMES
    from agenttrail.formats import FORMATS

    assert tuple(FORMATS) == FORMAT_NAMES


def test_export_format_names_are_the_writers() -> None:
    from agenttrail.cli.log import EXPORT_FORMATS
    from agenttrail.views.document import DOCUMENT_FORMATS

    assert ("jsonl", "otlp", *DOCUMENT_FORMATS) == EXPORT_FORMATS


def test_quickstart_imports_shows_and_verifies(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    result = run_cli_subprocess("quickstart", str(SIMONW), "--db", str(db))
    assert result.returncode == 0, result.stderr
    assert "verify: 1 of 1 sessions intact" in result.stdout
    assert result.stderr.count("events written") == 1


def test_quickstart_by_its_path_says_where_agenttrail_is_and_what_to_run_next(
    tmp_path: Path,
) -> None:
    script = shutil.which("agenttrail", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {**os.environ, "HOME": str(tmp_path), "PATH": "/usr/bin:/bin", "COLUMNS": "100"}
    ran = subprocess.run([script, "quickstart"], cwd=tmp_path, env=env, capture_output=True)
    said = ran.stderr.decode()
    assert ran.returncode == 0, said
    assert f"agenttrail is {script} here (not on PATH" in said
    suggested = [line.strip() for line in said.splitlines() if line.startswith(f"  {script} ")]
    assert [line.split()[1] for line in suggested] == ["show", "export", "serve"]
    # the viewer needs the token serve prints: its bare address opened a page that could
    # read nothing
    assert "http://" not in said and "serve prints the link to open, with its token" in said
    for line in suggested[:2]:  # serve runs until stopped (tests/cli/test_help_examples.py)
        done = subprocess.run(["bash", "-c", line], cwd=tmp_path, env=env, capture_output=True)
        assert done.returncode == 0, done.stderr
    assert b"Harvey Session" in (tmp_path / "session.html").read_bytes()


def test_bad_input_is_exit_2_with_one_line_and_no_traceback(tmp_path: Path) -> None:
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "user"\n', encoding="utf-8")
    result = run_cli_subprocess("import", str(bad), "--db", str(tmp_path / "log.db"))
    assert result.returncode == 2
    assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr
    assert not (tmp_path / "log.db").exists()


def test_a_usage_error_is_one_line_naming_the_option_and_the_help(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    for args, said, where in (
        (["show", "s", "--since", "0", "--db", db], "--since: '0': seqs start at 1", "show"),
        # a date where show wants a seq (sessions, usage and search take dates)
        (
            ["show", "s", "--since", "2026-02-10", "--db", db],
            "'2026-02-10' is not a seq: show starts at an event's seq (1, 2, 3 …), not a date",
            "show",
        ),
        (["show", "s", "--tail", "abc", "--db", db], "'abc' is not a count of seqs", "show"),
        (["retain", "--older-than", "abc", "--db", db], "'abc' is not a valid float", "retain"),
        # Click's own errors in the words of agenttrail's: not "Missing argument 'SESSION'.",
        # "Invalid value for '--limit': 0 is not in the range x>=1." (a new user noticed)
        (["export", "--db", db], "error: missing argument SESSION (", "export"),
        (
            ["sessions", "--limit", "0", "--db", db],
            "error: --limit 0: must be 1 or more (",
            "sessions",
        ),
        (["nosuchcommand"], "error: no such command 'nosuchcommand' (", ""),
        # a command's option before it: where it goes is said (a new user tried this)
        (
            ["--db", db, "sessions"],
            "no such option: --db; a command's options go after its name: agenttrail COMMAND",
            "",
        ),
    ):
        result = run_cli_subprocess(*args)
        assert result.returncode == 2, args
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1, args
        assert said in result.stderr, result.stderr
        assert f"(agenttrail {where} --help)".replace("  ", " ") in result.stderr
        assert result.stdout == ""
    bare = run_cli_subprocess()  # no command: the help, as before, and no error line
    assert bare.returncode == 2 and "Usage: agenttrail" in bare.stdout and bare.stderr == ""


def test_a_window_past_the_last_event_says_so(tmp_path: Path) -> None:
    db = str(tmp_path / "log.db")
    assert run_cli_subprocess("import", str(SIMONW), "--db", db).returncode == 0
    listed = json.loads(run_cli_subprocess("sessions", "--json", "--db", db).stdout)
    sid, last = listed["id"], listed["events"]
    for extra in ([], ["--json"]):
        result = run_cli_subprocess("show", sid, "--since", str(last + 1), *extra, "--db", db)
        assert result.returncode == 0
        assert f"no events from seq {last + 1}: the last is seq {last}" in result.stderr
        assert result.stdout == ""  # it printed the header over an empty table
    whole = run_cli_subprocess("show", sid, "--since", str(last), "--db", db)
    assert "no events" not in whole.stderr


def test_a_failed_check_is_exit_1(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    assert run_cli_subprocess("import", str(SIMONW), "--db", str(db)).returncode == 0
    with sqlite3.connect(db) as conn:  # what the file's owner can do: drop the guards, edit
        for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'trigger'"):
            conn.execute(f'DROP TRIGGER "{name}"')
        conn.execute("UPDATE session_events SET created_at = '2000-01-01T00:00:00.000000Z'")
    result = run_cli_subprocess("verify", "--db", str(db))
    assert result.returncode == 1
    assert result.stdout.startswith("FAIL  ") and "seq 1:" in result.stdout


def test_a_reader_that_goes_away_ends_the_command_quietly(tmp_path: Path) -> None:
    db = tmp_path / "log.db"
    imported = run_cli_subprocess("import", str(SIMONW), "--db", str(db))
    session = imported.stdout.strip()
    export = subprocess.Popen(
        [sys.executable, "-m", "agenttrail.cli", "export", session, "--db", str(db)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert export.stdout is not None and export.stderr is not None
    export.stdout.readline()
    export.stdout.close()  # `agenttrail export … | head -1`
    stderr = export.stderr.read().decode()
    export.stderr.close()
    export.wait(timeout=30)
    assert "Traceback" not in stderr and "BrokenPipe" not in stderr


def test_output_that_cannot_be_written_is_one_error_line(tmp_path: Path) -> None:
    # `> /dev/full` (a full disk): a traceback from the write, or "Exception ignored" and exit
    # 120 from the flush at exit, where a command had buffered its output
    db = tmp_path / "log.db"
    session = run_cli_subprocess("import", str(SIMONW), "--db", str(db)).stdout.strip()
    for args in (
        ("--version",),
        ("sessions", "--db", str(db)),
        ("export", session, "--db", str(db)),
        ("show", session, "--db", str(db)),
        ("replay", session, "--db", str(db)),
    ):
        with open("/dev/full", "w") as full:  # every write fails: ENOSPC (Linux)
            done = subprocess.run(
                [sys.executable, "-m", "agenttrail.cli", *args],
                stdout=full,
                stderr=subprocess.PIPE,
                text=True,
                check=False,
            )
        lines = [line for line in done.stderr.splitlines() if not line.startswith("note: ")]
        assert (done.returncode, lines) == (
            1,
            ["error: cannot write standard output: No space left on device"],
        ), (args, done.stderr)
