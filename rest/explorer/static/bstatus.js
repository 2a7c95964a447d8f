// The broadcast API's status record: fetch, render (every node's verdict), poll until decided.
import { esc, fmtTime, ApiError, setProblem } from "./common.js";

export async function fetchStatus(base, txid) {
  let response;
  try {
    response = await fetch(`${base}/broadcast/status/${txid}`);
  } catch {
    setProblem("broadcast", "broadcast API unreachable, retrying");
    throw new ApiError(0, "unreachable", "the broadcast API cannot be reached");
  }
  setProblem("broadcast", null);
  const body = await response.json().catch(() => null);
  if (!response.ok) {
    const error = body?.error || { code: String(response.status), message: response.statusText };
    throw new ApiError(response.status, error.code, error.message);
  }
  return body;
}

export function renderStatus(record) {
  const nodes = record.nodes || [];
  return `<dl class="kv">
    <dt>txid</dt><dd><code id="status-txid">${esc(record.txid)}</code></dd>
    <dt>status</dt><dd><b id="status-value" class="${record.status === "accepted" ? "" : "muted"}">${esc(record.status)}</b></dd>
    <dt>nodes reached</dt><dd>${record.nodes_reached} of ${record.nodes_total} (estimated reach ${(record.estimated_network_reach * 100).toFixed(0)}%)</dd>
    <dt>first submitted</dt><dd>${fmtTime(record.timestamp)}</dd>
    <dt>confirmations</dt><dd>${record.confirmations ?? "none yet"}${record.block_height ? ` (block ${record.block_height})` : ""}</dd>
  </dl>
  <table style="margin-top:10px"><thead><tr><th>Node</th><th>Verdict</th><th>Reason</th><th>Message</th><th class="num">ms</th></tr></thead><tbody>
  ${nodes.map((n) => `<tr><td><code>${esc(n.node)}</code></td><td>${esc(n.state)}</td><td>${esc(n.reason ?? "")}</td><td>${esc(n.message ?? "")}</td><td class="num">${n.elapsed_ms ?? ""}</td></tr>`).join("")}
  </tbody></table>`;
}

/** Poll until the record leaves `broadcasting`/`pending` (or time runs out), rendering each. */
export async function follow(base, txid, el, { seconds = 30 } = {}) {
  const until = Date.now() + seconds * 1000;
  let record = null;
  while (Date.now() < until) {
    try {
      record = await fetchStatus(base, txid);
      el.innerHTML = renderStatus(record);
      if (record.status === "accepted" || record.status === "rejected") return record;
    } catch (err) {
      if (err.code !== "unreachable" && err.code !== "TRANSACTION_NOT_FOUND") throw err;
    }
    await new Promise((r) => setTimeout(r, 1000));
  }
  return record;
}
