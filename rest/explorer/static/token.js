// A token page: candlesticks with volume (lightweight-charts), an interval switch, price
// history, the pools (sortable), the latest trades; live: a router subscription on this token
// pushes when one of its pools changes (block or mempool trade), and a slower poll catches
// the rest.
import { createChart, CandlestickSeries, HistogramSeries, LineSeries } from "lightweight-charts";
import { api, nav, esc, fmtBch, fmtNum, fmtInt, fmtTokens, fmtTime, icon, tokenName, short, loadConfig, Router } from "./common.js";

nav("tokens");
const tokenId = decodeURIComponent(location.pathname.split("/").pop());
const errorEl = document.getElementById("error");
const INTERVALS = [["5m", 300], ["15m", 900], ["1h", 3600], ["4h", 14400], ["1d", 86400]];
let stepsize = Number(new URLSearchParams(location.search).get("stepsize")) || 3600;
let decimals = 0;
let token = null;

const priceFormat = { type: "price", precision: 8, minMove: 1e-8 };
const chart = createChart(document.getElementById("chart"), { autoSize: true, layout: { attributionLogo: false }, timeScale: { timeVisible: true } });
const candles = chart.addSeries(CandlestickSeries, { priceFormat, upColor: "#0ac18e", downColor: "#e05d44", wickUpColor: "#0ac18e", wickDownColor: "#e05d44", borderVisible: false });
const volume = chart.addSeries(HistogramSeries, { priceScaleId: "volume", priceFormat: { type: "volume" }, color: "#b9c4cc" });
chart.priceScale("volume").applyOptions({ scaleMargins: { top: 0.8, bottom: 0 } });
const historyChart = createChart(document.getElementById("history"), { autoSize: true, layout: { attributionLogo: false }, timeScale: { timeVisible: true } });
const avgLine = historyChart.addSeries(LineSeries, { priceFormat, color: "#0a7fc1", lineWidth: 2 });
const maxLine = historyChart.addSeries(LineSeries, { priceFormat, color: "#9ad6c3", lineWidth: 1 });
const minLine = historyChart.addSeries(LineSeries, { priceFormat, color: "#f0b1a6", lineWidth: 1 });

// For the browser tests: what the chart was given, to compare with the API's JSON.
window.explorer = { candles: [], stepsize };

function intervalButtons() {
  document.getElementById("intervals").innerHTML = INTERVALS.map(([label, s]) =>
    `<button class="plain${s === stepsize ? " active" : ""}" data-step="${s}">${label}</button>`).join("");
}
document.getElementById("intervals").addEventListener("click", (event) => {
  const step = Number(event.target.dataset.step);
  if (!step) return;
  stepsize = step;
  history.replaceState(null, "", `?stepsize=${step}`);
  intervalButtons();
  loadChart(true);
});

async function loadHeader() {
  const [list] = await Promise.all([api(`/dex/tokens/list_cached_by_ids?ids=${tokenId}`)]);
  token = list[0] || { token_id: tokenId };
  decimals = token.bcmr?.token?.decimals || 0;
  const { symbol, name } = tokenName(token);
  document.title = `${symbol} · ladle explorer`;
  document.getElementById("title").innerHTML = `${icon(token, 28)} ${esc(symbol)} <span class="muted" style="font-size:14px">${esc(name)}</span>`;
  const [current, tvl] = await Promise.all([api(`/dex/price/${tokenId}/current`), api(`/dex/valuelocked/${tokenId}`)]);
  document.getElementById("stats").innerHTML = `
    <div class="stat"><b>${fmtNum(current.price)}</b><span>price, sats per base unit</span></div>
    <div class="stat"><b>${fmtBch(tvl.satoshis)}</b><span>value locked (BCH side)</span></div>
    <div class="stat"><b>${fmtTokens(tvl.token_amount, decimals)}</b><span>tokens locked</span></div>
    <div class="stat"><b>${fmtBch(token.trade_volume)}</b><span>24 h volume (${fmtInt(token.trade_count)} trades)</span></div>
    <div class="stat"><b><a href="/explorer/swap?buy=${tokenId}">Swap</a></b><span>trade it on the swap page</span></div>
    <div class="stat"><code>${short(tokenId, 16)}</code><span>token id</span></div>`;
}

async function loadChart(fit = false) {
  const [{ candlesticks }, { history: points }] = await Promise.all([
    api(`/dex/price/${tokenId}/candlesticks?stepsize=${stepsize}`),
    api(`/dex/price/${tokenId}/history?stepsize=${stepsize}`),
  ]);
  const data = candlesticks.map((c) => ({ time: c.time, open: c.open, high: c.high, low: c.low, close: c.close }));
  candles.setData(data);
  volume.setData(candlesticks.map((c) => ({ time: c.time, value: c.volume_sats, color: c.close >= c.open ? "#9ad6c3" : "#f0b1a6" })));
  avgLine.setData(points.map((p) => ({ time: p.time, value: p.avg })));
  maxLine.setData(points.map((p) => ({ time: p.time, value: p.max })));
  minLine.setData(points.map((p) => ({ time: p.time, value: p.min })));
  if (fit) { chart.timeScale().fitContent(); historyChart.timeScale().fitContent(); }
  document.getElementById("chart-note").textContent = `${candlesticks.length} candles of ${INTERVALS.find(([, s]) => s === stepsize)?.[0] || stepsize + " s"} over the last 30 days (intervals with no trade are omitted).`;
  window.explorer = { candles: candles.data(), stepsize };
}

let poolRows = [];
let sortKey = "sats";
let sortDesc = true;
function renderPools() {
  const rows = [...poolRows].sort((a, b) => {
    const x = a[sortKey], y = b[sortKey];
    const cmp = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
    return sortDesc ? -cmp : cmp;
  });
  document.getElementById("pool-count").textContent = `(${rows.length})`;
  document.querySelector("#pools tbody").innerHTML = rows.map((p) => `<tr data-txid="${esc(p.txid)}">
    <td><code>${esc(p.owner_p2pkh_addr)}</code></td>
    <td class="num">${fmtBch(p.sats)}</td>
    <td class="num">${fmtTokens(p.tokens, decimals)}</td>
    <td class="num">${fmtNum(p.price)}</td>
    <td><a href="/explorer/pool/${esc(p.pool_id)}"><code>${short(p.txid)}:${p.tx_pos}</code></a></td></tr>`).join("");
}
document.querySelector("#pools thead").addEventListener("click", (event) => {
  const key = event.target.dataset.key;
  if (!key) return;
  sortDesc = key === sortKey ? !sortDesc : true;
  sortKey = key;
  renderPools();
});

async function loadPools() {
  const { active } = await api(`/tokenpool/pool/active?token=${tokenId}`);
  poolRows = active.map((p) => ({ ...p, price: p.tokens ? p.sats / p.tokens : 0 }));
  renderPools();
}

async function loadTrades() {
  const trades = await api(`/dex/tx/latest?token=${tokenId}&limit=25`);
  document.querySelector("#trades tbody").innerHTML = trades.map((t) => `<tr data-txid="${esc(t.txid)}" class="${t.height ? "" : "mempool"}">
    <td>${t.height ? fmtTime(t.timestamp_guess) : "<b>mempool</b>"}</td>
    <td>${esc(t.direction)}</td>
    <td class="num">${fmtBch(t.volume_sats)}</td>
    <td class="num">${fmtTokens(t.volume_tokens, decimals)}</td>
    <td class="num">${fmtNum(t.price)}</td>
    <td class="num">${t.pools}</td>
    <td><code title="${esc(t.txid)}">${short(t.txid)}</code></td></tr>`).join("") || '<tr><td colspan="7" class="muted">No trades yet.</td></tr>';
}

async function refresh(fit = false) {
  try {
    await Promise.all([loadHeader(), loadChart(fit), loadPools(), loadTrades()]);
    errorEl.textContent = "";
    document.body.dataset.loaded = "token";
  } catch (err) {
    errorEl.textContent = err.code === "unknown_token" || err.status === 404 || err.status === 400
      ? `Unknown token: ${err.message}`
      : `Could not load this token: ${err.message}`;
  }
}

intervalButtons();
refresh(true);
setInterval(refresh, 15000);

// Live: a route subscription on this token. Its pushes come when the router's snapshot moves
// one of this token's pools (a block, or a trade entering the mempool).
loadConfig().then((cfg) => {
  if (!cfg.router || !/^[0-9a-f]{64}$/.test(tokenId)) return;
  const router = new Router(cfg.router, { onState: (up) => { document.getElementById("live").textContent = up ? "· live" : "· reconnecting"; } });
  let first = true;
  router.subscribe("route.subscribe", { sell: "bch", buy: tokenId, amount: "100000" }, () => {
    if (first) { first = false; return; }
    refresh();
  });
}).catch(() => {});
