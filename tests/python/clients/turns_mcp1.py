"""turns.py for the Python SDK's 1.x line (`mcp` 1.30: `ClientSession` over `stdio_client` or
`streamablehttp_client`), whose API differs from 2.x. Same steps, same report.

Usage: turns_mcp1.py (--url URL [--token T] | --stdio ROSTER CONFIG) --steps JSON
"""

from __future__ import annotations

import json
from contextlib import AsyncExitStack

from mcp import ClientSession
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.exceptions import McpError

import roster_client

parser = roster_client.parser()
parser.add_argument("--steps", required=True)
args = parser.parse_args()


async def main() -> dict:
    out: dict = {}
    async with AsyncExitStack() as stack:
        if args.url:
            headers = roster_client.bearer(args.token)
            read, write, _ = await stack.enter_async_context(streamablehttp_client(args.url, headers=headers))
        else:
            params = roster_client.stdio_server(args.stdio)
            read, write = await stack.enter_async_context(stdio_client(params))
        session = await stack.enter_async_context(ClientSession(read, write))
        init = await session.initialize()
        out["protocol_version"] = init.protocolVersion
        steps = json.loads(args.steps)
        out["seconds"] = []
        out["steps"] = await roster_client.run_steps(steps, session.list_tools, session.call_tool, McpError, out["seconds"])
    return out


roster_client.report(main)
