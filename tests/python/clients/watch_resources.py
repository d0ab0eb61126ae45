"""Real MCP clients (the official Python SDK) subscribing to server resources through roster.

roster serves HTTP in front of two instances of tests/python/conformance_server.py: `fixture`
(takes subscriptions) and `plain` (started with --no-subscribe; it alone offers
`test://unsubscribable`). Two initialize-era sessions A and B subscribe with
`resources/subscribe`; the fixture's `test_update_resource` tool announces updates and its
`test_resource_subscriptions` tool reports what the server holds, so the report shows roster
subscribing at the server once, relaying each update only to the sessions that subscribed,
and unsubscribing when the last interested session unsubscribed or went away. A 2026-07-28
client then does the same through a `subscriptions/listen` stream.

It prints one JSON object of what it observed; the Rust test asserts on it.

Usage: watch_resources.py URL
"""

from __future__ import annotations

import json
import sys
import traceback
import warnings

import anyio
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import ResourceUpdated
from mcp.types import ResourceUpdatedNotification, TextContent

WAIT = 30  # seconds; bounds a hang, measures nothing

WATCHED = "test://watched-resource"
OTHER = "test://watched-other"
UNSUBSCRIBABLE = "test://unsubscribable"

warnings.simplefilter("ignore")  # resources/subscribe is deprecated for 2026-07-28, not for us
url = sys.argv[1]


class Inbox:
    """The resource updates one session received, in order."""

    def __init__(self) -> None:
        self.uris: list[str] = []
        self.arrived = anyio.Event()

    async def on_message(self, message) -> None:
        if isinstance(message, ResourceUpdatedNotification):
            self.uris.append(str(message.params.uri))
            self.arrived.set()
            self.arrived = anyio.Event()

    async def wait_for(self, uri: str, count: int) -> bool:
        """Waits until `uri` arrived `count` times in all."""
        with anyio.move_on_after(WAIT):
            while self.uris.count(uri) < count:
                await self.arrived.wait()
        return self.uris.count(uri) >= count


async def held(client: Client) -> dict:
    result = await client.call_tool("test_resource_subscriptions", {})
    return json.loads(next(c.text for c in result.content if isinstance(c, TextContent)))


async def until(client: Client, check) -> dict:
    """Polls what the server holds until `check` holds (or the wait runs out)."""
    state = await held(client)
    with anyio.move_on_after(WAIT):
        while not check(state):
            await anyio.sleep(0.05)
            state = await held(client)
    return state


async def error_of(call) -> dict:
    try:
        await call
        return {"answered": True}
    except MCPError as e:
        return {"code": e.error.code, "message": e.error.message, "data": e.error.data}


async def initialize_era(report: dict) -> None:
    a_box, b_box = Inbox(), Inbox()
    async with Client(url, mode="legacy", message_handler=a_box.on_message, cache=None) as a:
        caps = a.server_capabilities.resources
        report["subscribe_capability"] = bool(caps and caps.subscribe)
        report["held_before"] = await held(a)
        async with Client(url, mode="legacy", message_handler=b_box.on_message, cache=None) as b:
            await a.subscribe_resource(WATCHED)
            await a.subscribe_resource(WATCHED)  # again: still one subscription
            await a.subscribe_resource(OTHER)
            await b.subscribe_resource(WATCHED)
            report["held_subscribed"] = await held(a)

            await a.call_tool("test_update_resource", {"uris": [WATCHED]})
            report["a_first"] = await a_box.wait_for(WATCHED, 1)
            report["b_first"] = await b_box.wait_for(WATCHED, 1)

            await a.unsubscribe_resource(WATCHED)
            report["held_after_a_unsubscribed"] = await held(a)
            # A watches only OTHER now: OTHER's update, sent after WATCHED's, is the marker.
            await a.call_tool("test_update_resource", {"uris": [WATCHED, OTHER]})
            report["a_other"] = await a_box.wait_for(OTHER, 1)
            report["b_second"] = await b_box.wait_for(WATCHED, 2)
            report["a_updates"] = list(a_box.uris)
            report["b_updates"] = list(b_box.uris)

            report["unknown"] = await error_of(a.subscribe_resource("test://nowhere"))
            report["unsubscribable"] = await error_of(a.subscribe_resource(UNSUBSCRIBABLE))
        # B went away: nobody watches WATCHED any more, A still watches OTHER.
        report["held_after_b_left"] = await until(a, lambda s: WATCHED not in s["watched"])
    async with Client(url, mode="legacy", cache=None) as c:
        report["held_after_all_left"] = await until(c, lambda s: not s["watched"])


async def listen_era(report: dict) -> None:
    async with Client(url, mode="auto", cache=None) as client:
        report["modern_protocol"] = client.protocol_version
        async with client.listen(resource_subscriptions=[WATCHED, UNSUBSCRIBABLE]) as sub:
            report["listen_honored"] = sorted(sub.honored.resource_subscriptions or [])
            report["listen_held"] = await held(client)
            await client.call_tool("test_update_resource", {"uris": [WATCHED]})
            event = None
            with anyio.move_on_after(WAIT):
                async for event in sub:
                    break
            report["listen_event"] = event.uri if isinstance(event, ResourceUpdated) else repr(event)
        report["listen_held_after"] = await until(client, lambda s: not s["watched"])


async def main() -> dict:
    report: dict = {}
    try:
        await initialize_era(report)
        await listen_era(report)
    except Exception as e:  # noqa: BLE001 - reported for the Rust test to show
        report["error"] = "".join(traceback.format_exception(e))
    return report


print(json.dumps(anyio.run(main)))
