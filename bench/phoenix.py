"""Interop with Arize Phoenix: push real sessions with ``agenttrail push`` and ask Phoenix what
arrived. Opt-in, not part of the test suite (it installs Phoenix from PyPI).

    python bench/phoenix.py [--venv /tmp/agenttrail-phoenix] [--spec SPEC...] [--port N]

1. Creates a virtual environment at ``--venv`` (once; kept for the next run) and installs
   ``--spec`` into it with pip (default ``arize-phoenix``). A Phoenix before 15.10, which
   reads OpenInference attributes only, needs two pins its own metadata lacks today::

       --venv /tmp/agenttrail-phoenix-15.9 \\
       --spec "arize-phoenix<15.10" "graphql-core<3.3" "pydantic-ai-slim[mcp]<2"

2. Imports three third-party recordings from ``$AGENTTRAIL_SHARED/realdata`` (default
   ``../shared``) into a new SQLite log in a temporary folder: an OpenAI Chat Completions
   tool-call cassette, an Anthropic tool-runner recording with a failed tool, a Claude Code
   session.
3. Starts ``phoenix serve`` on loopback (``PHOENIX_HOST``, ``PHOENIX_PORT``, a
   ``PHOENIX_WORKING_DIR`` in the temporary folder), pushes every session to
   ``http://127.0.0.1:PORT/v1/traces``, twice, then asks Phoenix's GraphQL API for its
   projects' traces, spans, sessions and token counts.
4. Prints what Phoenix holds beside what ``agenttrail export --format otlp`` says was sent, and
   exits 1 when a span, trace, session or token count differs (the second push must add
   nothing). Phoenix is stopped at the end. Results: docs/otel.md, Export.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
from _serve import free_port  # bench/_serve.py, beside this script

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("AGENTTRAIL_SHARED", ROOT.parent / "shared"))
RECORDINGS = [
    SHARED / "realdata/otel-openai-v2-cassettes/test_chat_completion_tool_calls_with_content.yaml",
    SHARED / "realdata/anthropic-sdk-python/10e53c1d-51be-4c64-b5bf-99adb3fa4719.json",
    SHARED / "realdata/claude-code-simonw/sample_session.jsonl",
]

STARTUP_SECONDS = 180
"""How long Phoenix may take to answer after start (it migrates its SQLite database first)."""

QUERY = """
{ projects { edges { node {
    name traceCount recordCount tokenCountTotal tokenCountPrompt tokenCountCompletion
    sessions(first: 100) { edges { node {
        sessionId numTraces tokenUsage { prompt completion total }
        firstInput { value } lastOutput { value } } } }
    spans(first: 500) { edges { node {
        name spanKind statusCode tokenCountPrompt tokenCountCompletion
        context { spanId traceId } parentId } } }
} } } }
"""
"""What is asked of Phoenix's GraphQL API (its schema: Project, ProjectSession, Span)."""


def _agenttrail(*args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "agenttrail.cli", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"agenttrail {' '.join(args)} failed: {done.stderr.strip()}")
    return done.stdout


def install(venv: Path, spec: list[str]) -> Path:
    """``phoenix`` in ``venv``, installing the ``spec`` packages first when it is not there."""
    phoenix = venv / "bin" / "phoenix"
    if phoenix.exists():
        return phoenix
    started = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", *spec], check=True)
    print(f"installed {' '.join(spec)} in {time.monotonic() - started:.0f} s", flush=True)
    return phoenix


def expected(db: str, sessions: list[str]) -> dict[str, Any]:
    """What was sent, read from ``agenttrail export --format otlp``: spans, traces and the
    prompt and completion tokens of the model-call spans."""
    spans: list[dict[str, Any]] = []
    for session in sessions:
        request = json.loads(_agenttrail("export", session, "--format", "otlp", "--db", db))
        spans += [
            s for rs in request["resourceSpans"] for ss in rs["scopeSpans"] for s in ss["spans"]
        ]

    def tokens(key: str) -> int:
        return sum(
            int(a["value"]["intValue"])
            for s in spans
            for a in s["attributes"]
            if a["key"] == key and s["name"].startswith("chat")
        )

    return {
        "spans": len(spans),
        "traces": len({s["traceId"] for s in spans}),
        "prompt": tokens("gen_ai.usage.input_tokens"),
        "completion": tokens("gen_ai.usage.output_tokens"),
    }


@contextlib.contextmanager
def serving(venv: Path, spec: list[str], port: int = 0) -> Iterator[tuple[str, str]]:
    """A ``phoenix serve`` on loopback, installed first when it is not (:func:`install`), with
    a working directory of its own that goes with it: ``(base URL, Phoenix's version)`` once
    it answers ``/healthz``; stopped on exit. Exits (``SystemExit``) with its log's tail when
    it does not start within :data:`STARTUP_SECONDS`."""
    phoenix = install(venv, spec)
    version = subprocess.run(
        [str(venv / "bin" / "python"), "-c", "import phoenix; print(phoenix.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    port = port or free_port()
    with tempfile.TemporaryDirectory(prefix="agenttrail-phoenix-") as tmp:
        env = {
            **os.environ,
            "PHOENIX_HOST": "127.0.0.1",
            "PHOENIX_PORT": str(port),
            "PHOENIX_GRPC_PORT": str(free_port()),
            "PHOENIX_WORKING_DIR": str(Path(tmp) / "phoenix"),
        }
        with open(Path(tmp) / "phoenix.log", "w+") as log:
            server = subprocess.Popen([str(phoenix), "serve"], env=env, stdout=log, stderr=log)
            try:
                base = f"http://127.0.0.1:{port}"
                _wait(base, server, log)
                yield base, version
            finally:
                server.terminate()
                server.wait(timeout=30)


def _wait(base: str, server: subprocess.Popen[bytes], log: Any) -> None:
    deadline = time.monotonic() + STARTUP_SECONDS
    while True:
        try:
            if httpx.get(f"{base}/healthz", timeout=2).is_success:
                return
        except httpx.HTTPError:
            pass
        if server.poll() is not None or time.monotonic() > deadline:
            log.seek(0)
            sys.exit(f"Phoenix did not start:\n{log.read()[-3000:]}")
        time.sleep(1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--venv", type=Path, default=Path("/tmp/agenttrail-phoenix"))
    parser.add_argument("--spec", nargs="+", default=["arize-phoenix"])
    parser.add_argument("--port", type=int, default=0, help="default: a free port")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agenttrail-phoenix-log-") as tmp:
        db = str(Path(tmp) / "log.db")
        sessions = _agenttrail("import", *map(str, RECORDINGS), "--db", db).split()
        with serving(args.venv, args.spec, args.port) as (base, version):
            return _run(base, db, sessions, version)


def _run(base: str, db: str, sessions: list[str], version: str) -> int:
    print(f"Phoenix {version} on {base}", flush=True)
    for _ in range(2):
        _agenttrail("push", *sessions, "--otlp", f"{base}/v1/traces", "--db", db)
    want = expected(db, sessions)
    time.sleep(3)  # Phoenix inserts spans in batches, a second or so after they arrive
    answer = httpx.post(f"{base}/graphql", json={"query": QUERY}, timeout=30).json()
    if "errors" in answer:
        sys.exit(f"Phoenix's GraphQL API refused the query: {answer['errors']}")
    projects = [edge["node"] for edge in answer["data"]["projects"]["edges"]]
    got = {"spans": 0, "traces": 0, "prompt": 0, "completion": 0}
    for project in projects:
        got["spans"] += project["recordCount"]
        got["traces"] += project["traceCount"]
        got["prompt"] += project["tokenCountPrompt"] or 0
        got["completion"] += project["tokenCountCompletion"] or 0
        print(
            f"project {project['name']}: {project['traceCount']} traces, "
            f"{project['recordCount']} spans, tokens {project['tokenCountTotal']}"
        )
        for edge in project["sessions"]["edges"]:
            s = edge["node"]
            print(f"  session {s['sessionId']}: {s['numTraces']} traces, tokens {s['tokenUsage']}")
            first, last = (s[k] and s[k]["value"][:60] for k in ("firstInput", "lastOutput"))
            print(f"    first input {first!r}, last output {last!r}")
        kinds: dict[str, int] = {}
        for edge in project["spans"]["edges"]:
            span = edge["node"]
            key = f"{span['spanKind']} {span['name'].split(' ')[0]} {span['statusCode']}"
            kinds[key] = kinds.get(key, 0) + 1
        for key, count in sorted(kinds.items()):
            print(f"  {count:3} spans: {key}")
    sessions_seen = {edge["node"]["sessionId"] for p in projects for edge in p["sessions"]["edges"]}
    print(f"sent (once; pushed twice): {want}")
    print(f"Phoenix holds:             {got}, sessions {len(sessions_seen)} of {len(sessions)}")
    ok = got == want and sessions_seen == set(sessions)
    print("OK: every span, trace, session and token arrived once" if ok else "MISMATCH")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
