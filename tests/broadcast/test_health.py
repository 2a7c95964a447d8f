"""/health and /metrics of the broadcast API: which nodes are reachable and how far each lags
the best tip any of them announced, on the five-node devnet with nodes taken down."""

from __future__ import annotations

import httpx
import jsonschema

from broadcast.service import BroadcastService
from devnet.service import Devnet
from tests.broadcast.test_openapi import DOC
from tests.indexer.electrum_servers import set_down
from tests.indexer.test_follower_support import wait_until
from tests.metrics_text import sample


def check(body: object) -> None:
    schema = {"$ref": "#/components/schemas/Health", "components": DOC["components"]}
    jsonschema.Draft202012Validator(schema).validate(body)


async def test_health_reports_nodes_and_their_lag(
    http: httpx.AsyncClient, service: BroadcastService, net: Devnet
) -> None:
    await wait_until(lambda: service.tips.connected == len(net.nodes), what="every node's tip")
    body = (await http.get("/health")).json()
    check(body)
    assert body["status"] == "ok" and body["connected"] == len(net.nodes)
    assert body["best_height"] == net.nodes[0].height
    assert all(n["lag_blocks"] == 0 for n in body["nodes"])

    net.nodes[4].set_faults(partitioned=True)
    net.nodes[0].mine(2)
    best = net.nodes[0].height
    await wait_until(lambda: service.tips.heard().best_height == best, what="the new tip")
    await set_down(net, 3, True)
    await wait_until(lambda: service.tips.connected == len(net.nodes) - 1, what="node 3 gone")
    response = await http.get("/health")
    body = response.json()
    check(body)
    assert response.status_code == 200 and body["status"] == "degraded"
    by_name = {n["name"]: n for n in body["nodes"]}
    names = [link.name for link in service.links]
    assert by_name[names[3]] == {
        "name": names[3], "connected": False, "height": None, "lag_blocks": None
    }  # fmt: skip
    assert by_name[names[4]]["lag_blocks"] == 2  # partitioned: it never got the two blocks
    assert by_name[names[0]]["lag_blocks"] == 0

    await http.get("/broadcast/status/" + "00" * 32)
    text = (await http.get("/metrics")).text
    assert sample(text, "ladle_broadcast_best_height") == best
    assert sample(text, "ladle_broadcast_nodes_connected") == len(net.nodes) - 1
    assert sample(text, "ladle_broadcast_node_connected", node=names[3]) == 0
    assert sample(text, "ladle_broadcast_node_lag_blocks", node=names[4]) == 2
    route = "/broadcast/status/{txid}"
    assert sample(text, "ladle_broadcast_requests_total", route=route, status="404") == 1

    for node in range(len(net.nodes)):
        await set_down(net, node, True)
    await wait_until(lambda: service.tips.connected == 0, what="every node gone")
    response = await http.get("/health")
    assert response.status_code == 503 and response.json()["status"] == "unavailable"
