"""Fountain session screenplays (Harvey session format v1.2): writer and reader.

The screenplay is the human-readable audit trail of a session (docs/specs.md,
The Harvey audit trail; the full format and our escaping rules are
in ``docs/fountain-format.md``)::

    Title: Harvey Session                      title page
    ...
    FADE IN:

    INT. CONTEXT RECALL 2026-06-24 10:00:01    once, before the first turn, when recalled
    [[recall: ID (SOURCE) — score 1.00]]

    INT. HARVEY AND RSDOIEL TALKING <ts>       one scene per chat turn (INT. = local)
    Harvey and RSDOIEL are in chat mode. Model: LLAMA3. Workspace: <workspace>.
    [[rag: 3 chunks from rag_store.db, top score 0.87]]
    RSDOIEL / <the user's line>
    HARVEY / Forwarding to LLAMA3.
    [[tool: read_file({"path":"harvey.go"}) — ok]]
    LLAMA3 / <the reply>

    INT. SHELL <ts>                            a shell command, its output, its exit code
    EXT. MISTRAL AND RSDOIEL <ts>              a turn that ran remotely (EXT. = remote)
    THE END.                                   only when the session closed cleanly

Every text from the log goes through :mod:`agenttrail.formats.fountain._escaping`, so nothing in a
reply, a prompt or a tool's output can open a scene, a cue, a note or a boneyard. Tool notes
carry the status only (Harvey's "status-only" principle); pairing anomalies are spelled out in
the status so that reading a file back gives the same call/result pairing.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from agenttrail.errors import InputError
from agenttrail.formats._common import ImportedSession
from agenttrail.formats.fountain._elements import SessionLike
from agenttrail.formats.fountain._reader import read_session
from agenttrail.formats.fountain._scenes import DIALECTS, render_scenes
from agenttrail.formats.fountain._verbatim import is_from_fountain, render_as_read
from agenttrail.model import Event
from agenttrail.model.parts import whole_messages

__all__ = ["DIALECTS", "NAME", "fountain_from_events", "read", "sniff"]

NAME = "fountain"

SUFFIXES = (".spmd", ".fountain")
"""File name endings of Fountain session files (Harvey writes ``.spmd``)."""


def fountain_from_events(
    session: SessionLike, items: Sequence[Event], *, dialect: str = "agenttrail"
) -> str:
    """Render a session as a Fountain screenplay (Harvey session format v1.2).

    A session read from a Fountain file (ours or Harvey's) renders back as the file was, its
    headings, action lines, routing records and notes as written (blank lines between
    elements aside); any other session gets one scene per turn, recall and shell command.

    Args:
        session: the session row (title, agent, user, workspace, started, metadata).
        items: the session's events in seq order.
        dialect: ``agenttrail``, or ``harvey`` for a session that did not come from Harvey, to
            be continued in Harvey (``--continue``): its chat scenes, cues and routing
            records as Harvey's reader knows them (docs/fountain-format.md).

    Raises:
        InputError: an unknown dialect.

    Returns:
        The whole file as text, ending with a newline.

    Example::

        INT. HARVEY AND RSDOIEL TALKING 2026-06-24 10:02:30

        Harvey and RSDOIEL are in chat mode. Model: LLAMA3. Workspace: <workspace>.

        RSDOIEL
        Does harvey.go compile cleanly?

        HARVEY
        Forwarding to LLAMA3.

        [[tool: read_file({"path":"harvey.go"}) — ok]]
        [[tool: run_shell({"cmd":"go build ./..."}) — error: exit 1]]

        LLAMA3
        There is a compilation error. Line 42 references an undefined variable.
    """
    if dialect not in DIALECTS:
        raise InputError(f"unknown Fountain dialect {dialect!r} (use {', '.join(DIALECTS)})")
    items = whole_messages(items)  # an API message stored in growing parts is one speech
    if is_from_fountain(session) and dialect == "agenttrail":
        return render_as_read(session, items)
    return render_scenes(session, items, dialect=dialect)


# ---------------------------------------------------------------------------------------------
# Reader


def sniff(path: Path, data: bytes) -> bool:
    """True for a Fountain session: a title page, then ``FADE IN:`` or a scene heading."""
    head = data[:65536].lstrip()
    if not head.startswith(b"Title:"):
        return path.suffix.lower() in SUFFIXES and bool(head)
    return b"\nFADE IN:" in head or b"\nINT. " in head or b"\nEXT. " in head


def read(path: Path, data: bytes) -> list[ImportedSession]:
    """Read a Fountain session file (ours or Harvey's, older ones included) into one session.

    Raises:
        FormatError: not UTF-8, no title page, or a note cut off; names the line.
    """
    return [read_session(path, data)]
