"""Is the next request after a tool change fresh? The official Python SDK as a plain host
drives it, on either SDK line:

- 2.x: the unified `Client` in `auto` mode (it negotiates 2026-07-28 with roster) with its list
  cache ON (the default `CacheConfig`, which honours `ttlMs`/`cacheScope`);
- 1.x: `ClientSession` + `streamablehttp_client`, the way most 1.x hosts are written.

For each server named with --server (behind roster at --url, tools `SERVER__*`): list the tools,
call `SERVER__echo`, call `SERVER__add_tool` (the server adds `fresh` and sends `list_changed`
before it answers), list again at once, call the new tool, call `SERVER__remove_tool`, list again
at once, call the removed tool. No waiting for notifications in between: the very next request
is what is checked.

Prints one JSON object of what it observed; the Rust test asserts on it.

Usage: next_list.py --url URL --server NAME [--server NAME...]
"""

from __future__ import annotations

import argparse
import warnings
from contextlib import asynccontextmanager
from importlib.metadata import version

import roster_client
from roster_client import WAIT

parser = argparse.ArgumentParser()
parser.add_argument("--url", required=True)
parser.add_argument("--server", action="append", required=True)
args = parser.parse_args()

SDK = version("mcp")
MAJOR = int(SDK.split(".")[0])


class Host:
    """What the scenario needs of a client: list names, call a tool."""

    protocol_version: str | None = None
    cache_on: bool = False

    def __init__(self) -> None:
        self.hints: list[dict] = []

    async def names(self) -> list[str]:
        raise NotImplementedError

    async def call(self, name: str, arguments: dict) -> dict:
        """`{"texts": [...], "is_error": bool}`, or `{"code": int, "message": str}` on a
        JSON-RPC error."""
        raise NotImplementedError


@asynccontextmanager
async def host_v1():
    from mcp import ClientSession
    from mcp.shared.exceptions import McpError
    from mcp.types import TextContent

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from mcp.client.streamable_http import streamablehttp_client

        transport = streamablehttp_client(args.url, timeout=WAIT)
    async with transport as (read, write, _session_id):
        async with ClientSession(read, write) as session:
            init = await session.initialize()

            class V1(Host):
                async def names(self) -> list[str]:
                    return [t.name for t in (await session.list_tools()).tools]

                async def call(self, name: str, arguments: dict) -> dict:
                    try:
                        r = await session.call_tool(name, arguments)
                    except McpError as e:
                        return {"code": e.error.code, "message": e.error.message}
                    texts = [c.text for c in r.content if isinstance(c, TextContent)]
                    return {"texts": texts, "is_error": bool(r.isError)}

            host = V1()
            host.protocol_version = str(init.protocolVersion)
            yield host


@asynccontextmanager
async def host_v2():
    import httpx2
    from mcp.client.client import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.exceptions import MCPError
    from mcp.types import TextContent

    http = httpx2.AsyncClient(timeout=WAIT)
    # `cache` left at its default: the list cache is on, as a host built on 2.x has it.
    async with Client(streamable_http_client(args.url, http_client=http), mode="auto") as client:

        class V2(Host):
            async def names(self) -> list[str]:
                result = await client.list_tools()
                # What roster promised the cache, for the report (a failure reads better with it).
                self.hints.append({"ttl_ms": result.ttl_ms, "cache_scope": result.cache_scope})
                return [t.name for t in result.tools]

            async def call(self, name: str, arguments: dict) -> dict:
                try:
                    r = await client.call_tool(name, arguments)
                except MCPError as e:
                    return {"code": e.error.code, "message": e.error.message}
                texts = [c.text for c in r.content if isinstance(c, TextContent)]
                return {"texts": texts, "is_error": bool(r.is_error)}

        host = V2()
        host.protocol_version = client.protocol_version
        host.cache_on = client.cache is not None
        yield host


async def main() -> dict:
    report: dict = {"sdk": SDK}
    async with host_v1() if MAJOR < 2 else host_v2() as host:
        report["protocol_version"] = host.protocol_version
        report["cache_on"] = host.cache_on
        for server in args.server:
            seen: dict = {}
            seen["initial_tools"] = await host.names()
            seen["echo"] = await host.call(f"{server}__echo", {"text": "hi"})
            seen["add"] = await host.call(f"{server}__add_tool", {"name": "fresh"})
            seen["tools_after_add"] = await host.names()
            seen["fresh"] = await host.call(f"{server}__fresh", {})
            seen["remove"] = await host.call(f"{server}__remove_tool", {"name": "fresh"})
            seen["tools_after_remove"] = await host.names()
            seen["fresh_after_remove"] = await host.call(f"{server}__fresh", {})
            report[server] = seen
        report["list_cache_hints"] = host.hints
    return report


roster_client.report(main)
