// Shared by every page: navigation, the data API client, formatting, the router client.
// Plain ES module, no build step.

const PAGES = [
  ["tokens", "/explorer", "Tokens"],
  ["swap", "/explorer/swap", "Swap"],
  ["oracle", "/explorer/oracle", "Oracle"],
  ["lending", "/explorer/lending", "Lending"],
  ["broadcast", "/explorer/broadcast", "Broadcast status"],
  ["docs", "/docs", "API docs"],
];

export function nav(current) {
  const el = document.getElementById("nav");
  el.innerHTML =
    `<a class="brand" href="/explorer"><img src="/explorer/static/ladle.svg" alt="" width="20" height="20"> ladle</a>` +
    PAGES.map(([key, href, label]) => `<a href="${href}"${key === current ? ' class="current"' : ""}>${label}</a>`).join("") +
    `<span id="status" class="status" hidden></span>`;
}

/** One line at the top when a service is down; cleared by the next success. */
const problems = new Map();
export function setProblem(key, message) {
  if (message) problems.set(key, message);
  else problems.delete(key);
  const el = document.getElementById("status");
  if (!el) return;
  el.hidden = problems.size === 0;
  el.textContent = [...problems.values()].join(" · ");
}

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/** GET a data API path; a network failure marks the data API as down (until a later success). */
export async function api(path) {
  let response;
  try {
    response = await fetch(path, { headers: { Accept: "application/json" } });
  } catch (err) {
    setProblem("rest", "data API unreachable, retrying");
    throw new ApiError(0, "unreachable", "the data API cannot be reached");
  }
  if (response.status >= 500) setProblem("rest", `data API answered ${response.status}, retrying`);
  else setProblem("rest", null);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body && body.error ? body.error : { code: String(response.status), message: response.statusText };
    throw new ApiError(response.status, error.code, error.message);
  }
  return body;
}

let configPromise = null;
export function loadConfig() {
  if (!configPromise) configPromise = api("/explorer/config.json").catch((err) => { configPromise = null; throw err; });
  return configPromise;
}

export function esc(value) {
  return String(value ?? "").replace(/[&<>"']/g, (c) => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" })[c]);
}

export function short(hex, n = 8) {
  return hex ? `${hex.slice(0, n)}…${hex.slice(-4)}` : "";
}

export function fmtInt(value) {
  return value === null || value === undefined ? "–" : BigInt(value).toLocaleString("en-US");
}

export function fmtNum(value, digits = 6) {
  if (value === null || value === undefined) return "–";
  const n = Number(value);
  if (n !== 0 && Math.abs(n) < 10 ** -digits) return n.toExponential(3);
  return n.toLocaleString("en-US", { maximumSignificantDigits: digits });
}

export function fmtBch(sats) {
  if (sats === null || sats === undefined) return "–";
  return `${(Number(sats) / 1e8).toLocaleString("en-US", { maximumFractionDigits: 8 })} BCH`;
}

/** A token amount in base units shown with its registry decimals. */
export function fmtTokens(amount, decimals = 0) {
  if (amount === null || amount === undefined) return "–";
  if (!decimals) return fmtInt(amount);
  const n = BigInt(amount);
  const neg = n < 0n;
  const s = (neg ? -n : n).toString().padStart(decimals + 1, "0");
  const whole = BigInt(s.slice(0, -decimals)).toLocaleString("en-US");
  const frac = s.slice(-decimals).replace(/0+$/, "");
  return `${neg ? "-" : ""}${whole}${frac ? "." + frac : ""}`;
}

export function fmtTime(ts) {
  if (!ts) return "–";
  return new Date(ts * 1000).toISOString().replace("T", " ").slice(0, 16) + " UTC";
}

export function tokenName(token) {
  const sym = token.display_symbol || token.bcmr?.token?.symbol;
  const name = token.display_name || token.bcmr?.name;
  return { symbol: sym || short(token.token_id, 6), name: name || "(no registry entry)" };
}

export function icon(token, size = 20) {
  const url = token.bcmr?.uris?.icon;
  if (url && /^https?:\/\//.test(url)) return `<img class="icon" src="${esc(url)}" alt="" width="${size}" height="${size}" loading="lazy">`;
  return `<span class="icon blank" style="width:${size}px;height:${size}px"></span>`;
}

/**
 * The router's WebSocket JSON-RPC: requests with promises, subscriptions with callbacks,
 * reconnecting with backoff (subscriptions are made again on the new connection), so a page
 * keeps working across a router restart.
 */
export class Router {
  constructor(url, { onState } = {}) {
    this.url = url;
    this.onState = onState || (() => {});
    this.nextId = 1;
    this.pending = new Map();
    this.subs = new Map(); // local key -> {method, params, onPush, id}
    this.delay = 500;
    this.closed = false;
    this.ready = this.connect();
  }

  connect() {
    return new Promise((resolve) => {
      const ws = new WebSocket(this.url);
      this.ws = ws;
      ws.onopen = () => {
        this.delay = 500;
        this.onState(true);
        setProblem("router", null);
        resolve();
        for (const [key, sub] of this.subs) this.resubscribe(key, sub);
      };
      ws.onmessage = (event) => this.receive(JSON.parse(event.data));
      ws.onclose = () => {
        this.onState(false);
        for (const { reject } of this.pending.values()) reject(new ApiError(0, "unreachable", "the router connection closed"));
        this.pending.clear();
        for (const sub of this.subs.values()) sub.id = null;
        if (this.closed) return;
        setProblem("router", "router unreachable, reconnecting");
        setTimeout(() => { this.ready = this.connect(); }, this.delay);
        this.delay = Math.min(this.delay * 2, 5000);
        resolve();
      };
    });
  }

  receive(msg) {
    if (msg.method && msg.params) {
      for (const sub of this.subs.values()) if (sub.id === msg.params.subscription) sub.onPush(msg.params);
      return;
    }
    const waiter = this.pending.get(msg.id);
    if (!waiter) return;
    this.pending.delete(msg.id);
    if (msg.error) waiter.reject(new ApiError(0, msg.error.code, msg.error.message));
    else waiter.resolve(msg.result);
  }

  async call(method, params) {
    await this.ready;
    if (!this.ws || this.ws.readyState !== WebSocket.OPEN) throw new ApiError(0, "unreachable", "the router cannot be reached");
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ id, method, params }));
    });
  }

  async resubscribe(key, sub) {
    try {
      const result = await this.call(sub.method, sub.params);
      if (this.subs.get(key) === sub) sub.id = result.subscription;
      else this.call(sub.method.replace("subscribe", "unsubscribe"), { subscription: result.subscription }).catch(() => {});
    } catch (err) {
      sub.onPush({ error: { code: err.code, message: err.message } });
    }
  }

  /** Subscribe (again after reconnects); returns a function that ends the subscription. */
  subscribe(method, params, onPush) {
    const key = Symbol(method);
    const sub = { method, params, onPush, id: null };
    this.subs.set(key, sub);
    this.resubscribe(key, sub);
    return () => {
      this.subs.delete(key);
      if (sub.id) this.call(method.replace("subscribe", "unsubscribe"), { subscription: sub.id }).catch(() => {});
    };
  }
}

/** Human sentences for the router's error codes (docs/router.md, Errors). */
export function routerMessage(err) {
  const text = {
    route_failed: "No route: the pools cannot fill this order (unknown token, too large or too small).",
    insufficient_funds: "Insufficient funds: the wallet's coins do not cover this trade and its fees.",
    slippage: "Slippage: the price moved and the trade would deliver less than your minimum.",
    bad_request: "The request was refused",
    build_failed: "The router could not build a safe transaction.",
    rate_limited: "Too many requests; try again in a moment.",
    unreachable: "The router cannot be reached; it will be retried.",
  }[err.code];
  return text ? `${text} (${err.message})` : `${err.code}: ${err.message}`;
}
