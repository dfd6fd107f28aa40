// The sessions list's items: title, facts, totals (events, tokens, cost) and marks (anomalies,
// chain, live), from GET /v1/sessions and GET /v1/summaries; and the usage figures the
// session header shares with them.

import { count, h, when } from "./dom.js";

/** 40 → "40 events". */
export function events(n) {
  return `${count(n)} event${n === 1 ? "" : "s"}`;
}

const compact = new Intl.NumberFormat(undefined, { notation: "compact", maximumFractionDigits: 1 });

/** A session's usage as `{tokens, cost, short, title}`: every token kind summed, the cost as the
 * server words it, `short` as the list shows it (shortCost), the split in the title, a kind
 * some calls did not report marked `+ ?` as the terminal marks it; null with no model call. */
export function usageTotals(usage) {
  if (!usage || !usage.calls) return null;
  const kinds = Object.entries(usage.tokens).filter(([, n]) => n !== null);
  const tokens = kinds.reduce((sum, [, n]) => sum + n, 0);
  const sources = usage.cost_sources.length ? ` (${usage.cost_sources.join(", ")})` : "";
  const unknown = usage.tokens_unknown_calls || {};
  const split = kinds.map(([k, n]) => `${count(n)}${unknown[k] ? " + ?" : ""} ${k.replace("_", " ")}`);
  const title = `${count(usage.calls)} model call${usage.calls === 1 ? "" : "s"}: ${split.join(", ")}; cost ${usage.cost_text}${sources}`;
  return { tokens, cost: usage.cost_text, short: shortCost(usage), title };
}

/** A fully priced cost in one currency to the cent ("$0.23", "<$0.01"); else the server's
 * words ("unknown", or a known part and "unknown"), never 0 for an unpriced call. */
function shortCost(usage) {
  const amounts = Object.entries(usage.cost || {});
  if (usage.cost_unknown_calls || amounts.length !== 1) return usage.cost_text;
  const [currency, amount] = amounts[0];
  const money = new Intl.NumberFormat(undefined, { style: "currency", currency, maximumFractionDigits: 2 });
  return amount > 0 && amount < 0.01 ? `<${money.format(0.01)}` : money.format(amount);
}

/** The list's one line of totals and marks: events, tokens, cost, anomalies, chain, live. */
export function summaryBadges(session, summary) {
  const totals = [h("span", { class: "s-total", title: events(session.events) }, `${compact.format(session.events)} ev`)];
  if (!summary) return [...totals, h("span", { class: "badge muted" }, "checking…")];
  const usage = usageTotals(summary.usage);
  if (usage) {
    totals.push(h("span", { class: "s-total s-tokens", title: usage.title }, `${compact.format(usage.tokens)} tok`));
    totals.push(h("span", { class: "s-total s-cost", title: usage.title }, usage.short));
  }
  const chain = summary.chain;
  return [
    ...totals,
    summary.anomalies
      ? h("span", { class: "badge badge--warn", title: Object.entries(summary.anomaly_kinds).map(([k, n]) => `${k}: ${n}`).join(", ") }, `⚠ ${count(summary.anomalies)}`)
      : null,
    chain.ok
      ? h("span", { class: "badge badge--ok", title: `chain verified; head ${chain.head}` }, "✓")
      : h("span", { class: "badge badge--bad", title: chain.reason || chain.trace_problems.join("; ") }, chain.bad_seq ? `✗ chain broken at seq ${chain.bad_seq}` : "✗ evidence problem"),
    summary.live ? liveBadge("s-live") : null,
  ];
}

/** "● live": a turn holds the session's turn lock, or its last event is recent
 * (agenttrail.views.liveness; docs/viewer.md, Live). */
export function liveBadge(cls, id) {
  return h("span", { class: `badge badge--ok ${cls}`, id, title: "Something is writing this session: a turn in flight, or an event in the last five minutes" }, "● live");
}

/**
 * One session of the list: its title, facts and totals, and its marks.
 * @param {any} s the session (GET /v1/sessions)
 * @param {{current: string | null, summary: any, open: (id: string) => void}} ctx
 */
export function sessionItem(s, ctx) {
  return h(
    "li",
    null,
    h(
      "button",
      {
        class: "session-item",
        type: "button",
        dataset: { id: s.id },
        title: s.title || s.id,
        "aria-current": ctx.current === s.id ? "true" : false,
        onclick: () => ctx.open(s.id),
      },
      h("span", { class: "s-title" }, s.title || "(untitled session)"),
      h(
        "span",
        { class: "s-line" },
        h("span", { class: "s-facts" }, [s.agent, s.user, when(s.started)].filter(Boolean).join(" · ")),
        h("span", { class: "s-counts" }, summaryBadges(s, ctx.summary)),
      ),
    ),
  );
}
