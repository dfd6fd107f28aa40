// The compare view: two sessions aligned step by step (a message, a tool call, a tool result),
// turn by turn, with the first place they part highlighted and what changed there.
// The alignment is the library's (GET …/diff/{b}?align=true, agenttrail.views.diff), never
// recomputed here.

import { api, sessionPath } from "./api.js";
import { count, fill, h } from "./dom.js";

const LABELS = { same: "alike", changed: "changed", only_a: "only in A", only_b: "only in B" };

/**
 * Draw the comparison of sessions `a` and `b` into `el`.
 * @param {HTMLElement} el
 * @param {{a: string, b: string, titles: Map<string, string>, open: (id: string, seq: number) => void}} ctx
 */
export async function renderCompare(el, ctx) {
  fill(el, h("p", { class: "muted" }, "Comparing…"));
  let body;
  try {
    body = await api(sessionPath(ctx.a, `/diff/${encodeURIComponent(ctx.b)}?align=true`));
  } catch (error) {
    fill(el, h("p", { class: "error-text" }, `Cannot compare: ${error.message}`));
    return;
  }
  const name = (id) => ctx.titles.get(id) || id;
  let firstSeen = false;
  const blocks = body.alignment.map((block) => {
    const first = block.tag !== "same" && !firstSeen;
    firstSeen = firstSeen || first;
    return blockView(block, first, ctx);
  });
  fill(
    el,
    h(
      "header",
      { class: "compare-head" },
      h("h2", null, "Compare two sessions"),
      h(
        "div",
        { class: "compare-sides" },
        sideTitle("A", ctx.a, name(ctx.a), body.steps.a, ctx),
        sideTitle("B", ctx.b, name(ctx.b), body.steps.b, ctx),
      ),
      h("p", { id: "compare-verdict", class: body.identical ? "compare-verdict ok" : "compare-verdict" }, verdict(body)),
      body.first ? changedView(body.alignment.find((block) => block.tag !== "same")) : null,
    ),
    h("div", { class: "compare-grid", role: "table", "aria-label": "The two sessions, step by step" }, blocks),
  );
  const first = el.querySelector("#first-divergence");
  if (first) first.scrollIntoView({ block: "center" });
}

function sideTitle(letter, id, title, steps, ctx) {
  return h(
    "div",
    { class: "compare-side" },
    h("span", { class: "compare-letter" }, letter),
    h("button", { class: "link", type: "button", onclick: () => ctx.open(id, 0) }, title),
    h("span", { class: "muted small" }, ` · ${count(steps)} step${steps === 1 ? "" : "s"} · `, h("code", null, id)),
  );
}

function verdict(body) {
  if (body.identical) return `Identical: all ${count(body.same)} steps alike.`;
  const first = body.first;
  const where = (side, letter) => (side ? `${letter}'s ${side.step} (seq ${side.seqs[0]}, turn ${side.turn})` : `nothing in ${letter}`);
  return (
    `${count(body.prefix)} step${body.prefix === 1 ? "" : "s"} alike, then they part: ` +
    `${where(first.a, "A")} against ${where(first.b, "B")}. ` +
    `${count(body.same)} steps alike in all, ${count(body.divergences.length)} place${body.divergences.length === 1 ? "" : "s"} where they differ.`
  );
}

/** What changed at the first divergence: each field, A's value beside B's. */
function changedView(block) {
  if (!block.changes.length) {
    const only = block.tag === "only_a" ? "A" : "B";
    return h("p", { class: "compare-changes muted" }, `Steps only ${only} has: ${count((block.a.length || block.b.length))}.`);
  }
  return h(
    "dl",
    { class: "compare-changes", id: "first-changes" },
    block.changes.map((change) => [
      h("dt", null, change.field),
      h("dd", null, h("div", { class: "compare-value compare-value--a" }, h("span", { class: "compare-letter" }, "A"), h("pre", null, change.a)), h("div", { class: "compare-value compare-value--b" }, h("span", { class: "compare-letter" }, "B"), h("pre", null, change.b))),
    ]),
  );
}

function stepView(step, id, ctx) {
  if (!step) return h("div", { class: "compare-step compare-step--none", role: "cell" }, "—");
  return h(
    "button",
    {
      class: "compare-step",
      type: "button",
      role: "cell",
      dataset: { seq: String(step.seq) },
      title: `Open this session at seq ${step.seq}`,
      onclick: () => ctx.open(id, step.seq),
    },
    h("span", { class: "compare-where" }, `seq ${step.seq} · turn ${step.turn} · `, h("strong", null, step.step)),
    h("span", { class: "compare-text" }, step.text + (step.text_chars > step.text.length ? "…" : "")),
  );
}

function pairs(block, ctx) {
  const n = Math.max(block.a.length, block.b.length);
  const rows = [];
  for (let k = 0; k < n; k += 1) {
    rows.push(h("div", { class: "compare-row", role: "row" }, stepView(block.a[k], ctx.a, ctx), stepView(block.b[k], ctx.b, ctx)));
  }
  return rows;
}

function blockView(block, first, ctx) {
  const tag = block.tag;
  const steps = Math.max(block.a.length, block.b.length);
  const turns = [...new Set([...block.a, ...block.b].map((s) => s.turn))];
  const span = turns.length > 1 ? `turns ${turns[0]}–${turns[turns.length - 1]}` : `turn ${turns[0]}`;
  const label = `${LABELS[tag]}: ${count(steps)} step${steps === 1 ? "" : "s"} · ${span}`;
  const cls = `compare-block compare-block--${tag}${first ? " compare-block--first" : ""}`;
  if (tag === "same") {
    return h("details", { class: cls, dataset: { tag } }, h("summary", null, `✓ ${label}`), pairs(block, ctx));
  }
  return h(
    "section",
    { class: cls, id: first ? "first-divergence" : null, dataset: { tag } },
    h("h3", null, first ? `First divergence · ${label}` : label),
    pairs(block, ctx),
  );
}
