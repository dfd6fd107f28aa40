"""Every ``Example:`` in ``agenttrail … --help`` runs, as written, in a shell, against a log
that ``agenttrail quickstart`` filled with the sample session, and exits 0.

The examples are read from the commands' help (so a new command's example is run too), each
is run with bash in a folder of its own whose ``./agenttrail.db`` holds the sample session,
with the real console script first on ``PATH``. Two substitutions are made, and only these:
a fixed port becomes a free one (other tests on this machine may hold 8787 or 8788), and the
OTLP receiver's address becomes a real receiver's (tests/cli/test_push.py). Commands that
serve until stopped (serve, proxy, watch) are stopped with SIGTERM once they have printed
their first line, and must then exit 0 as they document. The examples use bash, jq and GNU
xargs, as a reader's shell would.
"""

from __future__ import annotations

import os
import re
import select
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import typer.main

from agenttrail.cli._app import COMMANDS, app
from tests.cli.test_push import Receiver, receiver  # noqa: F401  (the fixture)
from tests.conftest import REALDATA, free_port, run_cli

SIMONW = REALDATA / "claude-code-simonw" / "sample_session.jsonl"
"""SOURCES.md: simonw/claude-code-transcripts tests/sample_session.jsonl."""

SERVING = ("serve", "proxy", "watch")
"""Commands that run until a signal stops them."""

LAST = ("keygen", "checkpoint", "verify", "erase", "retain")
"""Run last, in this order: an example that uses what an earlier one wrote runs after it (the
key, then the checkpoint), and those that change or remove the sample session end the run."""


def _examples() -> dict[str, list[str]]:
    """Each command's example commands: the backquoted ``agenttrail …`` texts of its help
    from the paragraph that starts with ``Example`` on (a list, one command an item)."""
    group = typer.main.get_command(app)
    found: dict[str, list[str]] = {}
    for name, command in group.commands.items():  # type: ignore[attr-defined]
        paragraphs = (command.help or "").split("\n\n")
        start = next(i for i, p in enumerate(paragraphs) if p.startswith("Example"))
        example = " ".join(" ".join(paragraphs[start:]).split())
        found[name] = re.findall(r"`(agenttrail [^`]+)`", example)
    return found


def _ordered(examples: dict[str, list[str]]) -> list[tuple[str, str]]:
    names = [n for n, *_ in COMMANDS if n not in LAST] + list(LAST)
    return [(name, text) for name in names for text in examples[name]]


def test_every_command_has_an_example() -> None:
    examples = _examples()
    assert sorted(examples) == sorted(name for name, *_ in COMMANDS)
    assert all(examples.values()), [name for name, texts in examples.items() if not texts]


def test_examples_are_whole_lines_at_80_columns() -> None:
    # Rich folded `agenttrail erase … --reason "leaked API key,` / `ticket SEC-12"` over
    # two lines at 80 columns: copied from the terminal, the command broke.
    for name, texts in _examples().items():
        shown = run_cli(name, "--help", env={"COLUMNS": "80"})
        assert shown.returncode == 0, shown.stderr
        lines = shown.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, name
        for text in texts:
            assert any(text in line for line in lines), f"{name}: {text!r} is cut in --help"


def test_flags_are_listed_without_a_type() -> None:
    # Typer's Rich help listed every flag as `--json  <bool>`, as if it took a value
    for args in [(), *((name,) for name, *_ in COMMANDS)]:
        shown = run_cli(*args, "--help", env={"COLUMNS": "100"}).stdout
        assert "<bool>" not in shown, args
        assert re.search(r"--help +Show this message and exit\.", shown), args
    listed = run_cli("sessions", "--help", env={"COLUMNS": "100"}).stdout
    assert re.search(r"--json +One JSON object per line", listed)
    assert re.search(r"--limit +<int range>", listed)  # an option with a value keeps its type


def test_every_help_example_works_on_the_sample_session(
    tmp_path: Path,
    receiver: Receiver,  # noqa: F811
) -> None:
    home = tmp_path / "home"
    (home / ".claude" / "projects").mkdir(parents=True)
    (home / "project").mkdir()
    script = shutil.which("agenttrail", path=str(Path(sys.executable).parent))
    assert script is not None
    env = {
        **os.environ,
        "HOME": str(home),
        "PATH": f"{Path(script).parent}{os.pathsep}{os.environ['PATH']}",
        "COLUMNS": "100",
    }
    env.pop("AGENTTRAIL_DATABASE_URL", None)
    work = tmp_path / "work"
    work.mkdir()
    started = subprocess.run(
        ["agenttrail", "quickstart"], cwd=work, env=env, capture_output=True, text=True
    )
    assert started.returncode == 0, started.stderr
    assert "Harvey Session" in started.stdout  # no transcripts: the sample session
    shutil.copy(SIMONW, home / ".claude" / "projects" / "session.jsonl")  # for watch
    failures = []
    for name, text in _ordered(_examples()):
        command = text.replace("http://127.0.0.1:6006/v1/traces", receiver.url())
        if name in SERVING:
            code, said = _serve_until_first_line(_free_port(command, name), work, env)
        else:
            done = subprocess.run(
                ["bash", "-c", command], cwd=work, env=env, capture_output=True, text=True
            )
            code, said = done.returncode, done.stderr
        if code != 0 or "Traceback" in said:
            failures.append(f"{text}: exit {code}: {said.strip()[-300:]}")
    assert failures == []
    assert len(receiver.requests) == 1  # push's example sent the sample session


def _free_port(command: str, name: str) -> str:
    port = str(free_port())
    if "--port" in command:
        return re.sub(r"--port \d+", f"--port {port}", command)
    return f"{command} --port {port}" if name != "watch" else command


def _serve_until_first_line(command: str, cwd: Path, env: dict[str, str]) -> tuple[int, str]:
    """Run ``command`` until it prints a line (or 30 s pass), then SIGTERM it: its exit code
    and stderr."""
    with subprocess.Popen(
        ["bash", "-c", f"exec {command}"],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None and proc.stderr is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                proc.stdout.readline()
                break
        if proc.poll() is None:
            time.sleep(0.5)  # past the line: the command is in its loop, where SIGTERM stops it
            proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            code = proc.wait()
        return code, proc.stderr.read()
