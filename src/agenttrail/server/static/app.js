// The viewer: sessions list, one session's transcript with its live feed, keyboard keys.

import { ApiError, LiveFeed, api, sessionPath, setToken, takeTokenFromAddress, token } from "./api.js";
import { renderCompare } from "./compare.js";
import { count, fill, h, typing, when } from "./dom.js";
import { renderEvidence, renderFountain } from "./evidence.js";
import { openPalette } from "./palette.js";
import { Transcript, metaContent, undated } from "./rows.js";
import { events, liveBadge, sessionItem, summaryBadges, usageTotals } from "./sessions.js";

/**
 * The element with this id (the page has every id it asks for).
 * @param {string} id
 * @returns {any}
 */
const $ = (id) => document.getElementById(id);

const state = {
  sessions: [],
  summaries: new Map(),
  eventMatches: null, // session ids whose events match the search, when one ran
  current: null,
  transcript: null,
  feed: null,
  liveState: "",
  partialAt: 0, // when the last streamed partial arrived (Date.now())
  tab: "transcript",
  partial: null,
  anomalyIndex: -1,
};

// -- sessions list ---------------------------------------------------------------------------

function needToken(message) {
  $("token-box").hidden = false;
  $("sessions-status").textContent = message || "";
}

// Every session, a page at a time (the server pages the list: docs/server.md).
const SESSIONS_PAGE = 1000;

async function allSessions() {
  const sessions = [];
  let after = "";
  for (;;) {
    const cursor = after ? `&after=${encodeURIComponent(after)}` : "";
    const page = await api(`/v1/sessions?limit=${SESSIONS_PAGE}${cursor}`);
    sessions.push(...page);
    if (page.length < SESSIONS_PAGE) return sessions;
    after = page[page.length - 1].id;
  }
}

async function loadSessions() {
  if (!token()) {
    needToken("");
    return;
  }
  $("sessions-status").textContent = "Loading sessions…";
  try {
    const sessions = await allSessions();
    // Newest first; sessions that do not say when they started keep the log's order, last.
    state.sessions = sessions
      .map((s, i) => [s, i])
      .sort(([a, i], [b, j]) => (b.started || "").localeCompare(a.started || "") || i - j)
      .map(([s]) => s);
    $("token-box").hidden = true;
    $("sessions-status").textContent = `${count(sessions.length)} session${sessions.length === 1 ? "" : "s"}`;
    renderSessions();
    loadSummaries();
  } catch (error) {
    if (error instanceof ApiError && (error.status === 401 || error.status === 403)) {
      needToken(`The token was refused: ${error.message}`);
    } else {
      $("sessions-status").textContent = `Could not load sessions: ${error.message}`;
    }
  }
}

function sessionMatches(session, text) {
  if (!text) return true;
  const needle = text.toLowerCase();
  const fields = [session.id, session.title, session.agent, session.user, session.workspace];
  if (fields.some((f) => f && f.toLowerCase().includes(needle))) return true;
  return state.eventMatches ? state.eventMatches.has(session.id) : false;
}

function visibleSessions() {
  const text = $("search").value.trim();
  return state.sessions.filter((s) => sessionMatches(s, text));
}

function renderSessions() {
  const list = visibleSessions();
  const current = state.current && state.current.id;
  fill($("sessions"), list.map((s) => sessionItem(s, { current, summary: state.summaries.get(s.id), open: go })));
  if (!list.length && state.sessions.length) $("sessions").append(h("li", { class: "muted small" }, "No session matches."));
}

async function loadSummaries() {
  // one request for the whole list: a request per session took seconds for a thousand
  let body;
  try {
    body = await api("/v1/summaries");
  } catch {
    return; // the rows keep "checking…"
  }
  for (const { id, ...summary } of body.summaries) {
    state.summaries.set(id, summary);
    updateSessionItem(id);
  }
}

function updateSessionItem(id) {
  const button = $("sessions").querySelector(`.session-item[data-id="${CSS.escape(id)}"]`);
  const session = state.sessions.find((s) => s.id === id);
  if (button && session) {
    fill(button.querySelector(".s-counts"), summaryBadges(session, state.summaries.get(id)));
  }
  if (state.current && state.current.id === id) renderBadges();
}

// -- search ----------------------------------------------------------------------------------

let searchTimer = null;
let searchSerial = 0;

function onSearch() {
  state.eventMatches = null;
  renderSessions();
  clearTimeout(searchTimer);
  const text = $("search").value.trim();
  if (!text) {
    $("search-results").hidden = true;
    return;
  }
  searchTimer = setTimeout(() => runSearch(text), 250);
}

async function runSearch(text) {
  const serial = ++searchSerial;
  let body;
  try {
    body = await api(`/v1/search?${new URLSearchParams({ q: text })}`);
  } catch (error) {
    fill($("search-hits"), h("li", { class: "muted small" }, `Search failed: ${error.message}`));
    $("search-results").hidden = false;
    return;
  }
  if (serial !== searchSerial) return;
  state.eventMatches = new Set(body.sessions.filter((m) => m.total).map((m) => m.session_id));
  renderSessions();
  const titles = new Map(state.sessions.map((s) => [s.id, s.title || s.id]));
  const items = body.sessions
    .filter((m) => m.total)
    .map((m) =>
      h(
        "li",
        null,
        h("p", { class: "hit-session" }, titles.get(m.session_id) || m.session_id, h("span", { class: "muted small" }, ` · ${count(m.total)} match${m.total === 1 ? "" : "es"}`)),
        h(
          "ul",
          null,
          m.hits.map((hit) =>
            h(
              "li",
              null,
              h(
                "button",
                { class: "hit", type: "button", onclick: () => go(m.session_id, hit.seq) },
                h("span", { class: "seq" }, `seq ${hit.seq}`),
                h("span", { class: "muted small" }, ` ${hit.type || "event"} · ${hit.actor} `),
                h("span", { class: "snippet" }, hit.snippet),
              ),
            ),
          ),
        ),
      ),
    );
  fill($("search-hits"), items.length ? items : h("li", { class: "muted small" }, "No event contains this text."));
  $("search-results").hidden = false;
}

// -- one session -----------------------------------------------------------------------------

function go(id, seq) {
  if (!id) {
    history.pushState(null, "", location.pathname + location.search);
    route();
    return;
  }
  const params = new URLSearchParams({ session: id });
  if (seq) params.set("seq", String(seq));
  const hash = `#${params}`;
  if (location.hash === hash) route();
  else location.hash = hash;
}

function route() {
  const params = new URLSearchParams(location.hash.slice(1));
  if (params.get("compare") && params.get("with")) {
    openCompare(params.get("compare"), params.get("with"));
    return;
  }
  const id = params.get("session");
  const seq = Number(params.get("seq")) || null;
  if (!id) {
    closeSession();
    return;
  }
  if (state.current && state.current.id === id) {
    if (seq) state.transcript.reveal(seq);
    return;
  }
  openSession(id, seq);
}

function closeSession() {
  if (state.feed) state.feed.stop();
  if (state.transcript) state.transcript.close();
  state.feed = null;
  state.transcript = null;
  state.current = null;
  clearPartial();
  hideMeta();
  $("session").hidden = true;
  $("compare").hidden = true;
  $("empty").hidden = false;
  document.body.classList.remove("session-open");
  renderSessions();
}

async function openSession(id, seq) {
  closeSession();
  let session;
  try {
    session = await api(sessionPath(id));
  } catch (error) {
    fill($("empty"), h("p", { class: "error-text" }, `Cannot open session ${id}: ${error.message}`));
    return;
  }
  state.current = session;
  state.anomalyIndex = -1;
  document.body.classList.add("session-open");
  $("empty").hidden = true;
  $("session").hidden = false;
  renderHeader();
  renderSessions();
  selectTab("transcript");
  const transcript = new Transcript($("transcript"), $("rows"), {
    session,
    sessionIds: new Set(state.sessions.map((s) => s.id)),
    showMeta,
    hideRuntime,
    openSession: (other) => go(other),
    onFollow: (following) => {
      $("latest").hidden = following;
    },
  });
  state.transcript = transcript;
  transcript.open(session.events);
  state.feed = new LiveFeed(session.id, session.events, {
    onAppend: (message) => onAppend(message),
    onPartial: (message) => onPartial(message),
    onState: (liveState, detail) => {
      state.liveState = liveState;
      state.liveDetail = detail || "";
      renderBadges();
    },
  }).start();
  refreshSummary();
  if (seq) await transcript.reveal(seq);
  else $("transcript").focus({ preventScroll: true });
}

// -- comparing two sessions ---------------------------------------------------------------

function openCompare(a, b) {
  closeSession();
  $("empty").hidden = true;
  $("compare").hidden = false;
  document.body.classList.add("session-open");
  const titles = new Map(state.sessions.map((s) => [s.id, s.title || s.id]));
  renderCompare($("compare"), { a, b, titles, open: (id, seq) => go(id, seq) });
}

function compareDialog() {
  const current = state.current;
  if (!current) return;
  const others = state.sessions.filter((s) => s.id !== current.id);
  fill(
    $("compare-with"),
    others.map((s) => h("option", { value: s.id }, `${s.title || "(untitled session)"} · ${s.id}`)),
  );
  $("compare-dialog").showModal();
}

function onCompare(event) {
  event.preventDefault();
  const b = $("compare-with").value;
  $("compare-dialog").close();
  if (state.current && b) location.hash = `#${new URLSearchParams({ compare: state.current.id, with: b })}`;
}

function renderHeader() {
  const s = state.current;
  $("session-title").textContent = s.title || "(untitled session)";
  fill(
    $("session-facts"),
    h("code", { title: "session id" }, s.id),
    [s.agent && ` · agent ${s.agent}`, s.user && ` · user ${s.user}`, s.workspace && ` · ${s.workspace}`, s.started && ` · started ${when(s.started)}`].filter(Boolean).join(""),
  );
  renderBadges();
}

function renderBadges() {
  const s = state.current;
  if (!s) return;
  const summary = state.summaries.get(s.id);
  // The live feed's state: whether this page follows the log (not whether anyone writes it).
  const feed = {
    live: ["following", "", "Following the log: new events appear as they are written"],
    connecting: ["○ connecting…", "", "Opening the live feed"],
    reconnecting: ["○ reconnecting…", "badge--warn", `The live feed dropped; resuming from seq ${state.feed ? state.feed.lastSeq : "?"} ${state.liveDetail || ""}`],
    refused: ["✗ not following", "badge--bad", `The live feed was refused: ${state.liveDetail}`],
    closed: ["○ closed", "", ""],
  }[state.liveState] || ["", "", ""];
  const badges = [h("span", { class: "badge", id: "event-count" }, events(s.events))];
  if (summary) {
    if (summary.anomalies) {
      badges.push(
        h(
          "button",
          { class: "badge badge--warn", type: "button", title: "Go to the next anomaly", onclick: nextAnomaly },
          `⚠ ${count(summary.anomalies)} anomal${summary.anomalies === 1 ? "y" : "ies"}`,
        ),
      );
    }
    const usage = usageTotals(summary.usage);
    if (usage) badges.push(h("span", { class: "badge", id: "usage-badge", title: usage.title }, `${count(usage.tokens)} tokens · ${usage.cost}`));
    const chain = summary.chain;
    badges.push(
      h(
        "button",
        {
          class: `badge ${chain.ok ? "badge--ok" : "badge--bad"}`,
          id: "chain-badge",
          type: "button",
          title: chain.ok ? `Every event's hash recomputes; head ${chain.head}` : chain.reason || chain.trace_problems.join("; "),
          onclick: () => selectTab("evidence"),
        },
        chain.ok ? "✓ chain verified" : chain.bad_seq ? `✗ chain broken at seq ${chain.bad_seq}` : "✗ evidence problem",
      ),
    );
  }
  if (isLive(s.id)) badges.push(liveBadge("", "live-badge"));
  if (feed[0]) badges.push(h("span", { class: `badge badge--feed ${feed[1]}`, id: "live-state", dataset: { state: state.liveState }, title: feed[2] }, feed[0]));
  fill($("session-badges"), badges);
  renderRuntimeSwitch(summary);
}

/** The open session is live by the server's rule, or a partial streamed here a moment ago. */
function isLive(id) {
  const summary = state.summaries.get(id);
  const streaming = state.partialAt && Date.now() - state.partialAt < RECENT_MS;
  return Boolean((summary && summary.live) || (state.current && state.current.id === id && streaming));
}

const RECENT_MS = 300000; // agenttrail.views.liveness.RECENT_S

// -- runtime rows ------------------------------------------------------------------------------

const HIDE_RUNTIME_KEY = "agenttrail.hideRuntime";

function hideRuntime() {
  return localStorage.getItem(HIDE_RUNTIME_KEY) === "true";
}

/** The switch that hides runtime rows (progress, file snapshots, queue operations), with
 * their count; shown only on a session that has some. */
function renderRuntimeSwitch(summary) {
  const n = summary ? summary.runtime_rows || 0 : 0;
  const box = $("runtime-switch");
  box.hidden = n === 0;
  $("hide-runtime").checked = hideRuntime();
  $("runtime-count").textContent = hideRuntime()
    ? `${count(n)} runtime row${n === 1 ? "" : "s"} hidden`
    : `Hide ${count(n)} runtime row${n === 1 ? "" : "s"}`;
}

function onHideRuntime() {
  localStorage.setItem(HIDE_RUNTIME_KEY, String($("hide-runtime").checked));
  renderRuntimeSwitch(state.current && state.summaries.get(state.current.id));
  if (state.transcript) state.transcript.redrawAll();
}

function nextAnomaly() {
  const summary = state.summaries.get(state.current.id);
  if (!summary || !summary.anomaly_seqs.length) return;
  state.anomalyIndex = (state.anomalyIndex + 1) % summary.anomaly_seqs.length;
  selectTab("transcript");
  state.transcript.reveal(summary.anomaly_seqs[state.anomalyIndex]);
}

let summaryTimer = null;

function refreshSummary(delay = 0) {
  clearTimeout(summaryTimer);
  const id = state.current && state.current.id;
  summaryTimer = setTimeout(async () => {
    try {
      state.summaries.set(id, await api(sessionPath(id, "/summary")));
      updateSessionItem(id);
    } catch {
      // shown again on the next append
    }
  }, delay);
}

function onAppend(message) {
  const s = state.current;
  if (!s || message.session_id !== s.id) return;
  s.events = Math.max(s.events, message.seq);
  const listed = state.sessions.find((x) => x.id === s.id);
  if (listed) listed.events = s.events;
  const counter = $("event-count");
  if (counter) counter.textContent = events(s.events);
  updateSessionItem(s.id);
  const payload = message.payload || {};
  if (state.partial && (state.partial.done || (payload.type === "message" && message.actor !== "user"))) {
    clearPartial(); // the durable event takes the streamed text's place
  }
  state.transcript.refresh();
  refreshSummary(800);
}

// -- streaming partials ----------------------------------------------------------------------

function onPartial(message) {
  if (!state.partial) state.partial = { text: "", done: false, activity: "", usage: null };
  const wasLive = isLive(state.current.id);
  state.partialAt = Date.now();
  if (!wasLive) renderBadges();
  const p = state.partial;
  if (message.textDelta) p.text += message.textDelta;
  if (message.activity) p.activity = message.activity;
  if (message.usage) p.usage = message.usage;
  p.done = Boolean(message.done);
  const el = $("partial");
  const usage = p.usage ? ` · ${Object.entries(p.usage).filter(([, v]) => v !== null).map(([k, v]) => `${k} ${count(v)}`).join(", ")}` : "";
  fill(
    el,
    h("div", { class: "gutter" }, h("span", { class: "seq" }, "…")),
    h("div", { class: "who" }, h("span", { class: "chip chip--agent" }, state.current.agent || "agent")),
    h(
      "div",
      { class: "body" },
      h("span", { class: "muted small partial-state" }, p.done ? "finished streaming; waiting for the durable event" : `streaming${p.activity ? ` (${p.activity})` : ""}…`, usage),
      h("div", { class: "text" }, p.text),
    ),
  );
  el.hidden = false;
  if (state.transcript && state.transcript.follow) state.transcript.scrollToBottom();
}

function clearPartial() {
  state.partial = null;
  const el = $("partial");
  el.hidden = true;
  el.replaceChildren();
}

// -- the ⓘ popover ---------------------------------------------------------------------------

let metaOwner = null;
let metaReturn = null;

function showMeta(button, row, returnTo) {
  const pop = $("meta-pop");
  if (metaOwner === button && !pop.hidden) {
    hideMeta();
    return;
  }
  metaOwner = button;
  metaReturn = returnTo || button;
  fill(pop, h("button", { class: "ghost pop-close", type: "button", "aria-label": "Close", onclick: hideMeta }, "✕"), metaContent(row, undated(state.current)));
  pop.hidden = false;
  const rect = button.getBoundingClientRect();
  const width = Math.min(380, window.innerWidth - 16);
  pop.style.left = `${Math.max(8, Math.min(rect.right - width, window.innerWidth - width - 8))}px`;
  const below = rect.bottom + 6;
  const height = pop.getBoundingClientRect().height;
  pop.style.top = `${below + height < window.innerHeight ? below : Math.max(8, rect.top - height - 6)}px`;
  pop.focus({ preventScroll: true });
}

function hideMeta() {
  const pop = $("meta-pop");
  if (pop.hidden) return;
  pop.hidden = true;
  if (metaReturn && document.contains(metaReturn)) metaReturn.focus({ preventScroll: true });
  metaOwner = null;
  metaReturn = null;
}

// -- tabs ------------------------------------------------------------------------------------

function selectTab(name) {
  state.tab = name;
  for (const tab of ["transcript", "evidence", "fountain"]) {
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
    $(tab).hidden = tab !== name;
  }
  const ctx = {
    session: state.current,
    reveal: (seq) => {
      selectTab("transcript");
      state.transcript.reveal(seq);
    },
  };
  if (name === "evidence") renderEvidence($("evidence"), ctx);
  if (name === "fountain") renderFountain($("fountain"), ctx);
}

// -- keyboard --------------------------------------------------------------------------------

function focusedRow() {
  const el = document.activeElement;
  return el && el.closest ? el.closest("#rows .row") : null;
}

function rowData(el) {
  return el && state.transcript ? state.transcript.rowFor(Number(el.dataset.seq)) : null;
}

function stepSession(delta) {
  const list = visibleSessions();
  if (!list.length) return;
  const at = state.current ? list.findIndex((s) => s.id === state.current.id) : -1;
  const next = list[Math.max(0, Math.min(list.length - 1, at + delta))];
  go(next.id);
}

function onKey(event) {
  if (event.defaultPrevented || event.ctrlKey || event.metaKey || event.altKey) return;
  if (document.querySelector("dialog[open]")) return; // dialogs handle their own keys
  if (event.key === "Escape") {
    if (!$("meta-pop").hidden) hideMeta();
    else if (document.activeElement === $("search")) $("search").blur();
    else if (state.current && window.matchMedia("(max-width: 760px)").matches) go("");
    return;
  }
  if (typing(event)) return;
  const row = focusedRow();
  const inTranscript = state.current && state.tab === "transcript";
  const keys = {
    "/": () => $("search").focus(),
    "?": () => $("help").showModal(),
    "[": () => stepSession(-1),
    "]": () => stepSession(1),
    1: () => state.current && selectTab("transcript"),
    2: () => state.current && selectTab("evidence"),
    3: () => state.current && selectTab("fountain"),
    t: () => state.current && palette(),
    c: () => state.current && compareDialog(),
    j: () => inTranscript && state.transcript.step(1),
    k: () => inTranscript && state.transcript.step(-1),
    g: () => inTranscript && state.transcript.first(),
    Home: () => inTranscript && state.transcript.first(),
    G: () => inTranscript && state.transcript.latest(),
    End: () => inTranscript && state.transcript.latest(),
  };
  if (row && document.activeElement === row) {
    Object.assign(keys, {
      ArrowDown: () => state.transcript.step(1),
      ArrowUp: () => state.transcript.step(-1),
      Enter: () => toggleRow(row),
      o: () => toggleRow(row),
      i: () => showMeta(row.querySelector(".info"), rowData(row), row),
    });
  }
  const action = keys[event.key];
  if (action) {
    event.preventDefault();
    action();
  }
}

function toggleRow(el) {
  const row = rowData(el);
  if (!row) return;
  if (["tool", "result", "run"].includes(row.view)) {
    state.transcript.toggle(row.seq);
    const again = $("rows").querySelector(`.row[data-seq="${row.seq}"]`);
    if (again instanceof HTMLElement) again.focus({ preventScroll: true });
  } else {
    const details = el.querySelector("details");
    if (details) details.open = !details.open;
  }
}

// -- the wrench palette ----------------------------------------------------------------------

function palette() {
  openPalette($("palette"), {
    session: state.current,
    onRan: async (result) => {
      await state.transcript.refresh();
      await state.transcript.reveal(result.call_seq);
    },
  });
}

// -- start -----------------------------------------------------------------------------------

function start() {
  takeTokenFromAddress();
  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    setToken($("token-input").value);
    $("token-input").value = "";
    loadSessions().then(route);
  });
  $("search").addEventListener("input", onSearch);
  $("search").addEventListener("keydown", (event) => {
    if (event.key === "Enter") {
      event.preventDefault();
      const first = document.querySelector("#search-hits .hit") || document.querySelector(".session-item");
      if (first instanceof HTMLElement) first.focus();
    }
  });
  $("back").addEventListener("click", () => go(""));
  $("skip").addEventListener("click", () => $("transcript").focus());
  $("tools-button").addEventListener("click", palette);
  $("hide-runtime").addEventListener("change", onHideRuntime);
  $("compare-button").addEventListener("click", compareDialog);
  $("compare-form").addEventListener("submit", onCompare);
  $("help-button").addEventListener("click", () => $("help").showModal());
  $("latest").addEventListener("click", () => state.transcript && state.transcript.latest());
  for (const tab of ["transcript", "evidence", "fountain"]) {
    $(`tab-${tab}`).addEventListener("click", () => selectTab(tab));
  }
  document.addEventListener("keydown", onKey);
  document.addEventListener("click", (event) => {
    const pop = $("meta-pop");
    const target = event.target;
    if (!(target instanceof Element)) return;
    if (!pop.hidden && !pop.contains(target) && !target.closest(".info")) hideMeta();
  });
  window.addEventListener("hashchange", route);
  /** @type {any} */ (window).agenttrail = {
    state,
    dropLive: () => state.feed && state.feed.drop(),
    feedStats: () => (state.feed ? { ...state.feed.stats, lastSeq: state.feed.lastSeq } : null),
    drawnRows: () => (state.transcript ? state.transcript.drawnRows() : 0),
  };
  loadSessions().then(route);
}

start();
