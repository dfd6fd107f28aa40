// DOM helpers. Text from the log only ever becomes text nodes or attribute values: this file
// and its callers never assign HTML (tests/server/test_viewer.py scans the static files for that).

/**
 * Make an element. `attrs`: `class`, `dataset`, `on<event>` listeners, other attributes
 * (true → present, false/null/undefined → absent). Children: nodes, or anything else as text.
 */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key === "class") el.className = value;
    else if (key === "dataset") Object.assign(el.dataset, value);
    else if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else el.setAttribute(key, value === true ? "" : String(value));
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const numberFormat = new Intl.NumberFormat();

/** 17915 → "17,915" in the reader's locale; null → "—". */
export function count(n) {
  return n === null || n === undefined ? "—" : numberFormat.format(n);
}

/** Milliseconds as "850 ms", "1.2 s", "3 min 4 s"; null → "—". */
export function duration(ms) {
  if (ms === null || ms === undefined) return "—";
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60000) return `${(ms / 1000).toFixed(ms < 10000 ? 1 : 0)} s`;
  const minutes = Math.floor(ms / 60000);
  return `${minutes} min ${Math.round((ms % 60000) / 1000)} s`;
}

/** An RFC 3339 time as the reader's local "HH:MM:SS". */
export function clock(iso) {
  const d = new Date(iso);
  if (Number.isNaN(d.getTime())) return iso || "";
  return d.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", second: "2-digit", hour12: false });
}

/** An RFC 3339 time as the reader's local date and time. */
export function when(iso) {
  const d = new Date(iso);
  if (!iso || Number.isNaN(d.getTime())) return iso || "";
  return d.toLocaleString([], { dateStyle: "medium", timeStyle: "short" });
}

/** The first `n` characters of a hex hash, for display (the whole one goes in a title). */
export function short(hash, n = 12) {
  return hash ? hash.slice(0, n) : "";
}

/** Offer text as a download (a Blob URL: works offline, needs no token in a URL). */
export function download(name, text, type) {
  const url = URL.createObjectURL(new Blob([text], { type }));
  const link = h("a", { href: url, download: name, hidden: true });
  document.body.append(link);
  link.click();
  link.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10000);
}

/** A safe file name from a session id (ids may hold ":" or "/"). */
export function fileName(id) {
  return String(id).replace(/[^\w.-]+/g, "_");
}

/** True when keyboard focus is in a text field (keys then type, they do not navigate). */
export function typing(event) {
  const el = event.target;
  return (
    el instanceof HTMLElement &&
    (el.isContentEditable || ["INPUT", "TEXTAREA", "SELECT"].includes(el.tagName))
  );
}
