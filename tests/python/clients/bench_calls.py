"""The official Python SDK as a client in bench/run, on either line: 1.x (`ClientSession` +
`streamablehttp_client`, as most 1.x code is written) or 2.x (the unified `Client`, `auto` mode,
its default list cache on). One session: WARMUP untimed, then CALLS timed sequential
`tools/call` of the echo tool, on one keep-alive connection.

Prints one JSON object in the shape `loadgen calls` prints, with the raw latencies
(`latencies_ns`); bench-report computes the percentiles, so every client is summarised alike.

Usage: bench_calls.py [--label L] [--out FILE] [--calls N] [--warmup N] [--time-limit S]
                      (--url URL | --sse URL | --stdio CMD [ARGS...])
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from importlib.metadata import version

import anyio

parser = argparse.ArgumentParser()
parser.add_argument("--label", default="target")
parser.add_argument("--out")
parser.add_argument("--calls", type=int, default=1000)
parser.add_argument("--warmup", type=int, default=50)
parser.add_argument("--time-limit", type=float, default=30.0)
parser.add_argument("--url")
parser.add_argument("--sse")
parser.add_argument("--stdio", nargs=argparse.REMAINDER)
args = parser.parse_args()

SDK = version("mcp")
MAJOR = int(SDK.split(".")[0])


def resolve_echo(tools) -> tuple[str, str]:
    """The echo tool under its exposed name (`echo` direct, `SERVER__echo` behind a gateway) and
    the name of its one argument (`text` for the bench's echo server, `message` for
    server-everything)."""
    found = next((t for t in tools if t.name == "echo"), None) or next(
        (t for t in tools if t.name.endswith("__echo")), None
    )
    if found is None:
        raise RuntimeError(f"no echo tool among {[t.name for t in tools]}")
    schema = (found.inputSchema if MAJOR < 2 else found.input_schema) or {}
    required = schema.get("required") or ["text"]
    return found.name, required[0]


async def timed(call, report: dict) -> None:
    """WARMUP untimed calls, then up to CALLS timed ones (stopping at the time limit)."""
    for _ in range(args.warmup):
        await call()
    latencies: list[int] = []
    started = time.perf_counter_ns()
    deadline = started + int(args.time_limit * 1e9)
    for _ in range(args.calls):
        t0 = time.perf_counter_ns()
        if t0 >= deadline:
            report["timed_out"] = True
            break
        try:
            result = await call()
            took = time.perf_counter_ns() - t0
            if result.isError if MAJOR < 2 else result.is_error:
                report["errors"] += 1
                report["first_error"] = report["first_error"] or f"tool error: {result.content}"
            else:
                latencies.append(took)
        except Exception as e:  # noqa: BLE001 - counted and reported, like loadgen does
            report["errors"] += 1
            report["first_error"] = report["first_error"] or f"{type(e).__name__}: {e}"
    elapsed = (time.perf_counter_ns() - started) / 1e9
    report["ok"] = len(latencies)
    report["elapsed_s"] = elapsed
    report["calls_per_s"] = len(latencies) / elapsed if elapsed > 0 else 0.0
    report["latencies_ns"] = latencies


async def run_v1(report: dict) -> None:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.sse import sse_client
    from mcp.client.stdio import stdio_client

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from mcp.client.streamable_http import streamablehttp_client

    if args.url:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            transport = streamablehttp_client(args.url)
    elif args.sse:
        transport = sse_client(args.sse)
    else:
        command, *rest = args.stdio
        transport = stdio_client(StdioServerParameters(command=command, args=rest))
    async with transport as streams:
        read, write = streams[0], streams[1]
        async with ClientSession(read, write) as session:
            init = await session.initialize()
            report["protocol_version"] = str(init.protocolVersion)
            tools = await session.list_tools()
            tool, arg = resolve_echo(tools.tools)
            report["tool"] = tool
            await timed(lambda: session.call_tool(tool, {arg: "hello from session 0"}), report)


async def run_v2(report: dict) -> None:
    from mcp import StdioServerParameters
    from mcp.client.client import Client
    from mcp.client.sse import sse_client
    from mcp.client.streamable_http import streamable_http_client

    if args.url:
        server = streamable_http_client(args.url)
    elif args.sse:
        server = sse_client(args.sse)
    else:
        command, *rest = args.stdio
        server = StdioServerParameters(command=command, args=rest)
    async with Client(server, mode="auto") as client:
        report["protocol_version"] = client.protocol_version
        tools = await client.list_tools()
        tool, arg = resolve_echo(tools.tools)
        report["tool"] = tool
        await timed(lambda: client.call_tool(tool, {arg: "hello from session 0"}), report)


async def main() -> dict:
    if not (args.url or args.sse or args.stdio):
        raise SystemExit("give --url URL, --sse URL or --stdio CMD [ARGS...]")
    report: dict = {
        "kind": "calls",
        "label": args.label,
        "client": f"python-sdk {SDK}",
        "transport": "stdio" if args.stdio else "sse" if args.sse else "http",
        "sessions": 1,
        "calls_per_session": args.calls,
        "ok": 0,
        "errors": 0,
        "first_error": None,
        "timed_out": False,
    }
    await (run_v1(report) if MAJOR < 2 else run_v2(report))
    return report


try:
    text = json.dumps(anyio.run(main))
except Exception as e:  # noqa: BLE001 - bench/run records the reason as "not measured"
    print(f"bench_calls.py: {type(e).__name__}: {e}", file=sys.stderr)
    sys.exit(1)
if args.out:
    with open(args.out, "w") as f:
        f.write(text + "\n")
print(text)
