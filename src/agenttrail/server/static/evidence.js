// Evidence: the chain check, trace rows (envelope, record hash, status), replay downloads;
// and the Fountain screenplay with its download.

import { ApiError, api, sessionPath } from "./api.js";
import { count, download, fileName, fill, h, short, when } from "./dom.js";

const TRACE_STATUS = {
  verified: ["ok", "the envelope's record hash recomputes to the one it states"],
  mismatch: ["error", "the record hash the envelope states differs from the one recomputed"],
  computed: ["neutral", "the envelope states no record hash; it was computed at write time"],
  invalid: ["error", "the envelope could not be hashed"],
};

function chainSection(verdict) {
  const ok = verdict.ok;
  return h(
    "section",
    { class: `evidence-block ${ok ? "good" : "bad"}`, id: "chain-verdict" },
    h("h3", null, ok ? "✓ Chain verified" : "✗ Chain check failed"),
    h(
      "p",
      null,
      ok
        ? `All ${count(verdict.events)} events recompute to the stored hashes, and every trace row matches the log.`
        : verdict.bad_seq
          ? `The first event that does not verify is seq ${verdict.bad_seq}: ${verdict.reason}`
          : "The chain verifies, but trace rows do not match the log:",
    ),
    verdict.trace_problems && verdict.trace_problems.length ? h("ul", null, verdict.trace_problems.map((p) => h("li", null, p))) : null,
    h("p", { class: "muted small" }, ok ? "Head hash " : "Last good hash ", h("code", { class: "hash" }, verdict.head)),
  );
}

function replaySection(session) {
  const select = h(
    "select",
    { id: "replay-format", "aria-label": "Replay format" },
    h("option", { value: "openai" }, "OpenAI Chat Completions"),
    h("option", { value: "anthropic" }, "Anthropic Messages"),
    h("option", { value: "responses" }, "OpenAI Responses"),
  );
  const status = h("span", { class: "muted small", role: "status" });
  const button = h(
    "button",
    {
      type: "button",
      id: "replay-download",
      onclick: async () => {
        status.textContent = "Rebuilding…";
        try {
          const body = await api(sessionPath(session.id, `/replay?format=${select.value}`));
          download(`${fileName(session.id)}.replay-${select.value}.json`, `${JSON.stringify(body, null, 2)}\n`, "application/json");
          status.textContent = `${count((body.messages || body.input || []).length)} messages, ${count(body.notes.length)} notes`;
        } catch (error) {
          status.textContent = `Could not rebuild: ${error.message}`;
        }
      },
    },
    "↓ Download replay JSON",
  );
  return h(
    "section",
    { class: "evidence-block" },
    h("h3", null, "Replay"),
    h("p", { class: "muted small" }, "The message list a model gets for this session, rebuilt from the log."),
    h("div", { class: "inline" }, select, button, status),
  );
}

function traceRow(row, ctx) {
  const [tone, meaning] = TRACE_STATUS[row.status] || ["neutral", row.status];
  const detailRow = h("tr", { class: "trace-detail", hidden: true }, h("td", { colspan: "6" }));
  const toggle = h(
    "button",
    {
      type: "button",
      class: "link",
      "aria-expanded": "false",
      onclick: async () => {
        const open = detailRow.hidden;
        detailRow.hidden = !open;
        toggle.setAttribute("aria-expanded", String(open));
        if (open) await loadEnvelope(row, detailRow.firstChild);
      },
    },
    "Envelope",
  );
  return [
    h(
      "tr",
      { dataset: { trace: String(row.id) } },
      h("td", null, String(row.id)),
      h("td", null, h("code", null, row.tool)),
      h(
        "td",
        null,
        h("button", { type: "button", class: "link", onclick: () => ctx.reveal(row.call_seq) }, `call ${row.call_seq}`),
        " → ",
        h("button", { type: "button", class: "link", onclick: () => ctx.reveal(row.result_seq) }, `result ${row.result_seq}`),
      ),
      h("td", null, h("span", { class: `pill pill--${tone}`, title: meaning }, row.status)),
      h(
        "td",
        null,
        h("code", { class: "hash", title: row.record_hash || "" }, short(row.record_hash, 16) || "—"),
        row.stated_hash && row.stated_hash !== row.record_hash
          ? h("div", { class: "small" }, "stated ", h("code", { class: "hash", title: row.stated_hash }, short(row.stated_hash, 16)))
          : null,
      ),
      h("td", null, toggle),
    ),
    detailRow,
  ];
}

async function loadEnvelope(row, cell) {
  fill(cell, h("p", { class: "muted small" }, "Loading the envelope…"));
  try {
    const full = await api(`/v1/traces/${row.id}`);
    fill(
      cell,
      h("p", { class: "small" }, [full.detail, `written ${when(full.created_at)}`].filter(Boolean).join(" · ")),
      h("h4", null, "Call as issued (inputs)"),
      h("pre", null, full.inputs),
      h("h4", null, "Envelope, verbatim"),
      h("pre", { class: "envelope" }, full.envelope),
      h("p", { class: "small" }, "Record hash ", h("code", { class: "hash" }, full.record_hash || "—")),
    );
  } catch (error) {
    const text =
      error instanceof ApiError && error.status === 403
        ? "Reading envelopes needs a token with the audit right."
        : `Could not load the envelope: ${error.message}`;
    fill(cell, h("p", { class: "error-text" }, text));
  }
}

function tracesSection(rows, ctx) {
  if (!rows.length) {
    return h("section", { class: "evidence-block" }, h("h3", null, "Trace rows"), h("p", { class: "muted small" }, "No tool call in this session returned a response envelope."));
  }
  return h(
    "section",
    { class: "evidence-block" },
    h("h3", null, `Trace rows (${count(rows.length)})`),
    h(
      "div",
      { class: "table-wrap" },
      h(
        "table",
        { class: "traces" },
        h("thead", null, h("tr", null, ["#", "tool", "seqs", "status", "record hash", ""].map((t) => h("th", { scope: "col" }, t)))),
        h("tbody", null, rows.map((r) => traceRow(r, ctx))),
      ),
    ),
  );
}

/** Fill the evidence panel of ctx.session (checked afresh each time it opens). */
export async function renderEvidence(el, ctx) {
  const session = ctx.session;
  fill(el, h("p", { class: "muted" }, "Verifying the chain…"));
  try {
    const [verdict, traces] = await Promise.all([api(sessionPath(session.id, "/verify")), api(sessionPath(session.id, "/traces"))]);
    fill(el, chainSection(verdict), tracesSection(traces, ctx), replaySection(session));
  } catch (error) {
    fill(el, h("p", { class: "error-text" }, `Could not check the evidence: ${error.message}`));
  }
}

/** Fill the Fountain panel: the screenplay as text, and a download. */
export async function renderFountain(el, ctx) {
  const session = ctx.session;
  fill(el, h("p", { class: "muted" }, "Writing the screenplay…"));
  try {
    const text = await api(sessionPath(session.id, "/fountain"), { text: true });
    fill(
      el,
      h(
        "div",
        { class: "inline" },
        h("button", { type: "button", id: "fountain-download", onclick: () => download(`${fileName(session.id)}.fountain`, text, "text/plain") }, "↓ Download .fountain"),
        h("span", { class: "muted small" }, `${count(text.split("\n").length)} lines, Harvey session format`),
      ),
      h("pre", { class: "fountain-text" }, text),
    );
  } catch (error) {
    fill(el, h("p", { class: "error-text" }, `Could not write the screenplay: ${error.message}`));
  }
}
