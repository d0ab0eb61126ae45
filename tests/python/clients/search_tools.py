"""Uses roster in search mode the way an agent would, with the official Python SDK 2.x client.

Usage: search_tools.py (--url URL [--token T] | --stdio ROSTER CONFIG) --query Q --want NAME
                       --arguments JSON [--add TOOL] [--mode legacy|auto]

Lists the tools (every page), searches for `--query`, reads `--want`'s definition with
describe_tools, calls it through call_tool with `--arguments` and then directly by its name.
With `--add TOOL`, then asks the dynamic server (`dyn__add_tool` through call_tool) to add a tool
of that name and searches for it at the next turn. `--mode auto` lets the client negotiate the
2026-07-28 era (the default, `legacy`, is the initialize era). Prints one JSON report, with the
protocol version the client speaks.
"""

from __future__ import annotations

import json

from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

import roster_client

parser = roster_client.parser()
parser.add_argument("--query", required=True)
parser.add_argument("--want", required=True)
parser.add_argument("--arguments", required=True)
parser.add_argument("--add")
parser.add_argument("--mode", default="legacy")
args = parser.parse_args()


async def main() -> dict:
    out: dict = {}
    arguments = json.loads(args.arguments)
    async with Client(roster_client.server(args), mode=args.mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        listed, cursor = [], None
        while True:
            page = await client.list_tools(cursor=cursor)
            listed += [t.name for t in page.tools]
            cursor = page.next_cursor
            if not cursor:
                break
        out["listed"] = listed

        async def call(name: str, arguments: dict) -> dict:
            return await roster_client.on_the_wire(client.call_tool(name, arguments), MCPError)

        found = await call("search_tools", {"query": args.query, "limit": 5})
        out["hits"] = [hit["name"] for hit in found["structuredContent"]["tools"]]
        out["described"] = (await call("describe_tools", {"names": [args.want]}))["structuredContent"]
        out["through_call_tool"] = await call("call_tool", {"name": args.want, "arguments": arguments})
        out["direct"] = await call(args.want, arguments)
        if args.add:
            out["added"] = await call("call_tool", {"name": "dyn__add_tool", "arguments": {"name": args.add}})
            found = await call("search_tools", {"query": args.add.replace("_", " "), "server": "dyn"})
            out["found_after_add"] = [hit["name"] for hit in found["structuredContent"]["tools"]]
    return out


roster_client.report(main)
