"""Markdown and HTML transcripts (agenttrail.views.document, ``agenttrail export --format
md|html``): a real session reads as its transcript, and hostile content from the log never
reaches the HTML as HTML, checked by an independent HTML parser and by Chromium itself."""

from __future__ import annotations

import json
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from agenttrail.log.store import LogStore
from agenttrail.model import NewEvent, NewSession, events
from tests.conftest import CHROMIUM, REALDATA, run_cli

# marot/spotter test/fixtures/transcripts/tool_heavy.jsonl (the real data's SOURCES.md)
TOOL_HEAVY = REALDATA / "claude-code-spotter" / "tool_heavy.jsonl"

HOSTILE_TITLE = "<script>alert('title')</script>"
HOSTILE_REPLY = """Here is **bold** and a [safe link](https://example.com/docs).

<script>alert('reply')</script>
<img src=x onerror="alert('img')">
<a href="javascript:alert('anchor')">raw anchor</a>
[md link](javascript:alert('md'))
[data link](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)
![tracker](http://tracker.example/pixel.png)

```
an unclosed fence that must not swallow the rest"""
HOSTILE_OUTPUT = "</code></pre><script>alert('output')</script>"

ALLOWED_TAGS = {
    *("html", "head", "meta", "title", "style", "body", "h1", "dl", "dt", "dd", "section"),
    *("h3", "p", "pre", "code", "strong", "em", "a", "ul", "ol", "li", "blockquote", "br"),
    *("hr", "h1", "h2", "h4", "h5", "h6"),
}


class _Tags(HTMLParser):
    """Every start tag and its attributes, as a browser's tokenizer would see them."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def _hostile_session(store: LogStore) -> str:
    store.create_session(NewSession("hostile", HOSTILE_TITLE, "<b>agent</b>"))
    store.append_batch(
        "hostile",
        [
            NewEvent(events.message("user", "<i>hi</i> & [x](javascript:alert(1))")),
            NewEvent(events.message("assistant", HOSTILE_REPLY)),
            NewEvent(events.tool_call("t1", "<script>", {"q": "<script>alert(1)</script>"})),
            NewEvent(events.tool_result("t1", output=HOSTILE_OUTPUT)),
            NewEvent(events.message("assistant", "after the fence")),
        ],
    )
    return "hostile"


@pytest.fixture
def exported(db_path: Path, tmp_path: Path) -> Iterator[tuple[str, str]]:
    from agenttrail.log.store import open_store

    with open_store(str(db_path), create=True) as store:
        _hostile_session(store)
    page, text = tmp_path / "hostile.html", tmp_path / "hostile.md"
    for fmt, path in (("html", page), ("md", text)):
        result = run_cli(
            "export", "hostile", "--format", fmt, "-o", str(path), "--db", str(db_path)
        )
        assert result.returncode == 0, result.stderr
    yield page.read_text(encoding="utf-8"), text.read_text(encoding="utf-8")


def test_no_html_from_the_log_reaches_the_page_as_html(exported: tuple[str, str]) -> None:
    page, _ = exported
    parser = _Tags()
    parser.feed(page)
    names = {tag for tag, _ in parser.tags}
    assert names <= ALLOWED_TAGS, names - ALLOWED_TAGS
    for tag, attrs in parser.tags:
        assert not any(name.startswith("on") for name in attrs), (tag, attrs)
        if tag == "a":  # the safe links given; an image is a link, never fetched
            assert attrs["href"] in ("https://example.com/docs", "http://tracker.example/pixel.png")
    # the hostile text is there, as text
    assert "&lt;script&gt;alert('reply')&lt;/script&gt;" in page
    assert "&lt;/code&gt;&lt;/pre&gt;&lt;script&gt;" in page
    assert "<strong>bold</strong>" in page  # Markdown in replies is rendered
    # the unclosed fence ends with its message: the next message is a paragraph of its own
    assert "<p>after the fence</p>" in page


@pytest.mark.skipif(CHROMIUM is None, reason="no Chromium")
def test_chromium_runs_nothing_and_fetches_nothing(
    exported: tuple[str, str], tmp_path: Path
) -> None:
    page_text, _ = exported
    path = tmp_path / "page.html"
    path.write_text(page_text, encoding="utf-8")
    assert CHROMIUM is not None
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=CHROMIUM, args=["--headless", "--no-sandbox"]
        )
        try:
            page = browser.new_page()
            dialogs: list[str] = []
            requests: list[str] = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.on("request", lambda r: requests.append(r.url))
            page.goto(path.as_uri())
            page.wait_for_load_state("networkidle")
            assert dialogs == []
            assert page.locator("script").count() == 0
            assert [r for r in requests if not r.startswith("file:")] == []
            assert page.locator("h1").inner_text() == HOSTILE_TITLE
        finally:
            browser.close()


def test_markdown_keeps_structure_whatever_the_content(exported: tuple[str, str]) -> None:
    _, text = exported
    assert text.startswith("# \\<script\\>alert('title')\\</script\\>\n")  # literal, escaped
    headings = [line for line in text.splitlines() if line.startswith("### ")]
    assert headings == [
        "### 1 · user · user",
        "### 2 · agent · assistant",
        "### 3→4 · agent · tool \\<script\\> — ok",
        "### 5 · agent · assistant",
    ]
    assert f"```\n{HOSTILE_OUTPUT}\n```" in text
    # the reply's unclosed fence is closed at its end: a CommonMark parser reads the next
    # entries as headings, not as code
    from markdown_it import MarkdownIt

    rendered = MarkdownIt("commonmark").render(text)
    assert "<h3>5 · agent · assistant</h3>" in rendered


def test_a_real_session_exports_every_tool_call_with_its_result(db_path: Path) -> None:
    db = str(db_path)
    assert run_cli("import", str(TOOL_HEAVY), "--db", db).returncode == 0
    sid = json.loads(run_cli("sessions", "--json", "--db", db).stdout)["id"]
    text = run_cli("export", sid, "--format", "md", "--db", db).stdout
    # tool_heavy.jsonl's six tool_use blocks by name, in file order (jq '.message.content[]? |
    # select(.type=="tool_use") | .name'), each answered by a tool_result (the seqs are the
    # pairs tests/server/test_viewer.py reads in the viewer)
    tool_rows = [
        line for line in text.splitlines() if line.startswith("### ") and " · tool " in line
    ]
    assert [row.split(" · ")[0].removeprefix("### ") for row in tool_rows] == [
        "6→12",
        "14→18",
        "29→33",
        "30→32",
        "35→38",
        "36→39",
    ]
    assert [row.split(" · tool ")[1] for row in tool_rows] == [
        "Bash — ok",
        "Bash — ok",
        "WebSearch — ok",
        "Glob — ok",
        "Read — ok",
        "WebFetch — ok",
    ]
    assert "start phoenix in background" in text
    page = run_cli("export", sid, "--format", "html", "--db", db).stdout
    assert page.startswith("<!doctype html>") and "start phoenix in background" in page
    bad = run_cli("export", sid, "--format", "pdf", "--db", db)
    assert (bad.returncode, bad.stderr.strip()) == (
        2,
        "error: unknown export format 'pdf' (use jsonl, otlp, md, html)",
    )


def test_a_tool_call_names_the_character_that_made_it(db_path: Path) -> None:
    # rec-tools.spmd (SOURCES.md, harvey/): `[[tool: read_file(…) — ok]]`, then
    # `[[MISTRAL.tool: read_file(…) — ok]]`, the second made by the MISTRAL character; the
    # terminal's transcript names it MISTRAL.read_file, and so do the exports now
    db = str(db_path)
    done = run_cli("import", str(REALDATA / "harvey" / "rec-tools.spmd"), "--db", db)
    assert done.returncode == 0, done.stderr
    sid = done.stdout.split()[0]
    text = run_cli("export", sid, "--format", "md", "--db", db).stdout
    called = [line.split(" · tool ")[1] for line in text.splitlines() if " · tool " in line]
    assert [name.split(" — ")[0] for name in called] == [
        "read\\_file",
        "run\\_command",
        "list\\_files",
        "MISTRAL.read\\_file",
    ]
    shown = run_cli("show", sid, "--db", db, env={"COLUMNS": "160"}).stdout
    assert "MISTRAL.read_file(" in shown


def test_context_events_an_erasure_and_the_end_read_as_the_transcript_shows_them(
    db_path: Path, tmp_path: Path
) -> None:
    db = str(db_path)
    assert run_cli("quickstart", "--db", db, env={"HOME": str(tmp_path)}).returncode == 0
    erased = run_cli("erase", "sample", "2", "--reason", "asked to", "--by", "ops", "--db", db)
    assert erased.returncode == 0, erased.stderr
    md = run_cli("export", "sample", "--format", "md", "--db", db).stdout
    # they were written as raw JSON (`{"store":"rag_store.db","chunks":3,…}`); the sample's
    # values (agenttrail.ingest.sample) are read here by hand
    assert "### 4 · system · rag: 3 chunks from rag\\_store.db, top score 0.87" in md
    assert "### 1 · system · recall: 2 memories recalled" in md
    assert "\n\nworkspace\\_profile\\_250928 (workspace\\_profile) — score 1.0\n\n" in md
    assert "### 13 · user · shell: $ go build ./... — exit 1\n\n```\n./harvey.go:42:5" in md
    assert "### 19 · system · erasure: erased seq 2 by ops: asked to" in md
    assert "### 18 · system · session closed" in md  # `show`'s words, not its JSON
    for raw in ('"chunks"', '"results"', '"command"', '"seqs"', '"reason"'):
        assert raw not in md
    page = run_cli("export", "sample", "--format", "html", "--db", db).stdout
    assert "<h3>4 · system · rag: 3 chunks from rag_store.db, top score 0.87</h3>" in page
    assert "<h3>19 · system · erasure: erased seq 2 by ops: asked to</h3>" in page
    assert "<h3>18 · system · session closed</h3>" in page
    assert '"chunks"' not in page and "&quot;chunks&quot;" not in page
    from agenttrail.log.store import open_store
    from agenttrail.views.transcript import IndexCache

    with open_store(db) as store:
        rows = IndexCache().page(store, "sample-harvey-session", after_seq=0, limit=50).rows
    [erasure] = [r for r in rows if r["seq"] == 19]
    # the viewer showed it as an unknown event, its JSON the text
    assert (erasure["view"], erasure["kind"], erasure["actor"]) == ("note", "erasure", "system")
    assert erasure["text"] == "erased seq 2 by ops: asked to"


TAG_LIKE_REPLY = """Run: go mod init <module-path>, then `go build <pkg>`.
<system-reminder>keep going</system-reminder>
See <https://example.test/docs> and [the guide](<https://example.test/a guide>).
An escaped \\<b> stays as written.

```
<tag> in a fence is code
```

    <tag> indented as code"""


def test_markdown_shows_tag_like_text_as_written(db_path: Path) -> None:
    """Text that looks like an HTML tag is what the message said: a CommonMark renderer
    (markdown-it-py in CommonMark mode, raw HTML on, as GitHub and most viewers take it)
    shows it, where before it took it for a tag and hid it; code, autolinks and links
    are left as they were."""
    from markdown_it import MarkdownIt

    from agenttrail.log.store import open_store

    with open_store(str(db_path), create=True) as store:
        store.create_session(NewSession("tags", "tags"))
        store.append("tags", events.message("assistant", TAG_LIKE_REPLY))
    text = run_cli("export", "tags", "--format", "md", "--db", str(db_path)).stdout
    rendered = MarkdownIt("commonmark", {"html": True}).render(text)
    assert "go mod init &lt;module-path&gt;, then <code>go build &lt;pkg&gt;</code>." in rendered
    assert "&lt;system-reminder&gt;keep going&lt;/system-reminder&gt;" in rendered
    assert '<a href="https://example.test/docs">https://example.test/docs</a>' in rendered
    assert '<a href="https://example.test/a%20guide">the guide</a>' in rendered
    assert "An escaped &lt;b&gt; stays as written." in rendered
    assert "<pre><code>&lt;tag&gt; in a fence is code\n</code></pre>" in rendered
    assert "<pre><code>&lt;tag&gt; indented as code\n</code></pre>" in rendered
    assert "<module-path>" not in rendered and "<system-reminder>" not in rendered


def test_lone_surrogates_are_written_as_their_escapes_in_valid_utf8(tmp_path: Path) -> None:
    # the log keeps lone surrogates (docs/log-format.md): writing one to a file was a
    # traceback, and to standard output a byte that is not UTF-8
    from agenttrail.log.store import open_store

    db = str(tmp_path / "log.db")
    with open_store(db, create=True) as store:
        said = [events.message("user", "hi \udc81"), events.tool_call("c1", "t\ud800", {})]
        store.append_batch("s", [NewEvent(p) for p in said], create=NewSession("s"))
    for suffix in ("md", "html"):
        written = tmp_path / f"s.{suffix}"
        done = run_cli("export", "s", "-o", str(written), "--db", db)
        assert done.returncode == 0, done.stderr
        text = written.read_bytes().decode("utf-8")  # valid UTF-8, or this raises
        assert "hi \\udc81" in text and "t\\ud800" in text
