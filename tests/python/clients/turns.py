"""Runs a script of tools/list and tools/call steps against roster with the official Python SDK
2.x client (`Client`) and prints what each step saw, for the Rust tests of fresh turns, notes
and calls by a server's own tool name.

Usage: turns.py --mode legacy|auto (--url URL [--token T] | --stdio ROSTER CONFIG) --steps JSON

`--steps` is a JSON list of `["list"]` (the tool names of `tools/list`) and
`["call", NAME, ARGUMENTS]` (the result as the wire carries it, or its JSON-RPC error as
`{"error": {"code", "message"}}`). The list cache is off, so every `["list"]` reaches roster.
The output is one JSON object: `protocol_version`, `steps` (one entry per step) and `seconds`
(each step's wall time).
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
    out: dict = {}
    async with Client(roster_client.server(args), mode=args.mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        steps = json.loads(args.steps)
        out["seconds"] = []
        out["steps"] = await roster_client.run_steps(steps, client.list_tools, client.call_tool, MCPError, out["seconds"])
    return out


roster_client.report(main)
