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

import argparse
import json
import sys

import anyio
import httpx2
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError

parser = argparse.ArgumentParser()
parser.add_argument("--mode", default="legacy")
parser.add_argument("--url")
parser.add_argument("--token")
parser.add_argument("--stdio", nargs=2, metavar=("ROSTER", "CONFIG"))
parser.add_argument("--steps", required=True)
args = parser.parse_args()


async def main() -> dict:
    if args.url:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
        server = streamable_http_client(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    else:
        roster, config = args.stdio
        server = StdioServerParameters(command=roster, args=["--config", config, "serve"])
    out: dict = {"steps": []}
    async with Client(server, mode=args.mode, cache=None) as client:
        out["protocol_version"] = client.protocol_version
        for step in json.loads(args.steps):
            if step[0] == "list":
                tools = await client.list_tools()
                out["steps"].append([t.name for t in tools.tools])
                continue
            _, name, arguments = step
            try:
                result = await client.call_tool(name, arguments)
                out["steps"].append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            except MCPError as e:
                out["steps"].append({"error": {"code": e.error.code, "message": e.error.message}})
    return out


try:
    print(json.dumps(anyio.run(main)))
except Exception as e:  # noqa: BLE001 - reported to the Rust test
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(1)
