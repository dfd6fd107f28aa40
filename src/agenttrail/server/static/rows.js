// The transcript: one element per visible row, kept in chunks of CHUNK seqs so that only the
// chunks near the viewport are in the page (a 50,000-event session stays light).
// Rows come from GET …/transcript (agenttrail.timeline): pairing, runs and anomalies are the
// library's, never recomputed here.

import { api, sessionPath } from "./api.js";
import { clock, count, duration, fill, h } from "./dom.js";
import { markdown } from "./markdown.js";

export const CHUNK = 100; // seqs per chunk: one request, and drawing one fits in a frame or two
const NEAR = "1500px 0px"; // chunks this close to the viewport are loaded and drawn
const ESTIMATE = 40; // px per event before any chunk has been measured

// -- one row ---------------------------------------------------------------------------------

function plural(n, word) {
  return `${count(n)} ${word}${n === 1 ? "" : "s"}`;
}

function chip(text, kind, title) {
  return h("span", { class: `chip chip--${kind}`, title }, text);
}

function actorChip(row, ctx) {
  const actor = row.actor;
  if (actor === "user") {
    if (row.view === "tool" || row.view === "result") {
      return chip("You", "you", "You ran this tool yourself (actor: user)");
    }
    const name = ctx.session.user;
    return chip(name ? `user · ${name}` : "user", "user", "actor: user");
  }
  if (actor === "system") return chip("system", "system", "actor: system (the runtime)");
  if (actor === "trigger") return chip("⚡ trigger", "trigger", "actor: trigger (a trigger fired)");
  const name = row.character || ctx.session.agent || "agent";
  return chip(name, "agent", "actor: agent");
}

function anomalyMark(row) {
  const a = row.anomaly;
  if (!a) return null;
  const id = a.call_id ? ` (${a.call_id})` : "";
  return h("span", { class: "anomaly", role: "note", title: `anomaly: ${a.kind}` }, `⚠ ${a.text}${id}`);
}

function statusPill(status, detail, anomaly) {
  const labels = { ok: "ok", error: "error", pending: "no result", unpaired: "unpaired", erased: "erased" };
  const title =
    status === "pending"
      ? "call with no result: still running, or never recorded"
      : detail || status;
  return h("span", { class: `pill pill--${status}`, title }, labels[status] || status, detail && status === "error" ? `: ${detail}` : "");
}

function moreButton(shown, total, label, onClick) {
  if (total <= shown) return null;
  return h(
    "button",
    { class: "more", type: "button", onclick: onClick },
    `${label} (${count(total)} characters; ${count(total - shown)} not loaded)`,
  );
}

function textBlock(text, cls = "text") {
  return h("div", { class: cls }, text);
}

function attachmentList(list, row, ctx) {
  // Named attachments (kind, media type, bytes, SHA-256 prefix), never their base64. A full
  // row carries an image's data: URL (img-src allows data:); otherwise a button loads it.
  if (!list || !list.length) return null;
  return h(
    "div",
    { class: "attachments" },
    list.map((a) =>
      h(
        "div",
        { class: "attachment" },
        h("span", { class: "muted small" }, `[attachment: ${a.label}]`),
        a.data_url
          ? h("img", { class: "thumb", src: a.data_url, alt: a.label })
          : a.kind === "image" && a.size !== null && !row.full
            ? h("button", { class: "more", type: "button", onclick: () => ctx.loadFull(row.seq) }, "Show the image")
            : null,
      ),
    ),
  );
}

/** Whether a session's source gives no times (metadata.undated, set on import): its events
 * are dated when they were imported, which is not shown as their time (docs/viewer.md). */
export function undated(session) {
  return Boolean(session && session.metadata && session.metadata.undated);
}

function timeOf(row, ctx) {
  if (undated(ctx.session)) {
    return h("time", { title: `no time: the source gives none (imported ${row.created_at})` }, "");
  }
  return h("time", { datetime: row.created_at, title: row.created_at }, clock(row.created_at));
}

function seqLabel(row) {
  if (row.view === "tool" && row.result_seq) return `${row.seq}→${row.result_seq}`;
  if (row.view === "run" && row.call_seq) return `${row.call_seq}→${row.seq}`;
  return String(row.seq);
}

function oneLine(text, n = 160) {
  const flat = text.replace(/\s+/g, " ").trim();
  return flat.length > n ? `${flat.slice(0, n)}…` : flat;
}

function runsBody(row) {
  // A message whose text and tool calls interleave: each run, then the calls that follow it
  // (their own rows come after this one, in seq order).
  const parts = [];
  for (const run of row.runs) {
    if (run.thinking) parts.push(h("details", { class: "thinking" }, h("summary", null, "Thinking"), textBlock(run.thinking)));
    if (run.text) parts.push(markdown(run.text));
    if (run.calls.length) parts.push(h("span", { class: "muted small" }, `→ tool call ${run.calls.join(", ")}`));
  }
  return parts;
}

function messageBody(row, ctx) {
  if (row.runs && row.text.length === row.text_chars) return runsBody(row);
  const parts = [];
  if (row.actor === "trigger") parts.push(h("span", { class: "label" }, "Trigger fired"));
  if (row.thinking) {
    parts.push(
      h(
        "details",
        { class: "thinking" },
        h("summary", null, "Thinking"),
        textBlock(row.thinking),
        moreButton(row.thinking.length, row.thinking_chars, "Load all of it", () => ctx.loadFull(row.seq)),
      ),
    );
  }
  // A message's text is Markdown (rendered as nodes, markdown.js); the runtime's asides are not.
  if (row.text) parts.push(row.actor === "system" ? textBlock(row.text) : markdown(row.text));
  else if (!row.thinking) parts.push(h("span", { class: "muted" }, row.role === "assistant" ? "(no text: tool calls follow)" : "(empty)"));
  parts.push(moreButton(row.text.length, row.text_chars, "Show all", () => ctx.loadFull(row.seq)));
  if (row.blocks && row.blocks.length) parts.push(h("span", { class: "muted small" }, `[${row.blocks.join(", ")} blocks kept]`));
  parts.push(attachmentList(row.attachments, row, ctx));
  return parts;
}

function toolBody(row, ctx) {
  const open = ctx.expanded.has(row.seq);
  const head = h(
    "button",
    {
      class: "tool-head",
      type: "button",
      "aria-expanded": String(open),
      onclick: () => ctx.toggle(row.seq),
    },
    h("span", { class: "tool-name" }, row.character ? `${row.character}.${row.name}` : row.name),
    h("span", { class: "tool-args" }, oneLine(row.arguments)),
    statusPill(row.status, row.status_detail),
    row.duration_ms !== null ? h("span", { class: "dur", title: "duration (meta.duration_ms)" }, duration(row.duration_ms)) : null,
  );
  const detail = h(
    "div",
    { class: "tool-detail", hidden: !open },
    h("h4", null, "Arguments"),
    h("pre", { class: "args" }, row.arguments),
    moreButton(row.arguments.length, row.arguments_chars, "Load all arguments", () => ctx.loadFull(row.seq)),
    row.result_seq
      ? [
          h("h4", null, `Result · seq ${row.result_seq}`),
          h("pre", { class: "result" }, row.result_text || ((row.result_attachments || []).length ? "" : "(empty)")),
          moreButton(row.result_text.length, row.result_chars, "Load the whole result", () => ctx.loadFull(row.seq)),
          attachmentList(row.result_attachments, row, ctx),
        ]
      : h("p", { class: "muted small" }, row.status === "pending" ? "No result in the log yet." : "No result pairs with this call."),
  );
  return [head, detail];
}

function resultBody(row, ctx) {
  const open = ctx.expanded.has(row.seq);
  return [
    h(
      "button",
      { class: "tool-head", type: "button", "aria-expanded": String(open), onclick: () => ctx.toggle(row.seq) },
      h("span", { class: "tool-name" }, `${row.name || "tool"} result`),
      h("span", { class: "tool-args" }, row.call_id ? `for call ${row.call_id}` : "with no call id"),
      statusPill(row.status, row.status_detail),
    ),
    h(
      "div",
      { class: "tool-detail", hidden: !open },
      h("pre", { class: "result" }, row.result_text || "(empty)"),
      moreButton(row.result_text.length, row.result_chars, "Load the whole result", () => ctx.loadFull(row.seq)),
      attachmentList(row.result_attachments, row, ctx),
    ),
  ];
}

function runBody(row, ctx) {
  const open = ctx.expanded.has(row.seq);
  const facts = [
    row.duration_ms !== null ? duration(row.duration_ms) : null,
    row.tokens !== null ? `${count(row.tokens)} tokens` : null,
    row.tool_uses !== null ? plural(row.tool_uses, "tool use") : null,
    plural(row.members, "event"),
  ].filter(Boolean);
  const ownSession = ctx.sessionIds.has(`${ctx.session.id}:agent-${row.agent_id}`)
    ? `${ctx.session.id}:agent-${row.agent_id}`
    : null;
  const inside = h("div", { class: "run-rows" });
  if (open) ctx.fillRun(row.agent_id, inside);
  return [
    h(
      "div",
      { class: "run-card" },
      h(
        "button",
        { class: "run-head", type: "button", "aria-expanded": String(open), onclick: () => ctx.toggle(row.seq) },
        h("span", { class: "run-label" }, "Run"),
        h("span", { class: "tool-name" }, row.subagent_type || row.name || "subagent"),
        h("span", { class: "muted" }, `agent ${row.agent_id}`),
        statusPill(row.status, row.status_detail),
        h("span", { class: "dur" }, facts.join(" · ")),
      ),
      row.description ? h("p", { class: "run-desc" }, row.description) : null,
      row.result_text ? markdown(row.result_text, "text run-answer") : null,
      moreButton(row.result_text.length, row.result_chars, "Show the whole answer", () => ctx.loadFull(row.seq)),
      h(
        "div",
        { class: "run-detail", hidden: !open },
        row.prompt ? h("details", null, h("summary", null, "Prompt"), markdown(row.prompt)) : null,
        inside,
        ownSession
          ? h("button", { class: "link", type: "button", onclick: () => ctx.openSession(ownSession) }, "Open the run's own session")
          : null,
      ),
    ),
  ];
}

function contextBody(row, ctx) {
  const parts = [h("span", { class: "context-title" }, row.title)];
  if (row.status === "error") parts.push(statusPill("error", ""));
  if (row.text) {
    parts.push(
      h(
        "details",
        null,
        h("summary", null, row.kind === "shell" ? "Output" : "Details"),
        h("pre", null, row.text),
        moreButton(row.text.length, row.text_chars, "Load all", () => ctx.loadFull(row.seq)),
      ),
    );
  }
  return parts;
}

function noteBody(row, ctx) {
  if (row.full) {
    return [
      h("span", { class: "note-kind" }, row.kind),
      h("button", { class: "link note-more", type: "button", onclick: () => ctx.loadShort(row.seq) }, "hide details"),
      h("pre", { class: "note-full" }, row.text),
    ];
  }
  return [
    h("span", { class: "note-kind" }, row.kind),
    h("span", { class: "note-text", title: row.text }, oneLine(row.text, 240)),
    row.text_chars > row.text.length
      ? h("button", { class: "link note-more", type: "button", onclick: () => ctx.loadFull(row.seq) }, "details")
      : null,
  ];
}

function eventBody(row, ctx) {
  return [
    h("code", { class: "generic" }, row.text),
    moreButton(row.text.length, row.text_chars, "Show all", () => ctx.loadFull(row.seq)),
  ];
}

const BODIES = {
  message: messageBody,
  tool: toolBody,
  result: resultBody,
  run: runBody,
  context: contextBody,
  error: (row, ctx) => [textBlock(row.text, "text error-text"), moreButton(row.text.length, row.text_chars, "Show all", () => ctx.loadFull(row.seq))],
  note: noteBody,
  event: eventBody,
};

function whoFor(row, ctx) {
  if (row.view === "context") return chip(row.kind, "context", `context: ${row.kind}`);
  if (row.view === "note") return chip("system", "system", "a runtime note (actor: system)");
  if (row.view === "error") return chip("error", "error", `actor: ${row.actor}`);
  if (row.view === "event") return chip(row.label, "event", "an event shape this viewer does not know; shown as JSON");
  return actorChip(row, ctx);
}

function describe(row) {
  const what = {
    message: `${row.role || ""} message`,
    tool: `tool call ${row.name}, ${row.status}`,
    result: "tool result with no call",
    run: `run of agent ${row.agent_id}, ${row.status}`,
    context: row.kind,
    note: "runtime note",
    error: "error",
    event: row.label,
  }[row.view];
  return `seq ${seqLabel(row)}, ${row.actor}, ${what}`;
}

/** The element of one row. */
export function renderRow(row, ctx) {
  const aside = row.view === "note" || (row.view === "message" && row.actor === "system");
  const subagent = row.agent_id && !ctx.insideRun && row.agent_id !== ctx.session.metadata?.agentId;
  const cls = [
    "row",
    `row--${row.view}`,
    `actor--${row.actor}`,
    aside ? "row--aside" : "",
    row.anomaly ? "row--anomaly" : "",
  ];
  const info = h(
    "button",
    {
      class: "info",
      type: "button",
      "aria-label": `Meta of seq ${row.seq}`,
      "aria-haspopup": "dialog",
      title: "Model, provider, usage, duration, hash (i)",
      onclick: (event) => {
        event.stopPropagation();
        ctx.showMeta(event.currentTarget, row);
      },
    },
    "i",
  );
  return h(
    "article",
    {
      class: cls.filter(Boolean).join(" "),
      dataset: { seq: String(row.seq), place: String(placeOf(row)), view: row.view },
      tabindex: "-1",
      "aria-label": describe(row),
    },
    h(
      "div",
      { class: "gutter" },
      h("span", { class: "seq", title: "seq" }, seqLabel(row)),
      timeOf(row, ctx),
    ),
    h("div", { class: "who" }, whoFor(row, ctx), subagent ? chip(`subagent ${row.agent_id}`, "subagent", "an event of a subagent's run") : null),
    h("div", { class: "body" }, (BODIES[row.view] || eventBody)(row, ctx), anomalyMark(row)),
    info,
  );
}

// -- the ⓘ popover ---------------------------------------------------------------------------

function metaSection(title, event, noTimes) {
  const meta = event.meta || {};
  const usage = meta.usage || {};
  const lines = [
    ["Time", noTimes ? `none in the source (imported ${event.created_at})` : event.created_at],
    ["Actor", event.actor],
    event.type ? ["Type", event.type] : null,
    ["Model", meta.model || "—"],
    ["Provider", meta.provider || "—"],
    meta.location ? ["Location", meta.location] : null,
    ["Input tokens", count(usage.input)],
    ["Output tokens", count(usage.output)],
    ["Cache read tokens", count(usage.cache_read)],
    ["Cache write tokens", count(usage.cache_write)],
    ["Duration", duration(meta.duration_ms)],
    ["Hash", event.hash],
  ].filter(Boolean);
  return h(
    "section",
    null,
    h("h3", null, title),
    h(
      "dl",
      null,
      lines.map(([k, v]) => [h("dt", null, k), h("dd", { class: k === "Hash" ? "hash" : "", dataset: { field: k } }, v)]),
    ),
  );
}

/** Fill the ⓘ popover for a row: every event it stands for, with its meta; `noTimes` for a
 * session whose source gives no times (undated). */
export function metaContent(row, noTimes = false) {
  const sections = [];
  if (row.view === "tool" || row.view === "run") {
    sections.push(metaSection(`${row.view === "run" ? "Run result" : "Tool call"} · seq ${row.seq}`, row, noTimes));
    if (row.result) sections.push(metaSection(`Tool result · seq ${row.result.seq}`, { ...row.result, type: "tool_result" }, noTimes));
  } else {
    sections.push(metaSection(`${row.type ? row.type.replace("_", " ") : "Event"} · seq ${row.seq}`, row, noTimes));
  }
  if (!row.meta && !(row.result && row.result.meta)) {
    sections.push(h("p", { class: "muted small" }, "No model, provider or usage recorded for this event."));
  }
  return sections;
}

// -- the virtualised list --------------------------------------------------------------------

/** Where a row reads: its `place` (a tool call of a message stored in parts reads right after
 * the message's first part, agenttrail.views.transcript), else its seq. */
function placeOf(row) {
  return typeof row.place === "number" ? row.place : row.seq;
}

/** Reading order of two rows: by place, then by seq. */
function readingOrder(a, b) {
  return placeOf(a) - placeOf(b) || a.seq - b.seq;
}

/**
 * The rows of one session. `ctx` gives what renderers need: session, sessionIds,
 * showMeta(button, row), openSession(id).
 */
export class Transcript {
  constructor(scroller, list, ctx) {
    this.scroller = scroller;
    this.list = list;
    this.ctx = ctx;
    this.sessionId = ctx.session.id;
    this.head = 0;
    this.tailSeq = 0;
    this.chunks = [];
    this.rows = new Map(); // seq → {row, version}: rows of loaded chunks only
    this.full = new Map(); // seq → row loaded whole on demand
    this.expanded = new Set();
    this.rowHeight = ESTIMATE;
    this.follow = false;
    this.closed = false;
    this.refreshing = false;
    this.refreshAgain = false;
    this.observer = new IntersectionObserver((entries) => this.observed(entries), {
      root: scroller,
      rootMargin: NEAR,
    });
    this.rowCtx = {
      ...ctx,
      expanded: this.expanded,
      toggle: (seq) => this.toggle(seq),
      loadFull: (seq) => this.loadFull(seq),
      loadShort: (seq) => {
        this.full.delete(seq);
        this.redraw(seq);
      },
      fillRun: (agentId, el) => this.fillRun(agentId, el),
    };
    this.onScroll = () => this.atBottom();
    scroller.addEventListener("scroll", this.onScroll, { passive: true });
  }

  open(head) {
    this.head = head;
    this.tailSeq = head;
    this.list.replaceChildren();
    if (head === 0) this.list.dataset.empty = "true";
    else delete this.list.dataset.empty;
    this.ensureChunks();
  }

  close() {
    this.closed = true;
    this.observer.disconnect();
    this.scroller.removeEventListener("scroll", this.onScroll);
  }

  chunkOf(seq) {
    return this.chunks[Math.floor((seq - 1) / CHUNK)];
  }

  ensureChunks() {
    const wanted = Math.max(1, Math.ceil(this.head / CHUNK));
    const first = Math.max(0, this.chunks.length - 1); // the old last chunk may have grown
    while (this.chunks.length < wanted) {
      const index = this.chunks.length;
      const el = h("section", { class: "chunk", dataset: { chunk: String(index) } });
      const chunk = { index, el, loaded: false, loading: null, rendered: false };
      this.chunks.push(chunk);
      this.list.append(el);
      this.observer.observe(el);
    }
    for (const chunk of this.chunks.slice(first)) if (!chunk.rendered) this.placeholder(chunk);
  }

  eventsIn(chunk) {
    return Math.max(0, Math.min(CHUNK, this.head - chunk.index * CHUNK));
  }

  placeholder(chunk, height) {
    chunk.el.replaceChildren();
    chunk.el.classList.add("chunk--placeholder");
    chunk.el.style.height = `${height ?? this.eventsIn(chunk) * this.rowHeight}px`;
  }

  observed(entries) {
    for (const entry of entries) {
      const chunk = this.chunks[Number(entry.target.dataset.chunk)];
      if (entry.isIntersecting) this.show(chunk);
      else {
        chunk.wanted = false;
        // The entry already holds the chunk's height: reading it forces no layout.
        if (chunk.rendered) this.hide(chunk, entry.boundingClientRect.height);
      }
    }
  }

  async show(chunk) {
    chunk.wanted = true;
    await this.load(chunk);
    if (!this.closed && chunk.wanted && !chunk.rendered) this.render(chunk);
  }

  hide(chunk, height) {
    chunk.wanted = false;
    chunk.rendered = false;
    this.placeholder(chunk, height);
    // Rows of far chunks are dropped too: a long scroll through a large session keeps
    // memory flat, and the chunk is read again (fresh) when it comes back into view.
    const start = chunk.index * CHUNK;
    for (let seq = start + 1; seq <= start + CHUNK; seq += 1) this.rows.delete(seq);
    chunk.loaded = false;
  }

  async load(chunk) {
    if (chunk.loaded) return;
    if (!chunk.loading) {
      chunk.loading = this.fetchChunk(chunk).finally(() => {
        chunk.loading = null;
      });
    }
    await chunk.loading;
  }

  async fetchChunk(chunk) {
    const start = chunk.index * CHUNK;
    const end = start + CHUNK;
    let after = start;
    for (;;) {
      const path = sessionPath(this.sessionId, `/transcript?afterSeq=${after}&limit=${end - after}`);
      const page = await api(path);
      if (this.closed) return;
      for (const row of page.rows) this.setRow(row, page.head_seq);
      for (const row of page.updates) this.setRow(row, page.head_seq);
      if (page.rows.length) after = page.rows[page.rows.length - 1].seq;
      // Keep reading while the live tail has already passed rows this chunk still lacks.
      if (page.rows.length === 0 || after >= Math.min(end, Math.max(this.tailSeq, page.head_seq))) break;
    }
    chunk.loaded = true;
  }

  /** Keep a row (if its chunk is loaded or loading) and redraw it if its chunk is drawn. */
  setRow(row, version) {
    const chunk = this.chunkOf(row.seq);
    if (!chunk || (!chunk.loaded && !chunk.loading)) return;
    const known = this.rows.get(row.seq);
    if (known && known.version > version) return;
    this.rows.set(row.seq, { row, version });
    if (known) this.full.delete(row.seq);
    if (chunk.rendered) this.draw(chunk, row.seq);
  }

  rowFor(seq) {
    const known = this.rows.get(seq);
    if (!known) return null;
    return this.full.get(seq) || known.row;
  }

  render(chunk) {
    const start = chunk.index * CHUNK;
    const visible = [];
    for (let seq = start + 1; seq <= start + CHUNK; seq += 1) {
      const row = this.rowFor(seq);
      if (this.shows(row)) visible.push(row);
    }
    const nodes = visible.sort(readingOrder).map((row) => renderRow(row, this.rowCtx));
    const drawn = nodes.length;
    chunk.el.classList.remove("chunk--placeholder");
    chunk.el.style.height = "";
    chunk.el.replaceChildren(...nodes);
    chunk.rendered = true;
    const events = this.eventsIn(chunk);
    if (!this.measured && events >= CHUNK / 2 && drawn) {
      // Learn the average height per event (hidden rows included) for the placeholders, once:
      // measuring forces a layout, which every chunk drawn while scrolling would pay.
      this.measured = true;
      this.rowHeight = Math.max(8, chunk.el.getBoundingClientRect().height / events);
      for (const other of this.chunks) if (!other.rendered) this.placeholder(other);
    }
    if (this.follow) this.scrollToBottom();
    this.atBottom();
  }

  /** Redraw one row of a drawn chunk (or insert it in reading order, or remove it). */
  draw(chunk, seq) {
    const row = this.rowFor(seq);
    const old = chunk.el.querySelector(`:scope > .row[data-seq="${seq}"]`);
    const hadFocus = old && old.contains(document.activeElement);
    if (!this.shows(row)) {
      if (old) old.remove();
      return;
    }
    const el = renderRow(row, this.rowCtx);
    if (old && old.dataset.place === el.dataset.place) old.replaceWith(el);
    else {
      if (old) old.remove();
      const after = [...chunk.el.children].find(
        (child) => readingOrder({ place: Number(child.dataset.place), seq: Number(child.dataset.seq) }, row) > 0,
      );
      chunk.el.insertBefore(el, after || null);
    }
    if (hadFocus) el.focus({ preventScroll: true });
  }

  /** Whether a row is drawn: not one shown on another row, nor a runtime row the reader hid. */
  shows(row) {
    return Boolean(row) && row.view !== "hidden" && !(row.runtime && this.ctx.hideRuntime());
  }

  /** Draw every drawn chunk again (the reader hid or showed runtime rows). */
  redrawAll() {
    for (const chunk of this.chunks) if (chunk.rendered) this.render(chunk);
  }

  redraw(seq) {
    const chunk = this.chunkOf(seq);
    if (chunk && chunk.rendered) this.draw(chunk, seq);
  }

  toggle(seq) {
    if (this.expanded.has(seq)) this.expanded.delete(seq);
    else this.expanded.add(seq);
    this.redraw(seq);
  }

  async loadFull(seq) {
    const page = await api(sessionPath(this.sessionId, `/transcript?afterSeq=${seq - 1}&limit=1&full=true`));
    const row = page.rows[0];
    if (!row || row.seq !== seq) return;
    this.full.set(seq, row);
    if (row.view === "tool" || row.view === "result" || row.view === "run") this.expanded.add(seq);
    this.redraw(seq);
  }

  async fillRun(agentId, el) {
    fill(el, h("p", { class: "muted small" }, "Loading the run's events…"));
    try {
      const body = await api(sessionPath(this.sessionId, `/runs/${encodeURIComponent(agentId)}`));
      const inner = { ...this.rowCtx, insideRun: true, expanded: new Set(), toggle: () => {}, loadFull: () => {} };
      inner.toggle = (seq) => {
        if (inner.expanded.has(seq)) inner.expanded.delete(seq);
        else inner.expanded.add(seq);
        draw();
      };
      const draw = () =>
        fill(el, body.rows.filter((r) => this.shows(r)).map((r) => renderRow(r, inner)));
      draw();
    } catch (error) {
      fill(el, h("p", { class: "error-text" }, `Could not load the run: ${error.message}`));
    }
  }

  /** New durable events arrived on the live feed: read their rows. */
  async refresh() {
    if (this.refreshing) {
      this.refreshAgain = true;
      return;
    }
    this.refreshing = true;
    try {
      do {
        this.refreshAgain = false;
        for (;;) {
          const page = await api(sessionPath(this.sessionId, `/transcript?afterSeq=${this.tailSeq}&limit=500`));
          if (this.closed) return;
          this.setHead(page.head_seq);
          for (const row of page.rows) this.setRow(row, page.head_seq);
          for (const row of page.updates) this.setRow(row, page.head_seq);
          if (page.rows.length) this.tailSeq = page.rows[page.rows.length - 1].seq;
          if (page.next_after_seq === null) break;
        }
      } while (this.refreshAgain && !this.closed);
    } finally {
      this.refreshing = false;
    }
    if (this.follow) this.scrollToBottom();
    this.atBottom();
  }

  setHead(head) {
    if (head <= this.head) return;
    delete this.list.dataset.empty;
    this.head = head;
    this.ensureChunks();
  }

  scrollToBottom() {
    this.scroller.scrollTop = this.scroller.scrollHeight;
  }

  /** Follow the log while the reader is at its end (within a few pixels). */
  atBottom() {
    const gap = this.scroller.scrollHeight - this.scroller.scrollTop - this.scroller.clientHeight;
    this.follow = gap < 48;
    if (this.ctx.onFollow) this.ctx.onFollow(this.follow);
  }

  /** Follow the latest rows: jump to the end and stay there as the log grows. */
  async latest() {
    this.follow = true;
    this.scrollToBottom();
    const last = this.chunks[this.chunks.length - 1];
    if (last) await this.show(last);
    this.scrollToBottom();
    this.focusEdge(-1);
  }

  async first() {
    this.follow = false;
    this.scroller.scrollTop = 0;
    if (this.chunks[0]) await this.show(this.chunks[0]);
    this.focusEdge(0);
  }

  focusEdge(which) {
    const rows = this.list.querySelectorAll(".row");
    const el = which < 0 ? rows[rows.length - 1] : rows[0];
    if (el) el.focus({ preventScroll: which < 0 });
  }

  /** Bring event `seq` (or the row that shows it) into view and focus it. */
  async reveal(seq) {
    const chunk = this.chunkOf(seq);
    if (!chunk) return null;
    this.follow = false;
    chunk.el.scrollIntoView({ block: "start" });
    await this.show(chunk);
    let target = seq;
    const known = this.rows.get(seq);
    if (known && known.row.view === "hidden") target = known.row.shown_at;
    if (this.chunkOf(target) !== chunk) await this.show(this.chunkOf(target));
    const el = this.list.querySelector(`.row[data-seq="${target}"]`);
    if (el) {
      el.scrollIntoView({ block: "center" });
      el.focus({ preventScroll: true });
      el.classList.add("row--flash");
      setTimeout(() => el.classList.remove("row--flash"), 1600);
    }
    return el;
  }

  /** Move keyboard focus to the next (+1) or previous (-1) row. */
  step(delta) {
    const rows = [...this.list.querySelectorAll(":scope > .chunk > .row")];
    if (!rows.length) return;
    const current = document.activeElement && document.activeElement.closest(".row");
    let index = rows.indexOf(current);
    if (index < 0) {
      // Start from the first row in view.
      const top = this.scroller.getBoundingClientRect().top;
      index = rows.findIndex((r) => r.getBoundingClientRect().bottom > top) - (delta > 0 ? 1 : 0);
    }
    const next = rows[Math.max(0, Math.min(rows.length - 1, index + delta))];
    if (next === current && delta > 0) {
      this.scroller.scrollBy({ top: this.scroller.clientHeight * 0.8 });
      return;
    }
    next.focus({ preventScroll: true });
    next.scrollIntoView({ block: "nearest" });
  }

  /** Rows drawn right now (for tests and the status line). */
  drawnRows() {
    return this.list.querySelectorAll(".row").length;
  }
}
