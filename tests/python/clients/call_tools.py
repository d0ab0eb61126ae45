"""Calls roster's tools with the official Python SDK client and prints every raw result.

Usage: call_tools.py (--url URL [--token T] | --stdio ROSTER CONFIG) --calls JSON

`--calls` is a JSON list of `[tool, arguments]` pairs; the pseudo-call `["wait:list_changed", {}]`
waits (at most 30 s) for the next `notifications/tools/list_changed` and records whether it came;
`["wait:resources_list_changed", {}]` likewise for `notifications/resources/list_changed`;
`["pause", {"seconds": S}]` sends nothing for S seconds (a window for the test to act in);
`["read:URI", {}]` reads the resource URI (`resources/read`) and records its result like a call's.
The output is one JSON object:
`results` (each call's or read's result as the wire carries it, or its JSON-RPC error) and
`resources` (the URIs of `resources/list`).
"""

from __future__ import annotations

import json

import anyio
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ResourceListChangedNotification, ToolListChangedNotification

import roster_client

parser = roster_client.parser()
parser.add_argument("--calls", required=True)
args = parser.parse_args()


async def main() -> dict:
    out: dict = {"results": []}
    changed = {"tools": anyio.Event(), "resources": anyio.Event()}

    async def on_message(message) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed["tools"].set()
        if isinstance(message, ResourceListChangedNotification):
            changed["resources"].set()

    server = roster_client.server(args)
    async with Client(server, mode="legacy", cache=None, message_handler=on_message) as client:
        for name, arguments in json.loads(args.calls):
            if name == "pause":
                # Nothing in flight from this client for `seconds` (the test acts meanwhile).
                await anyio.sleep(arguments["seconds"])
                out["results"].append({"paused": arguments["seconds"]})
                continue
            if name in ("wait:list_changed", "wait:resources_list_changed"):
                kind = "tools" if name == "wait:list_changed" else "resources"
                with anyio.move_on_after(roster_client.WAIT):
                    await changed[kind].wait()
                out["results"].append({"list_changed": changed[kind].is_set()})
                changed[kind] = anyio.Event()
                continue
            if name.startswith("read:"):
                read = client.read_resource(name[len("read:") :])
                out["results"].append(await roster_client.on_the_wire(read, MCPError))
                continue
            out["results"].append(await roster_client.on_the_wire(client.call_tool(name, arguments), MCPError))
        caps = client.server_capabilities
        if caps.resources is not None:
            resources = await client.list_resources()
            out["resources"] = [str(r.uri) for r in resources.resources]
    return out


roster_client.report(main)
