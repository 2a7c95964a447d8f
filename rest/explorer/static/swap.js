// The swap page: a live quote over route.subscribe, a wallet in the page, tx.build, signing
// with libauth, the broadcast API and its status record.
import { api, nav, esc, fmtNum, fmtInt, fmtTokens, loadConfig, Router, routerMessage, setProblem, tokenName, short } from "./common.js";
import { keyFromWif, listCoins, signBuild } from "./wallet.js";
import { follow } from "./bstatus.js";

nav("swap");
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const BCH = { token_id: "bch", symbol: "BCH", decimals: 8 };
const assets = new Map([["bch", BCH]]);
let cfg = null;
let router = null;
let unsubscribe = null;
let quote = null;
let key = null;
let busy = false;

function asset(id) { return assets.get(id) || { token_id: id, symbol: short(id, 6), decimals: 0 }; }

/** "1.5" with 8 decimals -> "150000000"; exact (no floats). null when not a positive amount. */
export function toBase(text, decimals) {
  const match = /^\s*(\d*)(?:\.(\d*))?\s*$/.exec(text);
  if (!match || (!match[1] && !match[2])) return null;
  const frac = match[2] || "";
  if (frac.length > decimals) return null;
  const base = BigInt((match[1] || "0") + frac.padEnd(decimals, "0"));
  return base > 0n ? base.toString() : null;
}

/** side "sell": the amount is exactly what is given; "buy": exactly what is received. */
function order() {
  const sell = $("sell").value, buy = $("buy").value, side = $("side").value;
  const amount = toBase($("amount").value, asset(side === "buy" ? buy : sell).decimals);
  return { sell, buy, side, amount };
}

function amountAsset() { return asset($("side").value === "buy" ? $("buy").value : $("sell").value); }

function showQuoteError(text) { $("quote-error").textContent = text || ""; }

function renderQuote(q) {
  const sell = asset(q.sell), buy = asset(q.buy);
  const fee = q.router_fee;
  const feeText = fee && fee.amount !== "0"
    ? `${fee.asset === "bch" ? fmtTokens(fee.amount, 8) + " BCH" : fmtTokens(fee.amount, asset(fee.asset).decimals) + " " + esc(asset(fee.asset).symbol)} (${fee.bps} bps)`
    : "none";
  $("quote").innerHTML = `
    <dt>you give</dt><dd>${fmtTokens(q.input_amount, sell.decimals)} ${esc(sell.symbol)}</dd>
    <dt>you get</dt><dd><b id="quote-output">${fmtTokens(q.output_amount, buy.decimals)}</b> ${esc(buy.symbol)}</dd>
    <dt>route</dt><dd id="quote-kind">${esc(q.kind)} · ${q.pools} pool${q.pools === 1 ? "" : "s"}</dd>
    <dt>pools</dt><dd><table class="legs"><tbody>${(q.legs || []).map((l) => `<tr><td><code>${short(l.txid)}:${l.tx_pos}</code></td><td>${esc(l.direction)}</td><td class="num">${fmtInt(l.amount_in)} → ${fmtInt(l.amount_out)}</td></tr>`).join("")}</tbody></table></dd>
    <dt>price impact</dt><dd>${(q.price_impact * 100).toFixed(3)}%</dd>
    <dt>router fee</dt><dd>${feeText}</dd>
    <dt>miner fee</dt><dd>~${fmtInt(q.miner_fee_estimate_sats)} sats (${q.fee_per_byte} sat/byte, ~${fmtInt(q.estimated_size)} bytes)</dd>
    <dt>snapshot</dt><dd class="muted">height ${q.index_height}, version ${q.snapshot_version}</dd>`;
}

function resubscribe() {
  if (unsubscribe) { unsubscribe(); unsubscribe = null; }
  quote = null;
  updateButton();
  const o = order();
  if (!router) return;
  if (!assets.has(o.sell) || !assets.has(o.buy)) {
    // A token id from the URL that no pool trades: say so instead of asking the router.
    const wanted = [params.get("sell"), params.get("buy")].find((id) => id && !assets.has(id));
    showQuoteError(`Unknown token: ${wanted || "pick an asset"} has no pool here.`);
    $("quote").innerHTML = '<dt>route</dt><dd class="muted">no route</dd>';
    return;
  }
  if (o.sell === o.buy) { showQuoteError("Pick two different assets."); return; }
  if (!o.amount) {
    showQuoteError($("amount").value.trim() ? `Not an amount of ${amountAsset().symbol} (at most ${amountAsset().decimals} decimals).` : "");
    $("quote").innerHTML = '<dt>route</dt><dd class="muted">enter an amount</dd>';
    return;
  }
  history.replaceState(null, "", `?sell=${o.sell}&buy=${o.buy}&side=${o.side}&amount=${encodeURIComponent($("amount").value.trim())}`);
  $("quote").innerHTML = '<dt>route</dt><dd class="muted">routing…</dd>';
  unsubscribe = router.subscribe("route.subscribe", { sell: o.sell, buy: o.buy, side: o.side, amount: o.amount }, (push) => {
    if (push.error) {
      quote = null;
      showQuoteError(routerMessage(push.error));
      $("quote").innerHTML = '<dt>route</dt><dd class="muted">no route</dd>';
    } else {
      quote = push.result;
      showQuoteError("");
      renderQuote(quote);
      document.body.dataset.quoted = "yes";
    }
    updateButton();
  });
}

function updateButton() { $("swap").disabled = busy || !quote || !key; }

async function loadWallet() {
  $("wallet-error").textContent = "";
  key = null;
  $("address").textContent = "–";
  $("balance").textContent = "–";
  updateButton();
  const wif = $("wif").value.trim();
  if (!wif) return;
  try {
    key = keyFromWif(wif);
  } catch (err) {
    $("wallet-error").textContent = `That key cannot be used: ${err.message}.`;
    return;
  }
  $("address").textContent = key.address;
  updateButton();
  if (!cfg.electrum_ws) { $("balance").textContent = "no Electrum server configured"; return; }
  try {
    const coins = await listCoins(cfg.electrum_ws, key);
    const sats = coins.reduce((sum, c) => sum + BigInt(c.value), 0n);
    const tokens = new Map();
    for (const c of coins) if (c.token_data) tokens.set(c.token_data.category, (tokens.get(c.token_data.category) || 0n) + BigInt(c.token_data.amount));
    $("balance").innerHTML = `${fmtTokens(sats, 8)} BCH in ${coins.length} coins` +
      [...tokens].map(([cat, amt]) => `<br>${fmtTokens(amt, asset(cat).decimals)} ${esc(asset(cat).symbol)}`).join("");
  } catch (err) {
    $("balance").textContent = `cannot read the coins: ${err.message}`;
  }
}

function step(text) { $("steps").insertAdjacentHTML("beforeend", `<li>${esc(text)}</li>`); }

/** The wallet's coins as tx.build funding: BCH-only coins, and coins of the sold token. */
function funding(coins, sell) {
  return coins
    .filter((c) => !c.token_data?.nft && (!c.token_data || c.token_data.category === sell))
    .sort((a, b) => b.value - a.value)
    .slice(0, 400)
    .map((c) => {
      const input = { txid: c.tx_hash, vout: c.tx_pos, value: String(c.value), script_hex: Array.from(key.lockingBytecode, (b) => b.toString(16).padStart(2, "0")).join("") };
      if (c.token_data) input.token = { category: c.token_data.category, amount: String(c.token_data.amount) };
      return input;
    });
}

async function swap() {
  busy = true;
  updateButton();
  $("swap-error").textContent = "";
  $("swap-ok").textContent = "";
  $("steps").innerHTML = "";
  $("record").innerHTML = "";
  try {
    const o = order();
    const pct = Number($("slippage").value);
    if (!(pct >= 0 && pct < 100)) throw new Error("Slippage must be a percentage between 0 and 100.");
    const coins = await listCoins(cfg.electrum_ws, key);
    const inputs = funding(coins, o.sell);
    if (!inputs.length) throw new Error("Insufficient funds: this wallet has no usable coins.");
    step(`${inputs.length} coin${inputs.length === 1 ? "" : "s"} of ${key.address} offered as funding`);
    const request = { sell: o.sell, buy: o.buy, amount: o.amount, side: o.side, funding: inputs, receive_addr: key.tokenAddress, change_addr: key.address };
    if (o.side === "sell") {
      // The slippage floor: the quoted output less the tolerance (the router refuses below it).
      const expected = BigInt(quote.output_amount);
      request.min_output = ((expected * BigInt(Math.round((100 - pct) * 100))) / 10000n).toString();
    }
    let build;
    try {
      build = await router.call("tx.build", request);
    } catch (err) {
      throw new Error(routerMessage(err));
    }
    step(`tx.build: ${build.route.kind} route over ${build.route.pools} pools, expected ${build.expected_output}, miner fee ${build.miner_fee_sats} sats; signing inputs ${build.inputs_to_sign.join(", ")} in this page`);
    const signed = signBuild(build, key);
    step(`signed: ${signed.length / 2} bytes; submitting to the broadcast API`);
    let response;
    try {
      response = await fetch(`${cfg.broadcast}/broadcast`, { method: "POST", headers: { "Content-Type": "application/json" }, body: JSON.stringify({ tx: signed }) });
    } catch {
      throw new Error("The broadcast API cannot be reached; nothing was sent. Try again in a moment.");
    }
    const body = await response.json();
    if (!response.ok) throw new Error(`The broadcast API refused it: ${body.error?.code}: ${body.error?.message}`);
    step(`broadcast: txid ${body.txid}`);
    const record = await follow(cfg.broadcast, body.txid, $("record"));
    if (record?.status === "accepted") $("swap-ok").innerHTML = `Accepted: <code id="accepted-txid">${esc(body.txid)}</code>`;
    else $("swap-error").textContent = `Status: ${record?.status ?? "unknown"}.`;
    loadWallet();
  } catch (err) {
    $("swap-error").textContent = err.message;
  } finally {
    busy = false;
    updateButton();
  }
}

async function init() {
  try {
    cfg = await loadConfig();
  } catch {
    setTimeout(init, 2000);
    return;
  }
  $("network").textContent = cfg.network ? `on ${cfg.network}` : "";
  let tokens = [];
  try { tokens = await api("/dex/tokens/list_cached?limit=1000"); } catch (err) { showQuoteError(`Could not load the tokens: ${err.message}`); }
  for (const t of tokens) {
    const { symbol } = tokenName(t);
    assets.set(t.token_id, { token_id: t.token_id, symbol, decimals: t.bcmr?.token?.decimals || 0 });
  }
  const options = [...assets.values()].map((a) => `<option value="${a.token_id}">${esc(a.symbol)}${a.token_id === "bch" ? "" : " · " + short(a.token_id, 8)}</option>`).join("");
  $("sell").innerHTML = options;
  $("buy").innerHTML = options;
  $("sell").value = params.get("sell") || "bch";
  $("buy").value = params.get("buy") || tokens[0]?.token_id || "bch";
  $("amount").value = params.get("amount") || "0.01";
  $("side").value = params.get("side") === "buy" ? "buy" : "sell";
  $("amount-unit").textContent = amountAsset().symbol;
  $("wallet").innerHTML += (cfg.wallets || []).map((w, i) => `<option value="${i}">${esc(w.name)} · ${esc(w.address)}</option>`).join("");
  if (!cfg.router) { showQuoteError("No router is configured for this explorer: quotes and swaps are off."); }
  else router = new Router(cfg.router, { onState: (up) => { $("router-state").textContent = up ? "· live" : "· reconnecting"; } });
  for (const id of ["sell", "buy", "side", "amount"]) $(id).addEventListener(id === "amount" ? "input" : "change", () => { $("amount-unit").textContent = amountAsset().symbol; resubscribe(); });
  $("wallet").addEventListener("change", () => {
    const w = cfg.wallets[Number($("wallet").value)];
    $("wif").value = w ? w.wif : "";
    loadWallet();
  });
  $("wif").addEventListener("change", loadWallet);
  $("wallet-form").addEventListener("submit", (event) => { event.preventDefault(); loadWallet(); });
  $("swap").addEventListener("click", swap);
  document.body.dataset.loaded = "swap";
  resubscribe();
}

init();
