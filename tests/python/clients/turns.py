"""Runs a script of tools/list and tools/call steps against roster with the official Python SDK
2.x client (`Client`) and prints what each step saw, for the Rust tests of fresh turns, notes
and calls by a server's own tool name.

Usage: turns.py --mode legacy|auto (--url URL [--token T] | --stdio ROSTER CONFIG) --steps JSON

`--steps` is a JSON list of `["list"]` (the tool names of `tools/list`) and
`["call", NAME, ARGUMENTS]` (the result as the wire carries it, or its JSON-RPC error as
`{"error": {"code", "message"}}`). The list cache is off, so every `["list"]` reaches roster.
The output is one JSON object: `protocol_version` and `steps`, one entry per step.
"""

from __future__ import annotations

import json

from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

import roster_client

parser = roster_client.parser()
parser.add_argument("--mode", default="legacy")
parser.add_argument("--steps", required=True)
args = parser.parse_args()


async def main() -> dict:
    out: dict = {"steps": []}
    async with Client(roster_client.server(args), mode=args.mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        for step in json.loads(args.steps):
            if step[0] == "list":
                tools = await client.list_tools()
                out["steps"].append([t.name for t in tools.tools])
                continue
            _, name, arguments = step
            out["steps"].append(await roster_client.on_the_wire(client.call_tool(name, arguments), MCPError))
    return out


roster_client.report(main)
