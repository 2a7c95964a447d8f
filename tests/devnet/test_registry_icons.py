"""The devnet serves an icon at every registry's `uris.icon`, so explorers have images."""

from __future__ import annotations

import json

from devnet.scenario.registry import icon_svg, icons, registry_document

CATEGORY = "ab" * 32


def test_every_http_icon_of_a_served_registry_gets_an_svg() -> None:
    doc = registry_document(
        category_hex=CATEGORY,
        name="Lumen",
        symbol="LUMEN",
        decimals=4,
        description="d",
        published=1_700_000_000,
        web="http://127.0.0.1:5/token/lumen",
    )
    served = {"/token/lumen/registry.json": doc, "/ledger.json": b"{not json", "/x": b"[]"}
    assert icons(served) == {"/token/lumen/icon.svg": icon_svg(CATEGORY, "LUMEN")}
    svg = icon_svg(CATEGORY, "LUMEN").decode()
    assert svg.startswith("<svg") and ">L</text>" in svg
    assert json.loads(doc)["identities"][CATEGORY]


def test_the_letter_is_escaped() -> None:
    assert b"&lt;" in icon_svg(CATEGORY, "<b>")
