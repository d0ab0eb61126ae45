"""turns.py for the Python SDK's 1.x line (`mcp` 1.30: `ClientSession` over `stdio_client` or
`streamablehttp_client`), whose API differs from 2.x. Same steps, same report.

Usage: turns_mcp1.py (--url URL [--token T] | --stdio ROSTER CONFIG) --steps JSON
"""

from __future__ import annotations

import argparse
import json
import sys
from contextlib import AsyncExitStack

import anyio
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

parser = argparse.ArgumentParser()
parser.add_argument("--url")
parser.add_argument("--token")
parser.add_argument("--stdio", nargs=2, metavar=("ROSTER", "CONFIG"))
parser.add_argument("--steps", required=True)
args = parser.parse_args()


async def main() -> dict:
    out: dict = {"steps": []}
    async with AsyncExitStack() as stack:
        if args.url:
            headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
            read, write, _ = await stack.enter_async_context(streamablehttp_client(args.url, headers=headers))
        else:
            roster, config = args.stdio
            params = StdioServerParameters(command=roster, args=["--config", config, "serve"])
            read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        init = await session.initialize()
        out["protocol_version"] = init.protocolVersion
        for step in json.loads(args.steps):
            if step[0] == "list":
                tools = await session.list_tools()
                out["steps"].append([t.name for t in tools.tools])
                continue
            _, name, arguments = step
            try:
                result = await session.call_tool(name, arguments)
                out["steps"].append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            except McpError as e:
                out["steps"].append({"error": {"code": e.error.code, "message": e.error.message}})
    return out


try:
    print(json.dumps(anyio.run(main)))
except Exception as e:  # noqa: BLE001 - reported to the Rust test
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(1)
