"""What the client scripts here share: the arguments that say where roster is, what a 2.x `Client`
connects to, a call's answer as the wire carries it, and the one JSON report each script prints
for its Rust test.

The SDK is imported inside the functions, so scripts on the SDK's 1.x line use this module too.
"""

from __future__ import annotations

import argparse
import json
import time
import traceback
import sys

import anyio

WAIT = 30  # seconds; bounds a hang, measures nothing


def parser() -> argparse.ArgumentParser:
    """An argument parser that knows the target: `--url URL [--token T]` or
    `--stdio ROSTER CONFIG` (roster started by the client, `roster --config CONFIG serve`)."""
    p = argparse.ArgumentParser()
    p.add_argument("--url")
    p.add_argument("--token")
    p.add_argument("--stdio", nargs=2, metavar=("ROSTER", "CONFIG"))
    return p


def bearer(token: str | None) -> dict | None:
    """The HTTP headers that carry `token`, if there is one."""
    return {"Authorization": f"Bearer {token}"} if token else None


def stdio_server(stdio: list[str]):
    """`roster --config CONFIG serve` as the SDK's stdio server parameters."""
    from mcp import StdioServerParameters

    roster, config = stdio
    return StdioServerParameters(command=roster, args=["--config", config, "serve"])


def server(args, timeout: float = WAIT):
    """What a 2.x `Client` connects to: roster at `--url` over streamable HTTP (with the bearer
    token), or `roster serve` over stdio."""
    if not args.url:
        return stdio_server(args.stdio)
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(headers=bearer(args.token), timeout=timeout)
    return streamable_http_client(args.url, http_client=http)


async def on_the_wire(call, error_type) -> dict:
    """A tool call's result as the wire carries it, or its JSON-RPC error (an `error_type`, which
    the two SDK lines name differently) as `{"error": {"code", "message"}}`."""
    try:
        result = await call
    except error_type as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


async def run_steps(steps: list, list_tools, call_tool, error_type, seconds: list | None = None) -> list:
    """Runs `["list"]` (the tool names of `tools/list`) and `["call", NAME, ARGUMENTS]` (the
    answer as `on_the_wire` gives it) steps with the session's `list_tools` and `call_tool`.
    With `seconds`, each step's wall time is appended to it (how long roster held it)."""
    seen: list = []
    for step in steps:
        started = time.monotonic()
        if step[0] == "list":
            tools = await list_tools()
            seen.append([t.name for t in tools.tools])
        else:
            _, name, arguments = step
            seen.append(await on_the_wire(call_tool(name, arguments), error_type))
        if seconds is not None:
            seconds.append(time.monotonic() - started)
    return seen


def report(main) -> None:
    """Runs `main` and prints the report it returns; on any failure prints `{"error": ...}` and
    exits 1, which the Rust test shows."""
    try:
        print(json.dumps(anyio.run(main)))
    except Exception as e:  # noqa: BLE001 - reported to the Rust test
        traceback.print_exc()
        print(json.dumps({"error": f"{type(e).__name__}: {e}"}))
        sys.exit(1)
