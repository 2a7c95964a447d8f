// Broadcast status lookup: the broadcast API's record for a txid, every node's verdict.
import { nav, loadConfig } from "./common.js";
import { fetchStatus, renderStatus } from "./bstatus.js";

nav("broadcast");
const $ = (id) => document.getElementById(id);

async function lookup(txid) {
  $("error").textContent = "";
  $("record").innerHTML = "";
  if (!/^[0-9a-fA-F]{64}$/.test(txid)) { $("error").textContent = "A txid is 64 hex characters."; return; }
  history.replaceState(null, "", `?txid=${txid}`);
  let cfg;
  try { cfg = await loadConfig(); } catch { $("error").textContent = "The explorer's configuration cannot be loaded; try again."; return; }
  if (!cfg.broadcast) { $("error").textContent = "No broadcast API is configured for this explorer."; return; }
  try {
    $("record").innerHTML = renderStatus(await fetchStatus(cfg.broadcast, txid.toLowerCase()));
  } catch (err) {
    $("error").textContent = err.code === "TRANSACTION_NOT_FOUND"
      ? "The broadcast API has no record of this transaction (it was not broadcast through it, or the record expired)."
      : `${err.code}: ${err.message}`;
  }
  document.body.dataset.loaded = "broadcast";
}

$("lookup").addEventListener("submit", (event) => { event.preventDefault(); lookup($("txid").value.trim()); });
const txid = new URLSearchParams(location.search).get("txid");
if (txid) { $("txid").value = txid; lookup(txid); } else document.body.dataset.loaded = "broadcast";
