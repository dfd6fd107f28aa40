"""A session as a document a person reads or shares: a Markdown or a self-contained HTML
transcript (``agenttrail export SESSION --format md|html``).

The document follows the terminal transcript's reading (:mod:`agenttrail.views.terminal`):
messages read whole (:func:`agenttrail.model.parts.whole_messages`) and in the provider's
block order (:func:`agenttrail.views.order.reading_order`), each tool call with its result
(:func:`agenttrail.views.pairing.pair_tool_calls`), attachments named, never as base64.
Each entry is built once as parts (Markdown from the log, plain text, code), then written
in either format.

HTML safety: nothing from the log reaches the HTML as HTML. Replies and user messages are
Markdown, rendered by markdown-it-py (CommonMark) with raw HTML off, so ``<script>`` is shown
as text, and with its link check, which drops ``javascript:``, ``vbscript:``, ``file:`` and
non-image ``data:`` links; each message is rendered on its own, so an unclosed code fence
cannot swallow what follows; images are not rendered (an image would be an external asset).
Everything else is escaped text. The page carries its style inline and a
Content-Security-Policy that allows no script and no fetch.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from agenttrail.codec import escaped_surrogates, json_line
from agenttrail.model import (
    UNDATED_NOTE,
    Event,
    Session,
    call_name,
    context_text,
    end_text,
    payload_attachments,
    prose_text,
    text_of,
    tool_status,
    usage_of,
)
from agenttrail.model.parts import whole_messages
from agenttrail.views.order import reading_order
from agenttrail.views.pairing import ANOMALY_TEXT, erased_lines, pair_tool_calls
from agenttrail.views.terminal_text import ANNOTATION_CHARS
from agenttrail.views.units import counted, size_text
from agenttrail.views.usage import Totals, usage_totals_of

if TYPE_CHECKING:
    from markdown_it import MarkdownIt

__all__ = ["DOCUMENT_FORMATS", "document_from_events"]

DOCUMENT_FORMATS = ("md", "html")
"""The formats :func:`document_from_events` writes."""

PartKind = Literal["markdown", "text", "code"]


@dataclass
class _Entry:
    """One row of the transcript: a heading and its parts."""

    seq: str
    actor: str
    title: str
    parts: list[tuple[PartKind, str]] = field(default_factory=list)


def document_from_events(session: Session, events: Iterable[Event], format: str) -> str:
    """The transcript of a session as a Markdown (``md``) or HTML (``html``) document.

    Args:
        session: the session row (title, agent, user, workspace, started, head).
        events: its events in seq order.
        format: ``md`` or ``html`` (:data:`DOCUMENT_FORMATS`).

    A lone surrogate (the log keeps them, docs/log-format.md) is written as its escape
    ``\\udc81``, as ``show`` shows it: the document is UTF-8 text.

    Raises:
        ValueError: another format.
    """
    shown = whole_messages(events)
    facts = _facts(session, shown)
    entries = _entries(shown)
    if format == "md":
        return escaped_surrogates(_markdown(session, facts, entries))
    if format == "html":
        return escaped_surrogates(_html(session, facts, entries))
    raise ValueError(f"unknown document format {format!r} (use md or html)")


def _facts(session: Session, events: list[Event]) -> list[tuple[str, str]]:
    facts = [("session", session.id)]
    for label, value in (
        ("agent", session.agent),
        ("user", session.user),
        ("workspace", session.workspace),
        ("started", session.started),
    ):
        if value:
            facts.append((label, value))
    if not session.dated:
        facts.append(("times", UNDATED_NOTE))
    usage = usage_totals_of(events)
    if usage.calls:
        facts.append(("usage", f"{counted(usage.calls, 'model call')} · {usage.tokens_text()}"))
        facts.append(("cost", usage.cost_line()))
    facts.append(("head", f"seq {session.head_seq}, hash {session.head_hash.hex()}"))
    return facts


def _entries(events: list[Event]) -> list[_Entry]:
    pairing = pair_tool_calls(events)
    entries: list[_Entry] = []
    for item in reading_order(events):
        event = item.event
        if event.seq in pairing.call_of:  # a result, or an erased one kept paired
            continue  # written under its call
        payload = event.payload
        if event.type == "message":
            content: Any = payload.get("content")
            if item.run is not None:
                content = text_of(item.run.blocks) or ""
            entry = _message(event, payload, content, first=item.first)
        elif event.type == "tool_call":
            entry = _tool_call(event, payload, pairing.result_of.get(event.seq))
            result = pairing.result_of.get(event.seq)
            if result is not None and result.erased:  # kept by its erasure: said so
                note = pairing.erased.get(result.seq, f"erased seq {result.seq}")
                entry.title = f"tool {call_name(payload)} — {note}"
                entry.parts = entry.parts[:1]  # the arguments; the output is gone
        elif event.type == "tool_result":
            entry = _Entry(str(event.seq), event.actor, f"tool result — {tool_status(payload)}")
            entry.parts += _output(payload)
        elif event.type == "annotation":
            entry = _Entry(str(event.seq), event.actor, str(payload.get("kind", "note")))
            text = payload.get("text")
            if not isinstance(text, str):  # runtime data: its start, as the terminal shows it
                text = json_line(payload.get("data"))
                text = text if len(text) <= ANNOTATION_CHARS else text[:ANNOTATION_CHARS] + "…"
            entry.parts.append(("text", text))
        elif event.erased:  # who erased it and why; an erased call's result, kept paired
            result = pairing.result_of.get(event.seq)
            seq = str(event.seq) if result is None else f"{event.seq}→{result.seq}"
            first, *rest = erased_lines(event, pairing)
            entry = _Entry(seq, event.actor, first)
            entry.parts += [("text", line) for line in rest]
        elif event.type == "session_end":  # said as the transcript says it
            entry = _Entry(str(event.seq), event.actor, end_text(payload))
        elif (said := context_text(payload)) is not None:  # rag, recall, shell, erasure
            headline, body_text = said
            entry = _Entry(str(event.seq), event.actor, f"{event.type}: {headline}")
            if event.type == "shell":
                entry.parts += [("code", body_text)] if body_text else []
            else:  # a recall's results, a paragraph each
                entry.parts += [("text", line) for line in body_text.splitlines()]
        else:
            body = {k: v for k, v in payload.items() if k != "type"}
            entry = _Entry(str(event.seq), event.actor, event.type or "(untyped)")
            entry.parts.append(("code", json_line(body)))
        anomaly = pairing.anomalies.get(event.seq)
        if anomaly is not None:
            entry.parts.append(("text", f"⚠ {ANOMALY_TEXT[anomaly.kind]}"))
        entries.append(entry)
    return entries


def _message(event: Event, payload: dict[str, Any], content: Any, *, first: bool) -> _Entry:
    role = str(payload.get("role", "?"))
    meta = payload.get("meta")
    model = meta.get("model") if isinstance(meta, dict) else None
    title = f"{role} ({model})" if isinstance(model, str) and model and first else role
    entry = _Entry(str(event.seq) if first else f"{event.seq} (cont.)", event.actor, title)
    text = prose_text(content).strip()
    if text:
        entry.parts.append(("markdown", text))
    blocks = payload.get("blocks")
    if isinstance(blocks, list) and first:
        kinds = {str(b.get("type")) for b in blocks if isinstance(b, dict)} - {"text"}
        kinds -= {a.kind for a in payload_attachments(payload)}
        if kinds:
            entry.parts.append(("text", f"[{', '.join(sorted(kinds))} blocks kept in the log]"))
    if first:
        entry.parts += [
            ("text", f"[attachment: {a.label(size_text)}]") for a in payload_attachments(payload)
        ]
        tokens = usage_of(meta)
        if tokens is not None:
            entry.parts.append(("text", f"tokens: {Totals(1, tokens).tokens_text()}"))
    return entry


def _tool_call(event: Event, payload: dict[str, Any], result: Event | None) -> _Entry:
    seq = str(event.seq) if result is None else f"{event.seq}→{result.seq}"
    status = "" if result is None else f" — {tool_status(result.payload)}"
    entry = _Entry(seq, event.actor, f"tool {call_name(payload)}{status}")
    arguments = payload.get("input")
    entry.parts.append(("code", arguments if isinstance(arguments, str) else json_line(arguments)))
    if result is not None:
        entry.parts += _output(result.payload)
    return entry


def _output(result: dict[str, Any]) -> list[tuple[PartKind, str]]:
    parts: list[tuple[PartKind, str]] = []
    output = prose_text(result.get("output"))
    if not output and result.get("error") is not None:
        error = result["error"]
        output = error if isinstance(error, str) else json_line(error)
    if output:
        parts.append(("code", output))
    parts += [("text", f"[attachment: {a.label(size_text)}]") for a in payload_attachments(result)]
    return parts


# -- Markdown ---------------------------------------------------------------------------------

_MARKUP = re.compile(r"([\\`*_\[\]<>#!|~&])")


def _inline(text: str) -> str:
    """Text from the log as literal Markdown inline text: every character that could start
    markup (emphasis, code, links, HTML, entities, headings, tables) backslash-escaped
    (CommonMark 0.31, Backslash escapes), line breaks as spaces."""
    return _MARKUP.sub(r"\\\1", " ".join(text.split()))


def _fenced(text: str) -> str:
    """A fenced code block that no run of backticks in ``text`` can close (CommonMark, Fenced
    code blocks: the closing fence is at least as long as the opening one)."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})")

_TICKS = re.compile(r"`+")

_TAG = re.compile(r"(?<!\\)(?<!\]\()<(?=[A-Za-z/!?])(?![A-Za-z][A-Za-z0-9+.\-]{1,31}:)")
"""A ``<`` that would open raw HTML in CommonMark (Raw HTML, HTML blocks: a tag, a closing
tag, a comment, a declaration, a processing instruction): before a letter, ``/``, ``!`` or
``?``; not one already escaped, a link's ``](<`` destination, or an autolink's
(``<https://…>``, which stays a link)."""


def _as_written(markdown: str) -> str:
    """A message's Markdown, to be read as it was written wherever the document goes:

    - a code fence it leaves open is closed at its end, so that it cannot swallow the
      entries after it (CommonMark, Fenced code blocks: a fence closes with the same
      character, at least as many of them, and nothing after but spaces);
    - a ``<`` that would open raw HTML outside code (:data:`_TAG`) is backslash-escaped, so
      that ``<module-path>`` or ``<system-reminder>`` is shown, not taken for a tag and
      hidden (CommonMark, Backslash escapes). Code is left as it is: fenced blocks, lines
      indented as code, code spans.
    """
    open_fence: str | None = None
    out: list[str] = []
    for line in markdown.splitlines(keepends=True):
        found = _FENCE.match(line)
        fence, rest = (found.group(1), line[found.end() :]) if found else ("", line)
        if open_fence is not None:  # in a fenced block: as written, until its fence
            if fence[:1] == open_fence[0] and len(fence) >= len(open_fence) and not rest.strip():
                open_fence = None
            out.append(line)
        elif fence and not (fence[0] == "`" and "`" in rest):
            open_fence = fence  # (a backtick info string may not hold backticks: no fence)
            out.append(line)
        elif line.startswith(("    ", "\t")):  # as code, or a list item's: either way kept
            out.append(line)
        else:
            out.append(_tags_escaped(line))
    text = "".join(out)
    return text if open_fence is None else f"{text}\n{open_fence}"


def _tags_escaped(line: str) -> str:
    """``line`` with each :data:`_TAG` ``<`` escaped outside its code spans (CommonMark, Code
    spans: a run of backticks opens one that the next run of the same length closes; one
    that nothing closes is literal text)."""
    runs = list(_TICKS.finditer(line))
    pieces: list[str] = []
    at = i = 0
    while i < len(runs):
        opening = runs[i]
        width = len(opening.group())
        close = next((j for j in range(i + 1, len(runs)) if len(runs[j].group()) == width), None)
        if close is None:
            i += 1
            continue
        pieces += [
            _TAG.sub(r"\\<", line[at : opening.start()]),
            line[opening.start() : runs[close].end()],
        ]
        at, i = runs[close].end(), close + 1
    pieces.append(_TAG.sub(r"\\<", line[at:]))
    return "".join(pieces)


def _markdown(session: Session, facts: list[tuple[str, str]], entries: list[_Entry]) -> str:
    lines = [f"# {_inline(session.title or '(untitled session)')}", ""]
    lines += [f"- **{label}**: {_inline(value)}" for label, value in facts]
    for entry in entries:
        lines += ["", f"### {_inline(f'{entry.seq} · {entry.actor} · {entry.title}')}"]
        for kind, text in entry.parts:
            body = (
                _as_written(text)
                if kind == "markdown"
                else _fenced(text)
                if kind == "code"
                else _inline(text)
            )
            lines += ["", body]
    return "\n".join(lines) + "\n"


# -- HTML -------------------------------------------------------------------------------------

_STYLE = """
body { font: 15px/1.5 system-ui, sans-serif; max-width: 60rem; margin: 2rem auto;
  padding: 0 1rem; color: #1d2125; }
h1 { font-size: 1.5rem; margin-bottom: 0.5rem; }
dl.facts { display: grid; grid-template-columns: max-content 1fr; gap: 0.1rem 1rem;
  color: #4a5560; }
dl.facts dt { font-weight: 600; } dl.facts dd { margin: 0; overflow-wrap: anywhere; }
section { border-top: 1px solid #d8dde2; padding: 0.5rem 0; }
section h3 { font-size: 0.9rem; color: #4a5560; margin: 0.25rem 0; font-weight: 600; }
section.actor-user h3 { color: #0b6b8a; } section.actor-agent h3 { color: #2f7d32; }
pre { background: #f4f6f8; padding: 0.5rem; white-space: pre-wrap; overflow-wrap: anywhere; }
p.note { color: #6b7580; font-size: 0.9rem; }
"""

_CSP = "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'"
"""No script, no fetch, no image from anywhere: the page needs nothing but its inline style."""


def _renderer() -> MarkdownIt:
    """CommonMark with raw HTML off (markdown-it-py's ``html`` option) and images off."""
    from markdown_it import MarkdownIt  # loaded for an HTML export only: CLI start-up is kept short

    md = MarkdownIt("commonmark", {"html": False})
    md.disable("image")
    return md


def _html(session: Session, facts: list[tuple[str, str]], entries: list[_Entry]) -> str:
    md = _renderer()
    esc = html.escape
    title = esc(session.title or "(untitled session)")
    out = [
        "<!doctype html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{_CSP}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{title}</title><style>{_STYLE}</style></head><body>",
        f"<h1>{title}</h1>",
        '<dl class="facts">',
        *(f"<dt>{esc(label)}</dt><dd>{esc(value)}</dd>" for label, value in facts),
        "</dl>",
    ]
    for entry in entries:
        actor = re.sub(r"[^a-z]", "", entry.actor.lower())
        out.append(f'<section class="actor-{actor}">')
        out.append(f"<h3>{esc(f'{entry.seq} · {entry.actor} · {entry.title}')}</h3>")
        for kind, text in entry.parts:
            if kind == "markdown":
                out.append(md.render(text))
            elif kind == "code":
                out.append(f"<pre><code>{esc(text)}</code></pre>")
            else:
                out.append(f'<p class="note">{esc(text)}</p>')
        out.append("</section>")
    out.append("</body></html>")
    return "\n".join(out) + "\n"
