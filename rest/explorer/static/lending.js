// Lending (v11): protocol statistics, active loans and the action history.
import { api, nav, esc, fmtBch, fmtInt, fmtTime, short } from "./common.js";

nav("lending");
const $ = (id) => document.getElementById(id);
const usd = (cents) => (cents === null || cents === undefined ? "–" : `$${(cents / 100).toLocaleString("en-US", { minimumFractionDigits: 2 })}`);

async function load() {
  try {
    const [stats, loans, actions] = await Promise.all([api("/lending/v11/stats"), api("/lending/v11/loans/active"), api("/lending/v11/history?limit=50")]);
    $("stats").innerHTML = `
      <div class="stat"><b>${fmtInt(stats.loans)}</b><span>active loans</span></div>
      <div class="stat"><b>${fmtBch(stats.collateral)}</b><span>collateral</span></div>
      <div class="stat"><b>${usd(stats.debt)}</b><span>debt (principal ${usd(stats.principal)})</span></div>
      <div class="stat"><b>${usd(stats.oracle_price)}</b><span>oracle BCH price</span></div>
      <div class="stat"><b>${stats.rate_bp === null || stats.rate_bp === undefined ? "–" : (stats.rate_bp / 100).toFixed(2) + "%"}</b><span>base rate</span></div>
      <div class="stat"><b>${fmtInt(stats.redeemable)}</b><span>redeemable</span></div>`;
    $("loans").querySelector("tbody").innerHTML = loans.map((l) => `<tr>
      <td><code>${short(l.borrower_hash, 16)}</code></td><td class="num">${fmtBch(l.collateral)}</td><td class="num">${usd(l.principal)}</td>
      <td class="num">${(l.rate_bp / 100).toFixed(2)}%</td><td>${fmtTime(l.loan_ts)}</td><td><code>${short(l.txid)}:${l.vout}</code></td></tr>`).join("")
      || '<tr><td colspan="6" class="muted">No active loan.</td></tr>';
    $("actions").querySelector("tbody").innerHTML = actions.map((a) => `<tr>
      <td>${fmtTime(a.time)}</td><td>${esc(a.kind)}</td><td><code>${short(a.borrower_hash, 16)}</code></td>
      <td class="num">${fmtBch(a.collateral_after ?? a.collateral_before)}</td><td class="num">${usd(a.principal_after ?? a.principal_before)}</td>
      <td><code>${short(a.txid)}</code></td></tr>`).join("") || '<tr><td colspan="6" class="muted">No lending activity.</td></tr>';
    $("error").textContent = "";
    document.body.dataset.loaded = "lending";
  } catch (err) {
    $("error").textContent = `Could not load the lending data: ${err.message}`;
  }
}

load();
setInterval(load, 15000);
