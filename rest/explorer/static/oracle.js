// Oracle feeds: the closest price and a month of history (last update per hour), in USD.
import { createChart, LineSeries } from "lightweight-charts";
import { api, nav, esc, fmtTime, short, loadConfig } from "./common.js";

nav("oracle");
const $ = (id) => document.getElementById(id);
const chart = createChart($("chart"), { autoSize: true, layout: { attributionLogo: false }, timeScale: { timeVisible: true } });
const line = chart.addSeries(LineSeries, { color: "#0a7fc1", lineWidth: 2, priceFormat: { type: "price", precision: 2, minMove: 0.01 } });

async function show(feed) {
  if (!/^[0-9a-f]{64}$/.test(feed)) { $("error").textContent = "A feed is a 64-hex token id."; return; }
  history.replaceState(null, "", `?feed=${feed}`);
  try {
    const closest = await api(`/oracle/feed/closest?token_id=${feed}`);
    const start = Math.floor(Date.now() / 1000) - 30 * 86400;
    const updates = await api(`/oracle/feed/${feed}/history?start=${start}&stepsize=3600`);
    $("error").textContent = closest ? "" : "No price from this feed has been indexed.";
    $("stats").innerHTML = closest ? `
      <div class="stat"><b>$${(closest.oracle_price / 100).toFixed(2)}</b><span>latest price</span></div>
      <div class="stat"><b>${fmtTime(closest.oracle_timestamp)}</b><span>published</span></div>
      <div class="stat"><b>${closest.oracle_sequence}</b><span>sequence</span></div>` : "";
    line.setData(updates.map((u) => ({ time: u.time, value: u.price / 100 })));
    chart.timeScale().fitContent();
    $("updates").querySelector("tbody").innerHTML = updates.slice(-25).reverse().map((u) => `<tr>
      <td>${fmtTime(u.time)}</td><td class="num">$${(u.price / 100).toFixed(2)}</td><td class="num">${u.sequence}</td>
      <td><code>${short(u.txid)}</code></td></tr>`).join("") || '<tr><td colspan="4" class="muted">No updates in the last 30 days.</td></tr>';
    document.body.dataset.loaded = "oracle";
  } catch (err) {
    $("error").textContent = `Could not load this feed: ${err.message}`;
  }
}

async function init() {
  let feeds = [];
  try { feeds = (await loadConfig()).oracle_feeds || []; } catch { /* manual entry still works */ }
  $("feed").innerHTML = feeds.map((f, i) => `<option value="${esc(f)}">${i === 0 ? "BCH/USD (devnet) · " : ""}${short(f, 12)}</option>`).join("");
  const wanted = new URLSearchParams(location.search).get("feed") || feeds[0];
  if (wanted) { $("feed").value = wanted; show(wanted); }
  $("feed").addEventListener("change", () => show($("feed").value));
  $("feed-id").addEventListener("change", () => show($("feed-id").value.trim().toLowerCase()));
}

init();
