"""Reading a Fountain session file back into events (ours, and Harvey's own, old ones too).

The file is cut into blocks (runs of non-blank lines). Each block is one element: a scene
heading, a run of notes, a dialogue (a cue and its lines), an action, or ``THE END.``. The
reader knows the session's people from the title page and the headings, so it reads each
dialogue by who speaks and where, never by Fountain's guesses; every text goes through
:func:`~agenttrail.formats.fountain._escaping.unescape`.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agenttrail.codec import normalize_timestamp
from agenttrail.errors import FormatError, InvalidTimestamp
from agenttrail.formats._common import ImportedSession, decode_text
from agenttrail.formats.fountain._escaping import (
    cue_line,
    dialogue_lines,
    escape_inline,
    is_plain_cue,
    text_from_dialogue,
    unescape,
)
from agenttrail.model import UNDATED, UNDATED_NOTE, Actor, NewEvent, NewSession, events

__all__ = ["FLOATING_TIMES", "TIMES_KEY", "read_session", "role_of_cue"]

FLOATING_TIMES = "floating_times"
"""Session metadata key: true when the session's times are wall-clock times of no stated zone
(a file whose headings say no zone, the seed's example, the sample session that records it);
rendered, their headings and title page carry no zone either."""

TIMES_KEY = "Times"
"""The title page's key that says the session's source gave no times (``UNDATED``), when its
value is ``UNDATED_NOTE``: every scene heading needs a time, and such a session's are those
it was imported at. Written for such a session, and read back as its mark."""

_HEADING = re.compile(
    r"(?P<place>INT|EXT)\. (?P<body>.*?)(?: —)? "
    r"(?P<stamp>\d{4}-\d{2}-\d{2} \d{2}:\d{2}(?::\d{2})?)(?P<zone> UTC)?$"
)
_TITLE_KEY = re.compile(r"([A-Za-z][A-Za-z ]*):(?: (.*))?$")
_PROSE_CALL = re.compile(r"(?P<who>\S+) calls (?P<name>[\w.:-]+): (?P<args>.*)$", re.DOTALL)
_RECALL = re.compile(r"recall: (?P<id>.*) \((?P<source>.*)\)$")
_RAG = re.compile(r"rag: (?P<chunks>\d+) chunks from (?P<store>.*), top score (?P<score>\S+)$")
_TOOL = re.compile(r"(?:(?P<who>[^:]+?)\.)?tool: (?P<call>.*)", re.DOTALL)
_NOTE_KIND = re.compile(r"[\w .-]+")
_CUT = re.compile(r"…\(cut: (\d+) chars, sha256 ([0-9a-f]{64})\)$")
_TITLE_KEYS = ("Title", "Credit", "Author", "Date", "Draft date")


@dataclass
class _Block:
    """Consecutive non-blank lines, with the number of the first (1-based)."""

    line: int
    lines: list[str]


@dataclass
class _Reader:
    """The state of reading one file: who is who, where the current scene runs, the events."""

    path: Path
    user_cue: str
    agent_cue: str | None = None
    agent_name: str | None = None
    workspace: str | None = None
    scene: str = "none"  # "turn" | "recall" | "shell" | "other" | "none"
    stamp: str | None = None
    location: str = "local"
    model: str | None = None
    shell: dict[str, Any] | None = None
    recalled: list[dict[str, Any]] = field(default_factory=list)
    events: list[NewEvent] = field(default_factory=list)
    ended: bool = False
    floating: bool = False

    def add(self, payload: dict[str, Any], line: int) -> None:
        self.events.append(NewEvent(payload, self.stamp, key=f"line{line}:{len(self.events)}"))

    def annotate(self, kind: str, text: str, line: int) -> None:
        self.add({"type": "annotation", "kind": kind, "text": text, "actor": "system"}, line)

    def close_scene(self, line: int) -> None:
        """Write what a scene gathered across blocks: its recall results, its shell command."""
        if self.recalled:
            self.add(events.recall(self.recalled, actor=Actor.SYSTEM.value), line)
            self.recalled = []
        if self.shell is not None:
            self.add(self.shell, line)
            self.shell = None

    # -- elements ---------------------------------------------------------------------------

    def block(self, block: _Block) -> None:
        first = block.lines[0]
        single = len(block.lines) == 1
        heading = _HEADING.match(first) if single else None
        if heading is not None or (single and first.startswith(".") and first[1:2].isalnum()):
            self.close_scene(block.line)
            self.heading(heading, first, block.line)
        elif block.lines == ["THE END."]:
            self.close_scene(block.line)
            self.ended = True
        elif block.lines == ["FADE IN:"]:
            pass
        elif all(line.startswith("[[") and line.endswith("]]") for line in block.lines):
            for offset, line in enumerate(block.lines):
                self.note(line[2:-2], block.line + offset)
        elif (first.startswith("@") or is_plain_cue(first)) and len(block.lines) >= 2:
            self.dialogue(block)
        else:
            self.action("\n".join(block.lines), block.line)

    def heading(self, heading: re.Match[str] | None, first: str, line: int) -> None:
        # Every heading is kept as written: rendering gives it back as it was (its time as
        # written, floating or not), and a scene type we do not know keeps its name.
        self.scene = "other"
        if heading is not None:
            self.stamp = _stamp(heading.group("stamp"))
            self.floating = self.floating or heading.group("zone") is None
        self.annotate("scene", first, line)
        if heading is None:  # a forced heading (".SOMETHING") from another tool
            return
        place, body = heading.group("place"), heading.group("body")
        user = cue_line(self.user_cue)
        if body in ("CONTEXT RECALL", "SHELL"):
            self.scene = "recall" if body == "CONTEXT RECALL" else "shell"
        elif place == "INT" and body.endswith(f" AND {user} TALKING"):
            self.scene, self.location, self.model = "turn", "local", None
            self.agent_cue = unescape(body[: -len(f" AND {user} TALKING")])
        elif place == "EXT" and body.endswith(f" AND {user}"):
            self.scene, self.location = "turn", "remote"
            self.model = unescape(body[: -len(f" AND {user}")])

    def dialogue(self, block: _Block) -> None:
        first = block.lines[0]
        cue = unescape(first[1:]) if first.startswith("@") else first
        body = block.lines[1:]
        parens: dict[str, str] = {}
        others: list[str] = []  # Harvey's own: "(chunk 1/3)", "(synthesis)", …
        while body and body[0].startswith("(") and body[0].endswith(")"):
            if body[0].startswith("(blank: "):
                break  # part of the text (leading empty lines)
            key, found, value = body[0][1:-1].partition(": ")
            if found and key in ("role", "actor"):
                parens[key] = unescape(value)
            else:
                others.append(body[0][1:-1])
            body = body[1:]
        if self.scene == "shell" and self._shell_line(cue, body):
            return
        forwarded = _forwarded_to(body[0]) if len(body) == 1 else None
        if forwarded is not None and cue in (self.agent_cue, "HARVEY"):
            # The routing record: the replies that follow are the forwarded model's.
            self.model = forwarded
            routing = {"type": "annotation", "kind": "routing", "text": body[0]}
            self.add({**routing, "character": cue, "actor": "agent"}, block.line)
            return
        role = parens.get("role") or role_of_cue(cue, self.user_cue)
        text = text_from_dialogue(body, agent=cue == self.agent_cue)
        payload = events.message(
            role,
            text,
            meta=events.meta(model=self.model, location=self.location),
        )
        if role == "user":
            payload["actor"] = parens.get("actor", Actor.USER.value)
        elif "actor" in parens:
            payload["actor"] = parens["actor"]
        if role == "assistant":
            payload["character"] = cue
        if others:
            payload["parentheticals"] = others
        if dialogue_lines(text, agent=cue == self.agent_cue) != body:
            payload["as_written"] = body  # written otherwise than we would: kept as it was
        self.add(payload, block.line)

    def _shell_line(self, cue: str, body: list[str]) -> bool:
        """The user's ``! command`` or the SHELL's output inside a shell scene."""
        if cue == self.user_cue and len(body) == 1 and body[0].startswith("! "):
            command = unescape(body[0][2:])
            self.shell = {"type": "shell", "command": command, "output": "", "exit_code": None}
            self.shell["actor"] = Actor.USER.value
            return True
        if cue == "SHELL" and self.shell is not None:
            self.shell["output"] = text_from_dialogue(body)
            return True
        return False

    def action(self, text: str, line: int) -> None:
        prose = _PROSE_CALL.fullmatch(text)
        if prose is None:
            # the turn's line opens its paragraph: a line may follow it (Harvey's recorder
            # notes a mention the model did not answer there)
            self._scene_action(text.partition("\n")[0])
            self.annotate("action", text, line)  # as written: it renders back as it was
            return
        # Harvey before v1.2 wrote tool calls as prose: "Harvey calls read_file: {…}".
        args = prose.group("args")
        self.add(
            events.tool_call(f"fountain:{line}", prose.group("name"), _json_or_text(args)), line
        )

    def _scene_action(self, text: str) -> bool:
        """Read a turn's action line: ``<Agent> and <USER> are in chat mode. Model: <M>.
        Workspace: <W>.`` or ``<Agent> routing to <M> (cloud API). Workspace: <W>.``"""
        user = escape_inline(self.user_cue)
        chat, routed = f" and {user} are in chat mode.", " routing to "
        for marker in (chat, routed):
            head, found, rest = text.partition(marker)
            if found and head:
                break
        else:
            return False
        if marker == routed:
            # Ours: "routing to M (cloud API)."; Harvey's recorder: "routing to M."
            model, found, rest = rest.partition(" (cloud API).")
            if not found:
                model, found, rest = rest.partition(".")
                if not found or (rest and not rest.startswith(" Workspace: ")):
                    return False
            self.model = self.model or unescape(model)
        elif rest.startswith(" Model: "):
            # The model name is written as it is, dots included ("LLAMA3.2"): it ends at the
            # workspace field, or at the line's last dot.
            rest = rest[len(" Model: ") :]
            end = rest.find(". Workspace: ")
            end = end if end >= 0 else len(rest) - 1
            if not rest.endswith("."):
                return False
            self.model = self.model or unescape(rest[:end])
            rest = rest[end + 1 :]
        self.agent_name = unescape(head)
        self.agent_cue = self.agent_name.upper()  # as the writer derives its cue
        if rest.startswith(" Workspace: ") and rest.endswith("."):
            self.workspace = unescape(rest[len(" Workspace: ") : -1])
        return True

    def note(self, note: str, line: int) -> None:
        # Fields are separated by " — "; split on the last one (our writer escapes every dash
        # inside a field, and Harvey's notes put the status last).
        head, found, tail = note.rpartition(" — ")
        if not found:
            head, tail = note, ""
        recalled = _RECALL.fullmatch(head)
        if recalled and tail.startswith("score "):
            self.recalled.append(
                {
                    "id": unescape(recalled.group("id")),
                    "source": unescape(recalled.group("source")),
                    "score": _number(tail[len("score ") :]),
                }
            )
            return
        rag = _RAG.fullmatch(note)
        tool = _TOOL.fullmatch(head) if found else None
        if rag:
            store, chunks = unescape(rag.group("store")), _whole(rag.group("chunks"))
            if chunks is None:
                raise FormatError(
                    f"a chunk count of {len(rag.group('chunks'))} digits is longer than "
                    f"agenttrail reads ({sys.get_int_max_str_digits()} digits)",
                    path=str(self.path),
                    line=line,
                )
            payload = events.rag(
                store, chunks, _number(rag.group("score")), actor=Actor.SYSTEM.value
            )
            self.add(payload, line)
        elif head.startswith("shell: ") and self.shell is not None and tail.startswith("exit "):
            code = tail[len("exit ") :]
            self.shell["exit_code"] = _whole(code) if re.fullmatch(r"-?\d+", code) else None
        elif tool:
            self.tool_note(tool.group("who"), tool.group("call"), unescape(tail), line)
        elif head.startswith("tool result: ") and found:
            call_id = _json_or_text(unescape(head[len("tool result: ") :]))
            self.add(
                _result(call_id if isinstance(call_id, str) else None, None, unescape(tail)), line
            )
        elif note.startswith("error: "):
            self.add(events.error(unescape(note[len("error: ") :]), actor=Actor.SYSTEM.value), line)
        else:
            # A note we do not know is kept as written (Harvey's own readers parse some of
            # them, "[[model switch: …]]"), and renders back as it was.
            kind, sep, rest = note.partition(": ")
            if sep and _NOTE_KIND.fullmatch(kind):
                self.annotate(kind, unescape(rest), line)
            else:
                bare = {"type": "annotation", "kind": "note", "text": unescape(note)}
                self.add({**bare, "bare": True, "actor": "system"}, line)

    def tool_note(self, who: str | None, call: str, status: str, line: int) -> None:
        """``[[WHO.tool: name(args) — status]]``: a call and, from its status, its result."""
        opening = _first_unescaped(call, "(")
        if opening < 0 or not call.endswith(")"):
            name, args = unescape(call), ""
        else:
            name, args = unescape(call[:opening]), unescape(call[opening + 1 : -1])
        cut = _CUT.search(args)
        extra: dict[str, Any] = {}
        if cut:
            extra["argumentsSha256"] = cut.group(2)
        if who:
            extra["character"] = unescape(who)
        call_id = f"fountain:{line}"
        for prefix in ("ambiguous id ", "several results for id "):
            if status.startswith(prefix):
                named = _json_or_text(status[len(prefix) :])
                call_id = named if isinstance(named, str) else call_id
                status = ""
        if status == "no call id":
            call_id, status = "", ""
        value = args if cut else _json_or_text(args)
        self.add(events.tool_call(call_id, name, value, **extra), line)
        if status and status != "no result":
            self.add(_result(call_id, name, status), line)

    def session(self, title: dict[str, str], title_lines: list[str]) -> NewSession:
        metadata: dict[str, Any] = {"format": "fountain", "source": self.path.name}
        metadata["title_page_lines"] = title_lines
        if title.get("Credit"):
            metadata["credit"] = title["Credit"]
        extra = {k: v for k, v in title.items() if k not in _TITLE_KEYS}
        if extra.get(TIMES_KEY) == UNDATED_NOTE:  # its headings' times are an import's
            metadata[UNDATED] = extra.pop(TIMES_KEY)
        if extra:
            metadata["title_page"] = extra
        if not self.ended:
            metadata["incomplete"] = True
        date = title.get("Date")
        if self.floating or (date and not date.strip().endswith(" UTC")):
            metadata[FLOATING_TIMES] = True
        return NewSession(
            title=title.get("Title"),
            agent=self.agent_name or self.agent_cue,
            user=self.user_cue,
            workspace=self.workspace,
            started=_stamp(date) if date else None,
            metadata=metadata,
        )


def read_session(path: Path, data: bytes) -> ImportedSession:
    """Read one Fountain session file into a session and its events.

    Raises:
        FormatError: not UTF-8, no title page, or a note cut off; names the line.
    """
    text = decode_text(path, data)
    lines = [line.removesuffix("\r") for line in text.split("\n")]
    title, body_start = _title_page(path, lines)
    title_lines = [line for line in lines[:body_start] if line != ""]
    reader = _Reader(path, user_cue=(title.get("Author") or "USER").strip())
    for block in _blocks(path, lines, body_start):
        reader.block(block)
    reader.close_scene(len(lines))
    warnings = []
    if reader.ended:
        reader.add({"type": "session_end", "reason": "closed", "actor": "system"}, len(lines))
    else:
        warnings.append(f"{path}: no THE END.: the session did not close cleanly (incomplete)")
    return ImportedSession(reader.session(title, title_lines), reader.events, warnings)


def _title_page(path: Path, lines: list[str]) -> tuple[dict[str, str], int]:
    """The title page's ``Key: value`` pairs and the index of the first body line."""
    title: dict[str, str] = {}
    key: str | None = None
    for index, text in enumerate(lines):
        if text == "":
            if title:
                return title, index
            continue
        match = _TITLE_KEY.match(text)
        if match and not text.startswith((" ", "\t")):
            key = match.group(1)
            title[key] = unescape(match.group(2) or "")
        elif key is not None and text.startswith((" ", "\t")):
            title[key] = (title[key] + "\n" + unescape(text.strip())).strip("\n")
        else:
            raise FormatError(
                "not a Fountain session: no title page (Title: …)", path=str(path), line=index + 1
            )
    raise FormatError(
        "not a Fountain session: nothing after the title page", path=str(path), line=len(lines)
    )


def _blocks(path: Path, lines: list[str], start: int) -> list[_Block]:
    blocks: list[_Block] = []
    current: _Block | None = None
    for index in range(start, len(lines)):
        text = lines[index]
        if text == "":
            current = None
            continue
        if _unescaped_count(text, "[[") != _unescaped_count(text, "]]"):
            raise FormatError(
                "note opened with [[ is not closed with ]] on the same line (truncated?)",
                path=str(path),
                line=index + 1,
            )
        if current is None:
            current = _Block(index + 1, [])
            blocks.append(current)
        current.lines.append(text)
    return blocks


def _unescaped_count(text: str, pair: str) -> int:
    count, i = 0, 0
    while i < len(text) - 1:
        if text[i] == "\\":
            i += 2
        elif text.startswith(pair, i):
            count, i = count + 1, i + 2
        else:
            i += 1
    return count


def _first_unescaped(text: str, char: str) -> int:
    i = 0
    while i < len(text):
        if text[i] == "\\":
            i += 2
        elif text[i] == char:
            return i
        else:
            i += 1
    return -1


def _forwarded_to(line: str) -> str | None:
    if line.startswith("Forwarding to ") and line.endswith("."):
        return unescape(line[len("Forwarding to ") : -1])
    return None


def role_of_cue(cue: str, user_cue: str) -> str:
    """The role a dialogue has from its cue alone (the writer adds ``(role: …)`` otherwise)."""
    if cue == user_cue:
        return "user"
    if cue in ("SYSTEM", "TOOL"):
        return cue.lower()
    return "assistant"


def _stamp(text: str) -> str | None:
    try:
        return normalize_timestamp(text.strip().removesuffix(" UTC"))
    except InvalidTimestamp:
        return None


def _whole(text: str) -> int | None:
    """``int(text)``, or ``None`` past ``sys.get_int_max_str_digits()`` digits."""
    try:
        return int(text)
    except ValueError:
        return None


def _number(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


def _json_or_text(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return text


def _result(call_id: str | None, name: str | None, status: str) -> dict[str, Any]:
    """A tool result carrying just what a note says: ``ok`` or ``error: <first line>``."""
    if status == "ok":
        return events.tool_result(call_id, name)
    if status == "error":
        return events.tool_result(call_id, name, is_error=True)
    if status.startswith("error: "):
        return events.tool_result(call_id, name, error=status.removeprefix("error: "))
    return events.tool_result(call_id, name, status=status)
