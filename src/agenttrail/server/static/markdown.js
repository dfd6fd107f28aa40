// Markdown from the log as DOM nodes, never as HTML (docs/viewer.md, Markdown).
//
// A small parser written for this page: it reads the text line by line into blocks, then each
// block's text into inline nodes, and builds every element with dom.js's h(), so a character
// of the text can only ever become a text node or a checked attribute value. Raw HTML in the
// text (`<script>`, `<img onerror=…>`) is shown as the characters it is; HTML entities are
// shown as written. Links keep only http:, https: and mailto: addresses and open in a new tab
// with no referrer; an image is never loaded, it becomes a link named after its alt text.
//
// Covered, after CommonMark 0.31 and GitHub Flavored Markdown: ATX and setext headings,
// paragraphs (a single newline is a line break, as chat replies mean it), fenced code (``` or
// ~~~, a longer fence holds a shorter one, an unclosed fence runs to the end), block quotes,
// bullet and ordered lists (nested by indent), tables with column alignment, thematic breaks;
// inline: code spans, backslash escapes, **strong**, *emphasis*, ~~strikethrough~~, links,
// autolinks <…> and bare web addresses. Not covered: indented code blocks, reference links,
// footnotes, raw HTML (shown as text by design).

import { h } from "./dom.js";

const MAX_DEPTH = 12; // quotes and lists nested deeper than this read as text: no deep recursion
const MAX_INLINE_DEPTH = 24; // emphasis and links nested deeper than this read as text

const FENCE = /^( {0,3})(`{3,}|~{3,})(.*)$/;
const ATX = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
const BREAK = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
const SETEXT = /^ {0,3}(=+|-+)[ \t]*$/;
const QUOTE = /^ {0,3}> ?(.*)$/;
const ITEM = /^( {0,3})([-+*]|\d{1,9}[.)])(?:([ \t]+)(.*))?$/;
const DELIMITER_ROW = /^ {0,3}\|?[ \t]*:?-+:?[ \t]*(\|[ \t]*:?-+:?[ \t]*)*\|?[ \t]*$/;
const BLANK = /^[ \t]*$/;
const SAFE_SCHEMES = new Set(["http:", "https:", "mailto:"]);

/**
 * Text as a `div.md` of Markdown-rendered nodes.
 * @param {string} text
 * @param {string} [cls] the class of the element besides `md`
 * @returns {HTMLElement}
 */
export function markdown(text, cls = "text") {
  const lines = String(text).replace(/\r\n?/g, "\n").split("\n");
  try {
    return h("div", { class: `${cls} md` }, blocks(lines, 0));
  } catch (error) {
    // A text this parser cannot read is still shown, as the text it is.
    console.warn("Markdown not rendered:", error);
    return h("div", { class: cls }, String(text));
  }
}

/** A safe link target, or null: only absolute http:, https: and mailto: addresses. */
export function safeHref(raw) {
  let url;
  try {
    url = new URL(raw.trim());
  } catch {
    return null;
  }
  return SAFE_SCHEMES.has(url.protocol) ? url.href : null;
}

// -- blocks ----------------------------------------------------------------------------------

/**
 * @param {string[]} lines
 * @param {number} depth
 * @returns {Node[]}
 */
function blocks(lines, depth) {
  const out = [];
  let i = 0;
  while (i < lines.length) {
    const line = lines[i];
    if (BLANK.test(line)) {
      i += 1;
      continue;
    }
    let m;
    if ((m = FENCE.exec(line)) && !(m[2][0] === "`" && m[3].includes("`"))) {
      i = fenced(lines, i, m, out);
    } else if ((m = ATX.exec(line))) {
      out.push(heading(Number(m[1].length), m[2] || ""));
      i += 1;
    } else if (BREAK.test(line)) {
      out.push(h("hr"));
      i += 1;
    } else if (depth < MAX_DEPTH && QUOTE.test(line)) {
      const inner = [];
      while (i < lines.length && (m = QUOTE.exec(lines[i]))) {
        inner.push(m[1]);
        i += 1;
      }
      out.push(h("blockquote", null, blocks(inner, depth + 1)));
    } else if (depth < MAX_DEPTH && ITEM.test(line)) {
      i = list(lines, i, depth, out);
    } else if (isTableStart(lines, i)) {
      i = table(lines, i, out);
    } else {
      i = paragraph(lines, i, out);
    }
  }
  return out;
}

function heading(level, text) {
  // Levels 1–6 of a message sit under the page's own h2: h3 … h6, and the class keeps the level.
  return h(`h${Math.min(6, level + 2)}`, { class: `md-h md-h${level}` }, inline(text.trim()));
}

function fenced(lines, start, open, out) {
  const indent = open[1].length;
  const fence = open[2];
  const info = open[3].trim().split(/\s+/)[0] || "";
  const close = new RegExp(`^ {0,3}${fence[0] === "`" ? "`" : "~"}{${fence.length},}[ \\t]*$`);
  const body = [];
  let i = start + 1;
  while (i < lines.length && !close.test(lines[i])) {
    // Strip up to the opening fence's indent from each line (CommonMark 4.5).
    body.push(lines[i].replace(new RegExp(`^ {0,${indent}}`), ""));
    i += 1;
  }
  const lang = info.replace(/[^\w+#.-]/g, "");
  out.push(
    h(
      "pre",
      { class: "md-code" },
      h("code", { class: lang ? `language-${lang}` : null, dataset: lang ? { lang } : undefined }, body.join("\n")),
    ),
  );
  return i + 1; // past the closing fence (or the end)
}

/** Whether a line starts a block other than a paragraph (so it ends a paragraph). */
function interrupts(lines, i) {
  const line = lines[i];
  const fence = FENCE.exec(line);
  return (
    (fence && !(fence[2][0] === "`" && fence[3].includes("`"))) ||
    ATX.test(line) ||
    BREAK.test(line) ||
    QUOTE.test(line) ||
    /^ {0,3}([-+*]|1[.)])[ \t]+\S/.test(line) ||
    isTableStart(lines, i)
  );
}

function paragraph(lines, start, out) {
  const body = [lines[start]];
  let i = start + 1;
  while (i < lines.length && !BLANK.test(lines[i])) {
    const setext = SETEXT.exec(lines[i]);
    if (setext) {
      out.push(heading(setext[1][0] === "=" ? 1 : 2, body.join("\n")));
      return i + 1;
    }
    if (interrupts(lines, i)) break;
    body.push(lines[i]);
    i += 1;
  }
  out.push(h("p", null, inline(body.map((l) => l.trim()).join("\n"))));
  return i;
}

function list(lines, start, depth, out) {
  const first = ITEM.exec(lines[start]);
  const ordered = /\d/.test(first[2]);
  const marker = ordered ? first[2].slice(-1) : first[2];
  const items = [];
  let i = start;
  let loose = false;
  for (;;) {
    const m = ITEM.exec(lines[i]);
    const spaces = m[3] ? m[3].replace(/\t/g, "    ").length : 1;
    const width = m[1].length + m[2].length + (spaces > 4 ? 1 : spaces);
    const body = [m[4] === undefined ? "" : (spaces > 4 ? " ".repeat(spaces - 1) : "") + m[4]];
    i += 1;
    let sawBlank = false;
    while (i < lines.length) {
      const line = lines[i];
      if (BLANK.test(line)) {
        sawBlank = true;
        body.push("");
        i += 1;
        continue;
      }
      const indent = /^ */.exec(line)[0].length;
      if (indent >= width) {
        if (sawBlank) loose = true;
        sawBlank = false;
        body.push(line.slice(width));
        i += 1;
        continue;
      }
      if (!sawBlank && !interrupts(lines, i) && !ITEM.test(line)) {
        body.push(line.trim()); // a lazy continuation of the item's paragraph
        i += 1;
        continue;
      }
      break;
    }
    while (body.length && BLANK.test(body[body.length - 1])) body.pop();
    items.push(body);
    const next = i < lines.length ? ITEM.exec(lines[i]) : null;
    const same = next && (ordered ? /\d/.test(next[2]) && next[2].slice(-1) === marker : next[2] === marker);
    if (!same || BREAK.test(lines[i])) break;
    if (sawBlank) loose = true;
  }
  const children = items.map((body) => {
    const nodes = blocks(body, depth + 1);
    // A tight list's single paragraphs read inline (CommonMark 5.3).
    const flat = loose ? nodes : nodes.flatMap((n) => (n instanceof HTMLParagraphElement ? [...n.childNodes] : [n]));
    return h("li", null, flat);
  });
  const startAt = ordered ? Number(first[2].slice(0, -1)) : 1;
  out.push(ordered ? h("ol", { start: startAt !== 1 ? String(startAt) : null }, children) : h("ul", null, children));
  return i;
}

function cells(line) {
  let row = line.trim();
  if (row.startsWith("|")) row = row.slice(1);
  if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
  const found = [];
  let cell = "";
  for (let k = 0; k < row.length; k += 1) {
    if (row[k] === "\\" && row[k + 1] === "|") {
      cell += "|";
      k += 1;
    } else if (row[k] === "|") {
      found.push(cell.trim());
      cell = "";
    } else cell += row[k];
  }
  found.push(cell.trim());
  return found;
}

function isTableStart(lines, i) {
  if (i + 1 >= lines.length || !lines[i].includes("|") || !DELIMITER_ROW.test(lines[i + 1])) return false;
  return cells(lines[i]).length === cells(lines[i + 1]).length;
}

function table(lines, start, out) {
  const head = cells(lines[start]);
  const align = cells(lines[start + 1]).map((d) =>
    d.startsWith(":") && d.endsWith(":") ? "center" : d.endsWith(":") ? "right" : d.startsWith(":") ? "left" : null,
  );
  const cell = (tag, text, k) => h(tag, { class: align[k] ? `md-${align[k]}` : null }, inline(text));
  const rows = [];
  let i = start + 2;
  while (i < lines.length && !BLANK.test(lines[i]) && lines[i].includes("|") && !interrupts(lines, i)) {
    const found = cells(lines[i]);
    rows.push(h("tr", null, head.map((_, k) => cell("td", found[k] || "", k))));
    i += 1;
  }
  out.push(
    h(
      "div",
      { class: "md-table" },
      h("table", null, h("thead", null, h("tr", null, head.map((text, k) => cell("th", text, k)))), rows.length ? h("tbody", null, rows) : null),
    ),
  );
  return i;
}

// -- inline ----------------------------------------------------------------------------------

const PUNCTUATION = /[!-/:-@[-`{-~]/;
const WORD = /[\p{L}\p{N}]/u;
const LABEL_CHARS = 1000; // a link's text is looked for this far: "[[[[…" stays linear
const BARE_URL = /\b(?:https?:\/\/|www\.)[^\s<>]*[^\s<>.,:;"')\]*_~?!]/y;

/**
 * A paragraph's text as nodes. Each opener looks for its closer once; a kind of closer that is
 * not found is remembered as absent, so text full of unmatched `*` or `[` stays linear.
 * @param {string} text
 * @returns {Node[]}
 */
function inline(text) {
  return new Inline(text).parse(0, text.length);
}

class Inline {
  constructor(text) {
    this.text = text;
    /** @type {Map<string, number>} closer → a place after which the text holds none */
    this.absent = new Map();
    this.depth = 0; // elements open around the text being read
  }

  /** Find `needle` at or after `from` (before `end`); -1, remembered, when it is not there. */
  find(needle, from, end) {
    const none = this.absent.get(needle);
    if (none !== undefined && none <= from) return -1;
    const at = this.text.indexOf(needle, from);
    if (at < 0) this.absent.set(needle, Math.min(from, none ?? from));
    return at >= 0 && at < end ? at : -1;
  }

  parse(start, end) {
    this.depth += 1;
    try {
      return this.read(start, end);
    } finally {
      this.depth -= 1;
    }
  }

  read(start, end) {
    const text = this.text;
    const out = [];
    let plain = "";
    const flush = () => {
      if (plain) out.push(document.createTextNode(plain));
      plain = "";
    };
    let i = start;
    while (i < end) {
      const c = text[i];
      if (c === "\\" && i + 1 < end && PUNCTUATION.test(text[i + 1])) {
        plain += text[i + 1];
        i += 2;
        continue;
      }
      if (c === "\n") {
        flush();
        out.push(h("br"));
        i += 1;
        continue;
      }
      const found = this.span(i, end);
      if (found) {
        flush();
        out.push(found.node);
        i = found.next;
        continue;
      }
      plain += c;
      i += 1;
    }
    flush();
    return out;
  }

  /** The inline element that starts at `i`, if one does: `{node, next}`. */
  span(i, end) {
    const text = this.text;
    const c = text[i];
    if (this.depth > MAX_INLINE_DEPTH && c !== "`") return null;
    if (c === "`") return this.code(i, end);
    if (c === "[" || (c === "!" && text[i + 1] === "[")) return this.link(i, end);
    if (c === "<") return this.autolink(i, end);
    if ((c === "h" || c === "w") && (i === 0 || /\W/.test(text[i - 1]))) {
      BARE_URL.lastIndex = i;
      const m = BARE_URL.exec(text);
      if (m && i + m[0].length <= end) {
        const href = safeHref(m[0].startsWith("www.") ? `https:/${"/"}${m[0]}` : m[0]);
        if (href) return { node: anchor(href, [document.createTextNode(m[0])]), next: i + m[0].length };
      }
      return null;
    }
    if (c === "*" || c === "_" || c === "~") return this.emphasis(i, end);
    return null;
  }

  code(i, end) {
    const text = this.text;
    let n = 1;
    while (text[i + n] === "`") n += 1;
    const fence = "`".repeat(n);
    let from = i + n;
    for (;;) {
      const at = this.find(fence, from, end);
      if (at < 0) return { node: document.createTextNode(fence), next: i + n }; // literal backticks
      let after = at + n;
      if (text[after] === "`") {
        // a longer run is not this span's closer
        while (text[after] === "`") after += 1;
        from = after;
        continue;
      }
      let body = text.slice(i + n, at).replace(/\n/g, " ");
      if (/^ .*[^ ].* $/.test(body)) body = body.slice(1, -1);
      return { node: h("code", null, body), next: after };
    }
  }

  link(i, end) {
    const text = this.text;
    const image = text[i] === "!";
    const open = image ? i + 1 : i;
    // The matching "]": brackets nest; code spans and escapes are skipped over.
    if (this.find("]", open, end) < 0) return null;
    let depth = 0;
    let close = -1;
    for (let k = open; k < Math.min(end, open + LABEL_CHARS); k += 1) {
      const c = text[k];
      if (c === "\\") k += 1;
      else if (c === "[") depth += 1;
      else if (c === "]" && --depth === 0) {
        close = k;
        break;
      }
    }
    if (close < 0 || text[close + 1] !== "(") return null;
    const m = /^\(\s*(<[^<>\n]*>|[^\s()]*(?:\([^\s()]*\)[^\s()]*)*)(?:\s+("[^"]*"|'[^']*'|\([^)]*\)))?\s*\)/.exec(text.slice(close + 1, end));
    if (!m) return null;
    const target = m[1].replace(/^<(.*)>$/, "$1");
    const href = safeHref(target);
    const label = image ? [document.createTextNode(`image: ${text.slice(open + 1, close)}`)] : this.parse(open + 1, close);
    const next = close + 1 + m[0].length;
    if (!href) {
      // Not followed (javascript:, data:, a relative address): the label, and the address as a title.
      return { node: h("span", { class: "md-link-refused", title: `link not followed: ${target}` }, label), next };
    }
    const title = m[2] ? m[2].slice(1, -1) : null;
    return { node: anchor(href, label, title), next };
  }

  autolink(i, end) {
    const m = /^<([a-zA-Z][a-zA-Z0-9+.-]{1,31}:[^\s<>]*|[^\s<>@]+@[^\s<>@]+\.[^\s<>@]+)>/.exec(this.text.slice(i, end));
    if (!m) return null;
    const href = safeHref(m[1].includes(":") ? m[1] : `mailto:${m[1]}`);
    if (!href) return null;
    return { node: anchor(href, [document.createTextNode(m[1])]), next: i + m[0].length };
  }

  emphasis(i, end) {
    // A run of one, two or three "*" or "_" (or two "~") opens when a non-space follows it,
    // and the next run of the same length closes it when a non-space precedes that run;
    // "_" does not open or close inside a word (CommonMark 6.2, simplified).
    const text = this.text;
    const c = text[i];
    let n = 1;
    while (text[i + n] === c) n += 1;
    if (c === "~" ? n !== 2 : n > 3) return null;
    const inner = i + n;
    if (inner >= end || /\s/.test(text[inner])) return null;
    if (c === "_" && i > 0 && WORD.test(text[i - 1])) return null;
    let from = inner;
    for (let tries = 0; tries < 8; tries += 1) {
      const at = this.find(c, from, end);
      if (at < 0) return null;
      let after = at;
      while (text[after] === c) after += 1;
      if (after - at === n && after <= end && !/\s/.test(text[at - 1]) && !(c === "_" && WORD.test(text[after] || ""))) {
        const body = this.parse(inner, at);
        const node =
          c === "~" ? h("del", null, body) : n === 1 ? h("em", null, body) : n === 2 ? h("strong", null, body) : h("em", null, h("strong", null, body));
        return { node, next: after };
      }
      from = after;
    }
    return null;
  }
}

function anchor(href, label, title) {
  return h("a", { href, title: title || href, target: "_blank", rel: "noopener noreferrer" }, label);
}
