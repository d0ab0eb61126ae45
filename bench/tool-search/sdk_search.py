"""The official MCP Python SDK (1.x, `ClientSession` over stdio) timing roster's tool search:
one session with `roster serve` in `tools_mode = "search"`; once every server's tools are
searchable (`--ready` names all described), WARMUP untimed then CALLS timed sequential requests
of each kind, one kind after the other: `tools/list` (the baseline), `search_tools`, and
`call_tool` of the first hit. Run by `tool-search` (bench/src/bin/tool-search.rs).

Prints one JSON object: the client, and each kind's latencies in ns.

Usage: sdk_search.py [--calls N] [--warmup N] [--query Q] [--limit N] [--text T]
                     [--ready NAME,NAME...] --stdio CMD [ARGS...]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from importlib.metadata import version

import anyio

parser = argparse.ArgumentParser()
parser.add_argument("--calls", type=int, default=500)
parser.add_argument("--warmup", type=int, default=50)
parser.add_argument("--query", default="repeat the given text back")
parser.add_argument("--limit", type=int, default=10)
parser.add_argument("--text", default="hello")
parser.add_argument("--ready", default="")
parser.add_argument("--ready-seconds", type=float, default=60.0)
parser.add_argument("--stdio", nargs=argparse.REMAINDER, required=True)
args = parser.parse_args()

SDK = version("mcp")
if int(SDK.split(".")[0]) >= 2:
    raise SystemExit(f"sdk_search.py speaks the 1.x ClientSession API; this venv has mcp {SDK}")


def tools_of(result) -> list:
    if result.structuredContent and isinstance(result.structuredContent.get("tools"), list):
        return result.structuredContent["tools"]
    for block in result.content:
        text = getattr(block, "text", None)
        if text:
            try:
                return json.loads(text).get("tools", [])
            except (ValueError, AttributeError):
                pass
    return []


async def timed(call) -> list[int]:
    for _ in range(args.warmup):
        await call()
    latencies = []
    for _ in range(args.calls):
        t0 = time.perf_counter_ns()
        result = await call()
        took = time.perf_counter_ns() - t0
        if getattr(result, "isError", False):
            raise RuntimeError(f"tool error: {result.content}")
        latencies.append(took)
    return latencies


async def main() -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    command, *rest = args.stdio
    ready = [n for n in args.ready.split(",") if n]
    async with stdio_client(StdioServerParameters(command=command, args=rest)) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            deadline = time.monotonic() + args.ready_seconds
            while ready:
                r = await session.call_tool("describe_tools", {"names": ready})
                if not r.isError and len(tools_of(r)) == len(ready):
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"not every --ready tool was described: {r.content}")
                await anyio.sleep(0.05)
            found = await session.call_tool("search_tools", {"query": args.query, "limit": args.limit})
            hits = tools_of(found)
            if not hits:
                raise RuntimeError(f"search_tools found nothing for {args.query!r}")
            top = hits[0]["name"]
            report = {"client": f"python-sdk {SDK}", "top": top}
            report["tools_list_ns"] = await timed(lambda: session.list_tools())
            report["search_tools_ns"] = await timed(
                lambda: session.call_tool("search_tools", {"query": args.query, "limit": args.limit})
            )
            report["call_tool_ns"] = await timed(
                lambda: session.call_tool("call_tool", {"name": top, "arguments": {"text": args.text}})
            )
            return report


try:
    print(json.dumps(anyio.run(main)))
except Exception as e:  # noqa: BLE001 - tool-search reports the reason as "not measured"
    print(f"sdk_search.py: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
