"""Calls roster's tools with the official Python SDK client and prints every raw result.

Usage: call_tools.py (--url URL [--token T] | --stdio ROSTER CONFIG) --calls JSON

`--calls` is a JSON list of `[tool, arguments]` pairs; the pseudo-call `["wait:list_changed", {}]`
waits (at most 30 s) for the next `notifications/tools/list_changed` and records whether it came.
The output is one JSON object:
`results` (each call's result as the wire carries it, or its JSON-RPC error) and `resources`
(the URIs of `resources/list`).
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
from mcp.types import ToolListChangedNotification

parser = argparse.ArgumentParser()
parser.add_argument("--url")
parser.add_argument("--token")
parser.add_argument("--stdio", nargs=2, metavar=("ROSTER", "CONFIG"))
parser.add_argument("--calls", required=True)
args = parser.parse_args()


async def main() -> dict:
    if args.url:
        headers = {"Authorization": f"Bearer {args.token}"} if args.token else None
        server = streamable_http_client(args.url, http_client=httpx2.AsyncClient(headers=headers, timeout=30))
    else:
        roster, config = args.stdio
        server = StdioServerParameters(command=roster, args=["--config", config, "serve"])
    out: dict = {"results": []}
    changed = anyio.Event()

    async def on_message(message) -> None:
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    async with Client(server, mode="legacy", cache=None, message_handler=on_message) as client:
        for name, arguments in json.loads(args.calls):
            if name == "wait:list_changed":
                with anyio.move_on_after(30):
                    await changed.wait()
                out["results"].append({"list_changed": changed.is_set()})
                changed = anyio.Event()
                continue
            try:
                result = await client.call_tool(name, arguments)
                out["results"].append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            except MCPError as e:
                out["results"].append({"error": {"code": e.error.code, "message": e.error.message}})
        caps = client.server_capabilities
        if caps.resources is not None:
            resources = await client.list_resources()
            out["resources"] = [str(r.uri) for r in resources.resources]
    return out


try:
    print(json.dumps(anyio.run(main)))
except Exception as e:  # noqa: BLE001 - reported to the Rust test
    print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
    sys.exit(1)
