// The token list: registry name, symbol and icon, price, 24 h volume, value locked; search.
import { api, nav, esc, fmtBch, fmtNum, fmtInt, icon, tokenName, short } from "./common.js";

nav("tokens");
const body = document.querySelector("#tokens tbody");
const errorEl = document.getElementById("error");
const search = document.getElementById("search");

function change(bp) {
  if (bp === null || bp === undefined) return '<span class="muted">–</span>';
  const pct = (bp / 100).toFixed(2);
  return `<span style="color:${bp < 0 ? "#c0392b" : "#0b6e4f"}">${bp > 0 ? "+" : ""}${pct}%</span>`;
}

function render(tokens) {
  body.innerHTML = tokens.map((t) => {
    const { symbol, name } = tokenName(t);
    return `<tr data-token="${esc(t.token_id)}">
      <td>${icon(t)}</td>
      <td><a href="/explorer/token/${esc(t.token_id)}"><b>${esc(symbol)}</b></a> <span class="muted">${esc(name)}</span><br><code class="muted">${short(t.token_id, 12)}</code></td>
      <td class="num">${fmtNum(t.price_now)}</td>
      <td class="num">${change(t.change_24h_bp)}</td>
      <td class="num">${fmtBch(t.trade_volume)}</td>
      <td class="num">${fmtBch(t.tvl_sats)}</td>
      <td class="num">${fmtInt(t.pools)}</td></tr>`;
  }).join("") || '<tr><td colspan="7" class="muted">No token matches.</td></tr>';
}

let generation = 0;
async function load() {
  const q = search.value.trim();
  const mine = ++generation;
  try {
    const tokens = q
      ? await api(`/dex/tokens/search_cached?q=${encodeURIComponent(q)}&limit=100`)
      : await api("/dex/tokens/list_cached?limit=1000");
    if (mine !== generation) return;
    errorEl.textContent = "";
    render(tokens);
    document.body.dataset.loaded = "tokens";
  } catch (err) {
    if (mine === generation) errorEl.textContent = `Could not load the tokens: ${err.message}`;
  }
}

async function totals() {
  try {
    const [tvl, volume, count] = await Promise.all([api("/dex/valuelocked"), api("/dex/volume"), api("/dex/contract/count")]);
    document.getElementById("totals").innerHTML = `
      <div class="stat"><b>${fmtBch(tvl.satoshis)}</b><span>value locked</span></div>
      <div class="stat"><b>${fmtBch(volume.total_volume_sats)}</b><span>24 h volume</span></div>
      <div class="stat"><b>${fmtInt(count.active)}</b><span>active pools</span></div>
      <div class="stat"><b>${fmtInt(count.ended)}</b><span>ended pools</span></div>`;
  } catch { /* the banner says why; the next poll retries */ }
}

let timer = null;
search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(load, 200); });
load();
totals();
setInterval(() => { load(); totals(); }, 10000);
