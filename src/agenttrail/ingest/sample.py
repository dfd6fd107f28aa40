"""Our own sample session, written with the recorder API.

It is the complete example session of the Harvey audit-trail design (docs/specs.md): a memory recall
before the first turn, a plain turn, a turn where RAG fired, a tool loop with one failing call, a
shell command, and a turn routed to a remote model that made its own tool call. ``agenttrail
quickstart`` records it when there are no Claude Code transcripts to import. Every timestamp is
fixed, so the session's bytes, and so its chain hashes, are the same on every machine.
"""

from __future__ import annotations

from agenttrail.errors import SessionExists
from agenttrail.ingest.recorder import Recorder
from agenttrail.log.store import LogStore
from agenttrail.model import usage

__all__ = ["SAMPLE_SESSION_ID", "record_sample"]

SAMPLE_SESSION_ID = "sample-harvey-session"
"""The sample's session id; recording it again is a no-op."""


def _at(clock: str) -> str:
    return f"2026-06-24T{clock}.000000Z"


def record_sample(store: LogStore) -> str:
    """Record the sample session into ``store`` unless it is there already; return its id."""
    try:
        rec = Recorder.start(
            store,
            session_id=SAMPLE_SESSION_ID,
            title="Harvey Session",
            agent="harvey",
            user="rsdoiel",
            workspace="<workspace>",
            started=_at("10:00:00"),
            # The seed's example states no time zone: its times float (docs/fountain-format.md).
            metadata={"credit": "Recorded by Harvey", "sample": True, "floating_times": True},
        )
    except SessionExists:
        return SAMPLE_SESSION_ID

    rec.recall(
        [
            {"id": "workspace_profile_250928", "source": "workspace_profile", "score": 1.0},
            {"id": "tool_use_d55f70", "source": "tool_use", "score": 0.75},
        ],
        created_at=_at("10:00:01"),
    )

    with rec.turn(model="llama3", provider="ollama", location="local") as turn:
        turn.user("What is 2+2?", created_at=_at("10:00:05"))
        turn.reply(
            "4", usage=usage(input=14, output=2), duration_ms=410, created_at=_at("10:00:06")
        )

    with rec.turn(model="llama3", provider="ollama", location="local") as turn:
        turn.rag("rag_store.db", 3, 0.87, created_at=_at("10:01:10"))
        turn.user("How do I initialise a Go module?", created_at=_at("10:01:10"))
        turn.reply(
            "Run: go mod init <module-path>",
            usage=usage(input=512, output=11),
            duration_ms=980,
            created_at=_at("10:01:12"),
        )

    with rec.turn(model="llama3", provider="ollama", location="local") as turn:
        turn.user("Does harvey.go compile cleanly?", created_at=_at("10:02:30"))
        read = turn.tool_call(
            "read_file", {"path": "harvey.go"}, id="call_read_1", created_at=_at("10:02:31")
        )
        turn.tool_result(
            read, "package main\n\nfunc main() {\n\tfoo()\n}\n", created_at=_at("10:02:31")
        )
        build = turn.tool_call(
            "run_shell", {"cmd": "go build ./..."}, id="call_shell_1", created_at=_at("10:02:32")
        )
        turn.tool_result(
            build,
            "./harvey.go:42:5: undefined: foo",
            exit_code=1,
            duration_ms=1840,
            created_at=_at("10:02:34"),
        )
        turn.reply(
            "There is a compilation error. Line 42 references an undefined variable.",
            usage=usage(input=803, output=17),
            duration_ms=1200,
            created_at=_at("10:02:36"),
        )

    rec.shell("go build ./...", "./harvey.go:42:5: undefined: foo", 1, created_at=_at("10:03:15"))

    with rec.turn(model="mistral", provider="mistral", location="remote") as turn:
        turn.user("@mistral review this fix", created_at=_at("10:04:00"))
        read = turn.tool_call(
            "read_file",
            {"path": "harvey.go"},
            id="call_read_2",
            character="MISTRAL",
            created_at=_at("10:04:01"),
        )
        turn.tool_result(read, "package main\n\nvar foo = 1\n", created_at=_at("10:04:01"))
        turn.reply(
            "The fix looks correct. The variable should be declared at line 38.",
            usage=usage(input=690, output=15, cache_read=None, cache_write=None),
            duration_ms=2300,
            created_at=_at("10:04:03"),
        )

    rec.close(created_at=_at("10:05:00"))
    return SAMPLE_SESSION_ID
