"""Page weight and load time of every explorer page, in Debian's chromium (Playwright).

    python scripts/explorer_pages.py http://127.0.0.1:8000   # a running `ladle up`

For each page, in a fresh profile (empty cache): requests, bytes transferred (as sent, gzip
included) and decoded, the `load` event, and the time until the page's data is on screen
(its `data-loaded` mark). Prints a Markdown table (docs/explorer.md holds the last one)."""

from __future__ import annotations

import json
import sys
import tempfile
import time
import urllib.request

from playwright.sync_api import sync_playwright

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


def main(base: str) -> None:
    with urllib.request.urlopen(f"{base}/dex/tokens/list_cached?limit=1") as r:
        token = json.loads(r.read())[0]["token_id"]
    with urllib.request.urlopen(f"{base}/tokenpool/pool/active?token={token}") as r:
        pool = json.loads(r.read())["active"][0]["pool_id"]
    pages = [
        ("tokens", "/explorer", "body[data-loaded]"),
        ("token", f"/explorer/token/{token}", "body[data-loaded]"),
        ("pool", f"/explorer/pool/{pool}", "body[data-loaded]"),
        ("swap", f"/explorer/swap?buy={token}", "body[data-quoted]"),
        ("oracle", "/explorer/oracle", "body[data-loaded]"),
        ("lending", "/explorer/lending", "body[data-loaded]"),
        ("broadcast", "/explorer/broadcast", "body[data-loaded]"),
        ("docs", "/docs", ".opblock-summary-path"),
    ]
    print("| page | requests | transferred | decoded | load event | data shown |")
    print("|---|---:|---:|---:|---:|---:|")
    with sync_playwright() as p:
        for name, path, ready in pages:
            with tempfile.TemporaryDirectory() as profile:
                context = p.chromium.launch_persistent_context(
                    profile, executable_path="/usr/bin/chromium", args=ARGS, headless=True
                )
                page = context.new_page()
                start = time.monotonic()
                page.goto(base + path)
                page.wait_for_selector(ready, timeout=30_000, state="attached")
                shown = time.monotonic() - start
                page.wait_for_load_state("load")
                stats = page.evaluate(
                    """() => {
                    const nav = performance.getEntriesByType('navigation')[0];
                    const all = [nav, ...performance.getEntriesByType('resource')];
                    return {n: all.length, sent: all.reduce((s, e) => s + e.transferSize, 0),
                            body: all.reduce((s, e) => s + e.decodedBodySize, 0),
                            load: nav.loadEventEnd};
                    }"""
                )
                print(
                    f"| {name} | {stats['n']} | {stats['sent'] / 1024:,.0f} kB "
                    f"| {stats['body'] / 1024:,.0f} kB | {stats['load']:,.0f} ms "
                    f"| {shown * 1000:,.0f} ms |"
                )
                context.close()


if __name__ == "__main__":
    main(sys.argv[1].rstrip("/"))
