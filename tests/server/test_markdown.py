"""Markdown in the viewer (``static/markdown.js``) in real Chromium: what the parser builds,
node by node, for the Markdown replies carry, and for hostile text, which must stay text.

Expected shapes are written by hand from CommonMark 0.31 / GitHub Flavored Markdown (the
sections cited per case) and the viewer's own rules (docs/viewer.md, Markdown): a shape is
``[tag, {attributes}?, *children]`` with text nodes as strings.
"""

from __future__ import annotations

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agenttrail.model import events
from tests.server.conftest import Viewer, _new_session, _row, _shot

SHAPES = """async (cases) => {
  const { markdown } = await import("/static/markdown.js");
  const shape = (n) => {
    if (n.nodeType === Node.TEXT_NODE) return n.data;
    const attrs = Object.fromEntries([...n.attributes].map((a) => [a.name, a.value]));
    const kids = [...n.childNodes].map(shape);
    return Object.keys(attrs).length ? [n.localName, attrs, ...kids] : [n.localName, ...kids];
  };
  return cases.map((text) => [...markdown(text).childNodes].map(shape));
}"""

LINK = {"target": "_blank", "rel": "noopener noreferrer"}

CASES: list[tuple[str, str, list[Any]]] = [
    # ATX headings (4.2) sit under the page's h2: level 1 is an h3
    (
        "heading",
        "# Title\n## Sub #",
        [["h3", {"class": "md-h md-h1"}, "Title"], ["h4", {"class": "md-h md-h2"}, "Sub"]],
    ),
    ("setext heading", "Title\n===", [["h3", {"class": "md-h md-h1"}, "Title"]]),
    # a single newline is a line break in a reply; a blank line ends the paragraph
    ("paragraphs", "one\ntwo\n\nthree", [["p", "one", ["br"], "two"], ["p", "three"]]),
    (
        "emphasis",
        "**a *b* c** and _d_ and ~~e~~",
        [["p", ["strong", "a ", ["em", "b"], " c"], " and ", ["em", "d"], " and ", ["del", "e"]]],
    ),
    # 6.2: "_" inside a word is not emphasis
    ("snake_case", "call snake_case_name now", [["p", "call snake_case_name now"]]),
    ("unmatched stars", "2 * 3 * 4 **", [["p", "2 * 3 * 4 **"]]),
    ("escapes", r"\*not em\* and \`x\`", [["p", "*not em* and `x`"]]),
    # 6.1: a code span's backticks hold anything, Markdown included
    ("code span", "run `a **b** <i>` now", [["p", "run ", ["code", "a **b** <i>"], " now"]]),
    ("double backtick span", "``a ` b``", [["p", ["code", "a ` b"]]]),
    # 4.5: a longer fence holds a shorter one; the info string names the language
    (
        "nested fences",
        "````md\n```js\nalert(1)\n```\n````\nafter",
        [
            [
                "pre",
                {"class": "md-code"},
                ["code", {"class": "language-md", "data-lang": "md"}, "```js\nalert(1)\n```"],
            ],
            ["p", "after"],
        ],
    ),
    ("tilde fence", "~~~\n<b>x</b>\n~~~", [["pre", {"class": "md-code"}, ["code", "<b>x</b>"]]]),
    (
        "unclosed fence",
        "```py\nprint(1)\n\nprint(2)",
        [
            [
                "pre",
                {"class": "md-code"},
                ["code", {"class": "language-py", "data-lang": "py"}, "print(1)\n\nprint(2)"],
            ]
        ],
    ),
    # GFM 4.10 tables, with column alignment
    (
        "table",
        "| a | b | c |\n|:--|:-:|--:|\n| 1 | **2** | 3 |\n| x |",
        [
            [
                "div",
                {"class": "md-table"},
                [
                    "table",
                    [
                        "thead",
                        [
                            "tr",
                            ["th", {"class": "md-left"}, "a"],
                            ["th", {"class": "md-center"}, "b"],
                            ["th", {"class": "md-right"}, "c"],
                        ],
                    ],
                    [
                        "tbody",
                        [
                            "tr",
                            ["td", {"class": "md-left"}, "1"],
                            ["td", {"class": "md-center"}, ["strong", "2"]],
                            ["td", {"class": "md-right"}, "3"],
                        ],
                        [
                            "tr",
                            ["td", {"class": "md-left"}, "x"],
                            ["td", {"class": "md-center"}],
                            ["td", {"class": "md-right"}],
                        ],
                    ],
                ],
            ]
        ],
    ),
    ("pipe without delimiter row", "a | b", [["p", "a | b"]]),
    # 5.2-5.3: tight lists, nesting by indent, an ordered list's start
    (
        "lists",
        "- one\n- two\n  - inner\n3. three\n4. four",
        [
            ["ul", ["li", "one"], ["li", "two", ["ul", ["li", "inner"]]]],
            ["ol", {"start": "3"}, ["li", "three"], ["li", "four"]],
        ],
    ),
    (
        "quote",
        "> quoted **text**\n> more",
        [["blockquote", ["p", "quoted ", ["strong", "text"], ["br"], "more"]]],
    ),
    ("thematic break", "a\n\n---\n\nb", [["p", "a"], ["hr"], ["p", "b"]]),
    (
        "link",
        'see [the docs](https://example.com/a_b "Docs") now',
        [
            [
                "p",
                "see ",
                ["a", {"href": "https://example.com/a_b", "title": "Docs", **LINK}, "the docs"],
                " now",
            ]
        ],
    ),
    (
        "bare address",
        "at https://example.com/x. Done",
        [
            [
                "p",
                "at ",
                [
                    "a",
                    {"href": "https://example.com/x", "title": "https://example.com/x", **LINK},
                    "https://example.com/x",
                ],
                ". Done",
            ]
        ],
    ),
    (
        "mail autolink",
        "<ana@example.com>",
        [
            [
                "p",
                [
                    "a",
                    {"href": "mailto:ana@example.com", "title": "mailto:ana@example.com", **LINK},
                    "ana@example.com",
                ],
            ]
        ],
    ),
]

HOSTILE: list[tuple[str, str, list[Any]]] = [
    (
        "script tag",
        "<script>window.pwned = 1</script>",
        [["p", "<script>window.pwned = 1</script>"]],
    ),
    (
        "img onerror",
        '<img src=x onerror="window.pwned = 1">',
        [["p", '<img src=x onerror="window.pwned = 1">']],
    ),
    (
        "html block",
        "<div>\n<b onclick=x>hi</b>\n</div>",
        [["p", "<div>", ["br"], "<b onclick=x>hi</b>", ["br"], "</div>"]],
    ),
    # entities are shown as written, never decoded into markup
    ("entities", "&lt;script&gt; &amp; &#60;b&#62;", [["p", "&lt;script&gt; &amp; &#60;b&#62;"]]),
    (
        "javascript link",
        "[click](javascript:window.pwned=1)",
        [
            [
                "p",
                [
                    "span",
                    {
                        "class": "md-link-refused",
                        "title": "link not followed: javascript:window.pwned=1",
                    },
                    "click",
                ],
            ]
        ],
    ),
    (
        "mixed-case scheme",
        "[x](JaVaScRiPt:alert(1))",
        [
            [
                "p",
                [
                    "span",
                    {"class": "md-link-refused", "title": "link not followed: JaVaScRiPt:alert(1)"},
                    "x",
                ],
            ]
        ],
    ),
    (
        "data link",
        "[x](data:text/html,<script>alert(1)</script>)",
        [
            [
                "p",
                [
                    "span",
                    {
                        "class": "md-link-refused",
                        "title": "link not followed: data:text/html,<script>alert(1)</script>",
                    },
                    "x",
                ],
            ]
        ],
    ),
    ("javascript autolink", "<javascript:alert(1)>", [["p", "<javascript:alert(1)>"]]),
    (
        "image",
        "![pic](https://example.com/p.png)",
        [
            [
                "p",
                [
                    "a",
                    {
                        "href": "https://example.com/p.png",
                        "title": "https://example.com/p.png",
                        **LINK,
                    },
                    "image: pic",
                ],
            ]
        ],
    ),
    (
        "image onerror",
        '![x" onerror="alert(1)](javascript:alert(1))',
        [
            [
                "p",
                [
                    "span",
                    {"class": "md-link-refused", "title": "link not followed: javascript:alert(1)"},
                    'image: x" onerror="alert(1)',
                ],
            ]
        ],
    ),
    (
        "fence language",
        '```"><script>alert(1)</script>\nx\n```',
        [
            [
                "pre",
                {"class": "md-code"},
                [
                    "code",
                    {"class": "language-scriptalert1script", "data-lang": "scriptalert1script"},
                    "x",
                ],
            ]
        ],
    ),
]


@pytest.fixture
def page(viewer: Viewer) -> Page:
    page = viewer.page()
    page.goto(f"{viewer.url}/#token={viewer.token()}")
    return page


def test_markdown_builds_these_nodes(page: Page) -> None:
    built = page.evaluate(SHAPES, [text for _, text, _ in CASES])
    wrong = [
        (name, got) for (name, _, shape), got in zip(CASES, built, strict=True) if got != shape
    ]
    assert wrong == []


def test_hostile_text_stays_text(page: Page) -> None:
    built = page.evaluate(SHAPES, [text for _, text, _ in HOSTILE])
    wrong = [
        (name, got) for (name, _, shape), got in zip(HOSTILE, built, strict=True) if got != shape
    ]
    assert wrong == []
    assert page.evaluate("window.pwned") is None


def test_deep_nesting_and_unmatched_delimiters_end(page: Page) -> None:
    # Quotes nested past the limit read as text; 40,000 unmatched openers are still read.
    deep, stars = page.evaluate(SHAPES, [">" * 5000 + " x", "*a [b _c " * 40000])
    depth, node = 0, deep[0]
    while isinstance(node, list) and node[0] == "blockquote":
        depth, node = depth + 1, node[1]
    assert depth == 12 and node[0] == "p"
    assert stars == [["p", "*a [b _c " * 39999 + "*a [b _c"]]


def test_nesting_past_the_limit_reads_as_text(page: Page) -> None:
    # 200 links nested in each other's text: the innermost past 24 levels stay characters
    text = "[" * 200 + "Q" + "](https://example.com/)" * 200
    deepest, shown = page.evaluate(
        """async (text) => {
          const { markdown } = await import("/static/markdown.js");
          const el = markdown(text);
          let depth = 0;
          for (let a = el.querySelector("a"); a; a = a.querySelector("a")) depth += 1;
          return [depth, el.textContent];
        }""",
        text,
    )
    assert 1 <= deepest <= 24
    assert shown.count("Q") == 1 and shown.count("[") + deepest == 200


def test_a_reply_renders_as_markdown_in_the_transcript(viewer: Viewer) -> None:
    reply = "\n".join(
        [
            "## Plan",
            "",
            "| step | tool |",
            "|---|---|",
            "| 1 | `grep` |",
            "",
            "```python",
            "print('<script>window.pwned = 1</script>')",
            "```",
            "",
            '<img src=x onerror="window.pwned = 1"> and [go](javascript:window.pwned=1)',
        ]
    )
    sid = _new_session(
        viewer.store,
        "md",
        [
            events.message("user", "**Hi**, show me"),
            events.message("assistant", reply),
            events.message("user", "# not a heading: the runtime's", actor="system"),
        ],
    )
    page = viewer.open(sid)
    agent = _row(page, 2).locator(".text.md")
    expect(agent.locator("h4.md-h2")).to_have_text("Plan")
    expect(agent.locator("table td code")).to_have_text("grep")
    expect(agent.locator("pre.md-code code.language-python")).to_have_text(
        "print('<script>window.pwned = 1</script>')"
    )
    expect(agent.locator(".md-link-refused")).to_have_text("go")
    expect(_row(page, 1).locator(".md strong")).to_have_text("Hi")
    # the runtime's asides are not Markdown
    expect(_row(page, 3).locator(".text")).to_have_text("# not a heading: the runtime's")
    expect(_row(page, 3).locator(".md")).to_have_count(0)
    for tag in ("script", "img", "iframe", "a"):
        expect(page.locator(f"#rows .md {tag}")).to_have_count(0)
    assert page.evaluate("window.pwned") is None
    _shot(page, "markdown-reply")
