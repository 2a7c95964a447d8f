// A pool's lineage: reserves and k over time, every state with its transaction.
import { createChart, LineSeries } from "lightweight-charts";
import { api, nav, esc, fmtBch, fmtNum, fmtTokens, fmtTime, fmtInt, short } from "./common.js";

nav("tokens");
const poolId = decodeURIComponent(location.pathname.split("/").pop());
const chart = createChart(document.getElementById("chart"), { autoSize: true, layout: { attributionLogo: false }, timeScale: { timeVisible: true } });
const satsLine = chart.addSeries(LineSeries, { color: "#0ac18e", lineWidth: 2, priceFormat: { type: "price", precision: 8, minMove: 1e-8 } });
const kLine = chart.addSeries(LineSeries, { color: "#0a7fc1", lineWidth: 1, priceScaleId: "left", priceFormat: { type: "volume" } });
chart.applyOptions({ leftPriceScale: { visible: true } });

/** One point per second at most: the chart needs strictly increasing times. */
function series(rows, value) {
  const out = new Map();
  for (const r of rows) out.set(r.timestamp, value(r));
  return [...out].sort((a, b) => a[0] - b[0]).map(([time, v]) => ({ time, value: v }));
}

async function load() {
  try {
    const pool = await api(`/dex/pool/history/${encodeURIComponent(poolId)}?start=0`);
    let decimals = 0, symbol = short(pool.token_id, 6);
    try {
      const [t] = await api(`/dex/tokens/list_cached_by_ids?ids=${pool.token_id}`);
      decimals = t?.bcmr?.token?.decimals || 0;
      symbol = t?.display_symbol || symbol;
    } catch { /* the pool is shown without registry data */ }
    const rows = pool.history;
    const last = rows[rows.length - 1];
    document.getElementById("title").innerHTML = `Pool of <a href="/explorer/token/${esc(pool.token_id)}">${esc(symbol)}</a>`;
    document.getElementById("stats").innerHTML = `
      <div class="stat"><b>${last ? fmtBch(last.sats) : "–"}</b><span>BCH now</span></div>
      <div class="stat"><b>${last ? fmtTokens(last.tokens, decimals) : "–"}</b><span>${esc(symbol)} now</span></div>
      <div class="stat"><b>${fmtInt(rows.length)}</b><span>states</span></div>
      <div class="stat"><code title="${esc(pool.owner_pkh)}">${esc(short(pool.owner_pkh, 16))}</code><span>owner public key hash</span></div>
      <div class="stat"><code>${esc(short(pool.pool_id, 16))}</code><span>pool id (lineage)</span></div>`;
    satsLine.setData(series(rows, (r) => r.sats / 1e8));
    kLine.setData(series(rows, (r) => Number(r.k)));
    chart.timeScale().fitContent();
    document.querySelector("#history tbody").innerHTML = [...rows].reverse().map((r) => `<tr>
      <td>${fmtTime(r.timestamp)}</td><td>${r.height ?? "mempool"}</td>
      <td class="num">${fmtBch(r.sats)}</td><td class="num">${fmtTokens(r.tokens, decimals)}</td>
      <td class="num">${fmtNum(r.tokens ? r.sats / r.tokens : null)}</td><td class="num">${fmtNum(r.k, 8)}</td>
      <td><code title="${esc(r.txid)}">${short(r.txid)}</code></td></tr>`).join("");
    document.getElementById("error").textContent = "";
    document.body.dataset.loaded = "pool";
  } catch (err) {
    document.getElementById("error").textContent = err.code === "unknown_pool" ? `Unknown pool: ${err.message}` : `Could not load the pool: ${err.message}`;
  }
}

load();
setInterval(load, 15000);
