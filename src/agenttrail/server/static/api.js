// The server's API: the bearer token, JSON requests, and the live feed with resume.

const TOKEN_KEY = "agenttrail.token";

/** Move `#token=…` from the address into sessionStorage, so it is not left in the URL. */
export function takeTokenFromAddress() {
  const params = new URLSearchParams(location.hash.slice(1));
  const token = params.get("token");
  if (token) {
    sessionStorage.setItem(TOKEN_KEY, token);
    params.delete("token");
    const rest = params.toString();
    history.replaceState(null, "", location.pathname + location.search + (rest ? `#${rest}` : ""));
  }
}

export function token() {
  return sessionStorage.getItem(TOKEN_KEY) || "";
}

export function setToken(value) {
  sessionStorage.setItem(TOKEN_KEY, value.trim());
}

/** An HTTP error with the server's RFC 9457 problem details. */
export class ApiError extends Error {
  constructor(status, problem) {
    super(problem.detail || problem.title || `HTTP ${status}`);
    this.status = status;
    this.problem = problem;
  }
}

/**
 * A request to the API: JSON in and out (or text with `text: true`).
 * @param {string} path
 * @param {{method?: string, body?: unknown, text?: boolean}} [options]
 */
export async function api(path, { method = "GET", body, text = false } = {}) {
  const headers = { Authorization: `Bearer ${token()}` };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  if (!response.ok) {
    let problem = {};
    try {
      problem = await response.json();
    } catch {
      problem = { detail: response.statusText };
    }
    throw new ApiError(response.status, problem);
  }
  return text ? response.text() : response.json();
}

/** `/v1/sessions/{id}` + rest, with the id escaped. */
export function sessionPath(id, rest = "") {
  return `/v1/sessions/${encodeURIComponent(id)}${rest}`;
}

const REFUSED = new Map([
  [4401, "the token is missing, forged or expired"],
  [4403, "the token does not grant reading this session"],
  [4404, "the session does not exist"],
  [4422, "the request was malformed"],
]);
const RESUME = 4408; // the server's "you fell behind: reconnect from your last seq"

/**
 * The live feed of one session (docs/server.md, Live delivery). It subscribes with
 * `afterSeq` = the last seq it has seen and, after any drop, subscribes again from there:
 * the server sends every durable event after that seq once and in order, and this side drops
 * any seq it has already seen, so the page gets no gap and no duplicate.
 *
 * Handlers: onAppend(message), onPartial(message), onState(state, detail) where state is
 * "connecting" | "live" | "reconnecting" | "refused" | "closed".
 */
export class LiveFeed {
  constructor(sessionId, afterSeq, handlers) {
    this.sessionId = sessionId;
    this.lastSeq = afterSeq;
    this.handlers = handlers;
    this.socket = null;
    this.retries = 0;
    this.timer = null;
    this.stopped = false;
    this.stats = { connects: 0, drops: 0, duplicates: 0, gaps: 0, closes: [] };
  }

  start() {
    this.connect();
    return this;
  }

  connect() {
    if (this.stopped) return;
    const scheme = location.protocol === "https:" ? "wss:" : "ws:";
    const query = new URLSearchParams({ afterSeq: String(this.lastSeq), token: token() });
    const url = `${scheme}//${location.host}${sessionPath(this.sessionId, "/live")}?${query}`;
    const socket = new WebSocket(url);
    this.socket = socket;
    this.stats.connects += 1;
    this.handlers.onState("connecting");
    socket.addEventListener("open", () => {
      this.retries = 0;
      this.handlers.onState("live");
    });
    socket.addEventListener("message", (event) => this.receive(JSON.parse(event.data)));
    socket.addEventListener("close", (event) => this.closed(socket, event));
  }

  receive(message) {
    if (message.type === "append") {
      if (message.seq <= this.lastSeq) {
        this.stats.duplicates += 1; // already seen before a reconnect: drop it
        return;
      }
      if (message.seq !== this.lastSeq + 1) this.stats.gaps += 1; // never expected
      this.lastSeq = message.seq;
      this.handlers.onAppend(message);
    } else if (message.type === "appendPartial") {
      this.handlers.onPartial(message);
    }
  }

  closed(socket, event) {
    if (socket !== this.socket) return;
    this.socket = null;
    this.stats.closes.push(event.code);
    if (this.stopped) {
      this.handlers.onState("closed");
      return;
    }
    if (REFUSED.has(event.code)) {
      this.handlers.onState("refused", REFUSED.get(event.code));
      return;
    }
    this.stats.drops += 1;
    // 4408 asks for an immediate resume; anything else backs off 0.25 s, 0.5 s … 5 s.
    const delay = event.code === RESUME ? 0 : Math.min(5000, 250 * 2 ** this.retries);
    this.retries += 1;
    this.handlers.onState("reconnecting", event.code === RESUME ? "caught up after falling behind" : "");
    this.timer = setTimeout(() => this.connect(), delay);
  }

  /** Drop the connection as a network failure would; the feed resumes on its own. */
  drop() {
    if (this.socket) this.socket.close(4000, "dropped by the page");
  }

  stop() {
    this.stopped = true;
    clearTimeout(this.timer);
    if (this.socket) this.socket.close(1000, "page closed the session");
  }
}
