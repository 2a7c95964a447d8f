"""The explorer in a real browser: Debian's chromium driven by Playwright, against a real
`ladle up` (small preset). Every page loads without a console error, the token chart holds the
API's candles, a swap is quoted, built, signed in the page, broadcast and accepted, and bad
input gets a sentence on the page.

Chromium comes from the distribution (`make` installs it when missing); Playwright only
drives it (`executable_path`), it never downloads a browser. Without chromium, Playwright or
node_modules the module is skipped, saying which is missing.

`LADLE_SCREENSHOTS=DIR` saves a screenshot of every page there (docs/explorer/ holds the
committed ones)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rest.explorer.routes import NODE_MODULES

CHROMIUM = os.environ.get("LADLE_CHROMIUM", "/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
READY = "LADLE_READY "
SHOTS = os.environ.get("LADLE_SCREENSHOTS")

try:
    from playwright.sync_api import (
        BrowserContext,
        ConsoleMessage,
        Page,
        Request,
        WebSocket,
        WebSocketRoute,
        sync_playwright,
    )
    from playwright.sync_api import TimeoutError as PlaywrightTimeout
except ImportError:  # pragma: no cover - the test extra is not installed
    sync_playwright = None  # type: ignore[assignment]

if sync_playwright is None:
    pytestmark = pytest.mark.skip(reason="playwright is not installed (pip install -e '.[test]')")
elif not (Path(CHROMIUM).is_file() or shutil.which("chromium")):
    pytestmark = pytest.mark.skip(
        reason=f"chromium not found at {CHROMIUM}: browser tests skipped "
        "(make installs Debian's chromium package when run as root)"
    )
elif not (NODE_MODULES / "lightweight-charts").is_dir():
    pytestmark = pytest.mark.skip(reason="node_modules missing (npm ci): browser tests skipped")


@dataclass
class Ladle:
    ready: dict[str, Any]
    proc: subprocess.Popen[bytes]
    rest: str = ""
    broadcast: str = ""
    swapped: list[str] = field(default_factory=list)

    def get(self, url: str) -> Any:
        with urllib.request.urlopen(url, timeout=30) as response:
            return json.loads(response.read())


@pytest.fixture(scope="module")
def ladle() -> Iterator[Ladle]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "ladle", "up", "--ports", "0", "--preset", "small"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdout is not None
    found: dict[str, Any] = {}

    def read() -> None:
        assert proc.stdout is not None
        for raw in proc.stdout:  # keeps draining after the ready line
            line = raw.decode(errors="replace")
            if line.startswith(READY) and not found:
                found.update(json.loads(line[len(READY) :]))

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + 180
        while not found and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert found, "ladle up did not print LADLE_READY"
        yield Ladle(found, proc, rest=str(found["rest"]), broadcast=str(found["broadcast"]))
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@pytest.fixture(scope="module")
def browser() -> Iterator[BrowserContext]:
    with tempfile.TemporaryDirectory(prefix="ladle-chromium-") as profile, sync_playwright() as p:
        context = p.chromium.launch_persistent_context(
            profile,
            executable_path=CHROMIUM if Path(CHROMIUM).is_file() else shutil.which("chromium"),
            args=ARGS,
            headless=True,
            viewport={"width": 1280, "height": 900},
        )
        try:
            yield context
        finally:
            context.close()


class Console:
    """A page's console errors and uncaught exceptions."""

    def __init__(self, page: Page) -> None:
        self.errors: list[str] = []
        page.on("console", self.on_console)
        page.on("pageerror", lambda exc: self.errors.append(f"pageerror: {exc}"))

    def on_console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.errors.append(f"{message.text} ({message.location.get('url')})")


@pytest.fixture
def page(browser: BrowserContext) -> Iterator[Page]:
    p = browser.new_page()
    p.set_default_timeout(20_000)
    yield p
    p.close()


def shot(page: Page, name: str, *, full_page: bool = True) -> None:
    if SHOTS:
        Path(SHOTS).mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(Path(SHOTS) / f"{name}.png"), full_page=full_page)


def wait_text(page: Page, element: str, text: str) -> None:
    """Wait until the element with id `element` contains `text`; on a timeout, say what the
    page showed instead (and its error boxes)."""
    try:
        page.wait_for_function(
            "([id, text]) => document.getElementById(id).textContent.includes(text)",
            arg=[element, text],
        )
    except PlaywrightTimeout:
        shown = page.evaluate(
            """(id) => [id, 'quote-error', 'swap-error', 'wallet-error', 'error', 'status']
                .map(i => document.getElementById(i)).filter(Boolean)
                .map(e => `${e.id}: ${e.textContent}`).join(' | ')""",
            element,
        )
        raise AssertionError(
            f"#{element} never showed {text!r}; the page showed: {shown}"
        ) from None


def mine(ladle: Ladle) -> None:
    """One block on the devnet (its Electrum control method), with the swap in it."""
    [node] = ladle.ready["electrum"][:1]
    with socket.create_connection((node["host"], node["tcp_port"]), timeout=30) as conn:
        request = {"jsonrpc": "2.0", "id": 1, "method": "devnet.mine", "params": [1]}
        conn.sendall(json.dumps(request).encode() + b"\n")
        reply = conn.makefile("rb").readline()
    assert "error" not in json.loads(reply), reply


def top_token(ladle: Ladle) -> dict[str, Any]:
    tokens = ladle.get(f"{ladle.rest}/dex/tokens/list_cached?limit=1")
    return dict(tokens[0])


def test_tokens_page_lists_the_api_tokens_and_searches(ladle: Ladle, page: Page) -> None:
    console = Console(page)
    page.goto(f"{ladle.rest}/explorer")
    page.wait_for_selector("body[data-loaded=tokens]")
    tokens = ladle.get(f"{ladle.rest}/dex/tokens/list_cached?limit=1000")
    rows = page.locator("#tokens tbody tr")
    assert rows.count() == len(tokens)
    assert [rows.nth(i).get_attribute("data-token") for i in range(len(tokens))] == [
        t["token_id"] for t in tokens
    ]
    named = next(t for t in tokens if t["display_symbol"])
    assert named["display_symbol"] in page.inner_text("#tokens")
    page.wait_for_function("document.querySelectorAll('img.icon').length > 0")
    page.wait_for_function(
        "[...document.querySelectorAll('img.icon')].every(i => i.complete && i.naturalWidth > 0)"
    )
    shot(page, "tokens")
    page.fill("#search", named["display_symbol"])
    page.wait_for_function(
        f"[...document.querySelectorAll('#tokens tbody tr')].every("
        f"r => r.innerText.includes({json.dumps(named['display_symbol'])}))"
    )
    assert console.errors == []


def candles_in_chart(page: Page) -> list[dict[str, Any]]:
    return list(page.evaluate("window.explorer.candles"))


def test_token_page_chart_holds_the_api_candles(ladle: Ladle, page: Page) -> None:
    console = Console(page)
    token = top_token(ladle)["token_id"]
    page.goto(f"{ladle.rest}/explorer/token/{token}")
    page.wait_for_selector("body[data-loaded=token]")
    for step in (3600, 86400, 300):
        if step != 3600:
            page.click(f"#intervals button[data-step='{step}']")
            page.wait_for_function(f"window.explorer.stepsize === {step}")
        api = ladle.get(f"{ladle.rest}/dex/price/{token}/candlesticks?stepsize={step}")
        want = [
            {k: c[k] for k in ("time", "open", "high", "low", "close")} for c in api["candlesticks"]
        ]
        got = [
            {k: c[k] for k in ("time", "open", "high", "low", "close")}
            for c in candles_in_chart(page)
        ]
        assert got == want and want, step
        if step == 3600:
            # A canvas was drawn with content (not blank): some pixel differs from the first.
            drawn = page.evaluate(
                """() => [...document.querySelectorAll('#chart canvas')].some(c => {
                    const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
                    for (let i = 4; i < d.length; i += 4)
                        if (d[i] !== d[0] || d[i+1] !== d[1]) return true;
                    return false; })"""
            )
            assert drawn
            shot(page, "token")
    pools = ladle.get(f"{ladle.rest}/tokenpool/pool/active?token={token}")["active"]
    assert page.locator("#pools tbody tr").count() == len(pools)
    owners = {p["owner_p2pkh_addr"] for p in pools}
    assert owners <= set(page.locator("#pools tbody tr td:first-child").all_inner_texts())
    # Sortable: by BCH ascending after two clicks on its header (descending first).
    page.click("#pools th[data-key=sats]")
    sats = sorted(p["sats"] for p in pools)
    first = page.inner_text("#pools tbody tr:first-child td:nth-child(2)")
    assert first.replace(",", "").startswith(str(sats[0] / 1e8).rstrip("0")[:6])
    trades = ladle.get(f"{ladle.rest}/dex/tx/latest?token={token}&limit=25")
    assert page.locator("#trades tbody tr").count() == len(trades)
    assert console.errors == []


class Outbound:
    """Everything the page sends: request URLs and bodies, WebSocket frames."""

    def __init__(self, page: Page) -> None:
        self.sent: list[str] = []
        page.on("request", self.on_request)
        page.on("websocket", self.on_websocket)

    def on_request(self, request: Request) -> None:
        self.sent.append(request.url)
        self.sent.append(request.post_data or "")

    def on_websocket(self, ws: WebSocket) -> None:
        ws.on("framesent", lambda payload: self.sent.append(str(payload)))


def test_swap_end_to_end_accepted(ladle: Ladle, page: Page) -> None:
    console = Console(page)
    outbound = Outbound(page)
    token = top_token(ladle)["token_id"]
    page.goto(f"{ladle.rest}/explorer/swap?sell=bch&buy={token}&amount=0.01")
    page.wait_for_selector("body[data-quoted=yes]")
    quote = page.inner_text("#quote")
    for label in ("route", "price impact", "router fee", "miner fee"):
        assert label in quote
    assert page.inner_text("#quote-kind").split(" ")[0] in {"single", "split"}
    page.select_option("#wallet", "0")
    wait_text(page, "balance", "BCH in")
    assert page.inner_text("#address") == ladle.ready["wallets"][0]["address"]
    shot(page, "swap")
    page.click("#swap")
    page.wait_for_selector("#accepted-txid", timeout=45_000)
    txid = page.inner_text("#accepted-txid")
    record = ladle.get(f"{ladle.broadcast}/broadcast/status/{txid}")
    assert record["status"] == "accepted" and record["txid"] == txid
    assert page.inner_text("#status-value") == "accepted"
    shot(page, "swap-accepted")
    ladle.swapped.append(txid)
    # The key never left the page; the signed transaction did (to the broadcast API).
    wif = ladle.ready["wallets"][0]["wif"]
    assert not [s for s in outbound.sent if wif in s]
    assert any(f"{ladle.broadcast}/broadcast" == s for s in outbound.sent)
    # Live: the token page shows the pools the (unconfirmed) swap left, then, once a block is
    # mined with the page open, the trade among the latest trades.
    page.goto(f"{ladle.rest}/explorer/token/{token}")
    page.wait_for_selector(f"#pools tr[data-txid='{txid}']", timeout=30_000)
    assert page.locator(f"#trades tr[data-txid='{txid}']").count() == 0
    mine(ladle)
    page.wait_for_selector(f"#trades tr[data-txid='{txid}']", timeout=40_000)
    assert console.errors == []


def test_token_to_token_swap_signs_token_inputs(ladle: Ladle, page: Page) -> None:
    """Selling a token: the wallet's token coins are funding, signed with their token
    prefixes in the signing serialization; a two-hop route through BCH."""
    console = Console(page)
    wallet = ladle.ready["wallets"][2]
    tokens = [
        t
        for t in ladle.get(f"{ladle.rest}/dex/tokens/list_cached?limit=1000")
        if t["display_symbol"] in wallet["tokens"] and t["bcmr"]
    ]
    sell, buy = tokens[:2]
    # About 100,000 sats' worth of the sold token, in its display units.
    decimals = sell["bcmr"]["token"]["decimals"]
    base = int(100_000 / sell["price_now"])
    assert base <= wallet["tokens"][sell["display_symbol"]]
    amount = f"{base / 10**decimals:.{decimals}f}"
    page.goto(
        f"{ladle.rest}/explorer/swap?sell={sell['token_id']}&buy={buy['token_id']}&amount={amount}"
    )
    page.wait_for_selector("body[data-quoted=yes]")
    assert page.inner_text("#quote-kind").startswith("two_hop")
    page.select_option("#wallet", "2")
    wait_text(page, "balance", "BCH in")
    page.click("#swap")
    page.wait_for_selector("#accepted-txid", timeout=45_000)
    txid = page.inner_text("#accepted-txid")
    assert ladle.get(f"{ladle.broadcast}/broadcast/status/{txid}")["status"] == "accepted"
    assert console.errors == []


def test_exact_out_swap_delivers_the_amount_asked(ladle: Ladle, page: Page) -> None:
    """side "buy": the amount is what the wallet receives; the quote says so."""
    console = Console(page)
    token = top_token(ladle)
    decimals = token["bcmr"]["token"]["decimals"] if token["bcmr"] else 0
    base = int(50_000 / token["price_now"])  # about 50,000 sats' worth
    amount = f"{base / 10**decimals:.{decimals}f}" if decimals else str(base)
    page.goto(
        f"{ladle.rest}/explorer/swap?sell=bch&buy={token['token_id']}&side=buy&amount={amount}"
    )
    page.wait_for_selector("body[data-quoted=yes]")
    assert page.input_value("#side") == "buy"
    shown = page.inner_text("#quote-output").replace(",", "")
    assert float(shown) == float(amount)
    assert page.locator("#quote table.legs tr").count() >= 1
    page.select_option("#wallet", "1")
    wait_text(page, "balance", "BCH in")
    page.click("#swap")
    page.wait_for_selector("#accepted-txid", timeout=45_000)
    txid = page.inner_text("#accepted-txid")
    assert ladle.get(f"{ladle.broadcast}/broadcast/status/{txid}")["status"] == "accepted"
    assert console.errors == []


def test_broadcast_status_page_shows_every_node(ladle: Ladle, page: Page) -> None:
    if not ladle.swapped:
        pytest.skip("needs the swap of test_swap_end_to_end_accepted")
    console = Console(page)
    txid = ladle.swapped[0]
    page.goto(f"{ladle.rest}/explorer/broadcast?txid={txid}")
    page.wait_for_selector("#status-value")
    record = ladle.get(f"{ladle.broadcast}/broadcast/status/{txid}")
    assert page.inner_text("#status-value") == record["status"] == "accepted"
    assert page.locator("#record tbody tr").count() == len(record["nodes"]) == record["nodes_total"]
    shot(page, "broadcast")
    assert console.errors == []


def test_swap_page_explains_bad_input(ladle: Ladle, page: Page) -> None:
    console = Console(page)
    token = top_token(ladle)["token_id"]
    page.goto(f"{ladle.rest}/explorer/swap?sell=bch&buy={'ee' * 32}&amount=0.01")
    wait_text(page, "quote-error", "Unknown token")
    # One base unit of a token buys less than a satoshi: the router's route_failed.
    page.goto(f"{ladle.rest}/explorer/swap?sell={token}&buy=bch&amount=0.0001")
    wait_text(page, "quote-error", "No route")
    # More BCH than the wallet holds: quoted, but tx.build says insufficient_funds.
    page.goto(f"{ladle.rest}/explorer/swap?sell=bch&buy={token}&amount=100")
    page.wait_for_selector("body[data-quoted=yes]")
    page.select_option("#wallet", "1")
    wait_text(page, "balance", "BCH in")
    page.click("#swap")
    wait_text(page, "swap-error", "Insufficient funds")
    page.fill("#amount", "0.123456789")
    wait_text(page, "quote-error", "Not an amount")
    page.fill("#wif", "not-a-key")
    page.dispatch_event("#wif", "change")
    wait_text(page, "wallet-error", "cannot be used")
    assert console.errors == []


def test_router_outage_is_shown_and_the_quote_comes_back(ladle: Ladle, page: Page) -> None:
    """The router connection drops (a restart): the page says so, reconnects by itself and
    subscribes again; the quote is live again without a reload."""
    token = top_token(ladle)["token_id"]
    routes: list[WebSocketRoute] = []

    def relay(ws: WebSocketRoute) -> None:
        ws.connect_to_server()  # pass frames through to the real router
        routes.append(ws)

    page.route_web_socket(str(ladle.ready["router"]), relay)
    page.goto(f"{ladle.rest}/explorer/swap?sell=bch&buy={token}&amount=0.01")
    page.wait_for_selector("body[data-quoted=yes]")
    page.evaluate("delete document.body.dataset.quoted")
    routes[0].close(code=1012, reason="restart")
    wait_text(page, "router-state", "reconn")
    page.wait_for_selector("body[data-quoted=yes]")
    assert "live" in page.inner_text("#router-state") and len(routes) == 2
    page.wait_for_function("document.getElementById('status').hidden")


def test_data_api_outage_is_shown_and_recovered(ladle: Ladle, page: Page) -> None:
    page.goto(f"{ladle.rest}/explorer")
    page.wait_for_selector("body[data-loaded=tokens]")
    page.route("**/dex/tokens/**", lambda route: route.abort())
    page.fill("#search", "a")
    wait_text(page, "error", "Could not load")
    assert page.is_visible("#status")
    page.unroute("**/dex/tokens/**")
    page.fill("#search", "")
    page.wait_for_function("document.getElementById('error').textContent === ''")
    page.wait_for_function("document.getElementById('status').hidden")


@pytest.mark.parametrize("name", ["docs", "pool", "oracle", "lending", "unknown-token"])
def test_other_pages_load_without_console_errors(ladle: Ladle, page: Page, name: str) -> None:
    console = Console(page)
    if name == "docs":
        page.goto(f"{ladle.rest}/docs")
        page.wait_for_selector(".opblock-summary-path")
        paths = ladle.get(f"{ladle.rest}/openapi.json")["paths"]
        shown = page.locator(".opblock-summary-path").count()
        assert shown == len(paths)
        shot(page, "docs", full_page=False)  # the whole list is very long
        page.goto(f"{ladle.rest}/docs?api=broadcast")
        page.wait_for_function(
            "[...document.querySelectorAll('.opblock-summary-path')].some("
            "e => e.textContent.includes('/broadcast/status'))"
        )
    elif name == "pool":
        token = top_token(ladle)["token_id"]
        pool = ladle.get(f"{ladle.rest}/tokenpool/pool/active?token={token}")["active"][0]
        history = ladle.get(f"{ladle.rest}/dex/pool/history/{pool['pool_id']}?start=0")
        page.goto(f"{ladle.rest}/explorer/pool/{pool['pool_id']}")
        page.wait_for_selector("body[data-loaded=pool]")
        assert page.locator("#history tbody tr").count() == len(history["history"])
        shot(page, "pool")
    elif name == "oracle":
        page.goto(f"{ladle.rest}/explorer/oracle")
        page.wait_for_selector("body[data-loaded=oracle]")
        assert "$" in page.inner_text("#stats")
        shot(page, "oracle")
    elif name == "lending":
        page.goto(f"{ladle.rest}/explorer/lending")
        page.wait_for_selector("body[data-loaded=lending]")
        loans = ladle.get(f"{ladle.rest}/lending/v11/loans/active")
        assert page.locator("#loans tbody tr").count() == max(1, len(loans))
        shot(page, "lending")
    else:
        # An unknown token is a sentence on the page, not a broken page. (The data API's 404
        # is itself logged by the browser as a failed resource: that is the expected one.)
        page.goto(f"{ladle.rest}/explorer/token/{'ee' * 32}")
        wait_text(page, "error", "Unknown token")
        console.errors = [e for e in console.errors if "status of 404" not in e]
    assert console.errors == []
