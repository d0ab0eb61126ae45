"""The official Python SDK as a client in bench/run, on either line: 1.x (`ClientSession` +
`streamablehttp_client`, as most 1.x code is written) or 2.x (the unified `Client`, `auto` mode,
its default list cache on). One session: WARMUP untimed, then CALLS timed sequential
`tools/call` of the echo tool, on one keep-alive connection.

Prints one JSON object in the shape `loadgen calls` prints, with the raw latencies
(`latencies_ns`); bench-report computes the percentiles, so every client is summarised alike.

Usage: bench_calls.py [--label L] [--out FILE] [--calls N] [--warmup N] [--time-limit S]
                      [--total-limit S] (--url URL | --sse URL | --stdio CMD [ARGS...])

--time-limit bounds the timed calls; --total-limit, when given, bounds the whole run (connecting,
the first listing, warm-up and calls): a step still unanswered then is an error, and the report
is written with what was measured.
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
parser.add_argument("--total-limit", type=float)
parser.add_argument("--url")
parser.add_argument("--sse")
parser.add_argument("--stdio", nargs=argparse.REMAINDER)
args = parser.parse_args()

SDK = version("mcp")
MAJOR = int(SDK.split(".")[0])
HARD_AT = (
    time.monotonic() + args.total_limit if args.total_limit is not None else None
)


class Unanswered(Exception):
    """A step still unanswered at the total limit."""


def left() -> float:
    """Seconds until the total limit (infinite without one)."""
    return float("inf") if HARD_AT is None else max(0.0, HARD_AT - time.monotonic())


async def bounded(awaitable, what: str):
    """`awaitable`'s result, or Unanswered naming `what` once the total limit passes."""
    if HARD_AT is None:
        return await awaitable
    with anyio.move_on_after(left()) as scope:
        return await awaitable
    if scope.cancelled_caught:
        raise Unanswered(f"{what} unanswered at the total limit")


def leaves(e: BaseException) -> list[BaseException]:
    """The exceptions inside `e`, exception groups (the SDK's task groups) unwrapped."""
    if isinstance(e, BaseExceptionGroup):
        return [leaf for inner in e.exceptions for leaf in leaves(inner)]
    return [e]


def resolve_echo(tools) -> tuple[str, str]:
    """The echo tool under its exposed name (`echo` direct; behind a gateway, the shortest name
    that ends in a separator and `echo`: `SERVER__echo`, `SERVER/echo`, as loadgen resolves it)
    and the name of its one argument (`text` for the bench's echo server, `message` for
    server-everything)."""
    found = next((t for t in tools if t.name == "echo"), None) or min(
        (t for t in tools if t.name[-5:-4] in "_./-" and t.name.endswith("echo") and len(t.name) > 4),
        key=lambda t: len(t.name),
        default=None,
    )
    if found is None:
        raise RuntimeError(f"no echo tool among {[t.name for t in tools]}")
    schema = (found.inputSchema if MAJOR < 2 else found.input_schema) or {}
    required = schema.get("required") or ["text"]
    return found.name, required[0]


async def listed(list_tools, report: dict):
    """The first listing, timed into the report."""
    t0 = time.perf_counter_ns()
    tools = await bounded(list_tools(), "tools/list")
    report["list_ms"] = (time.perf_counter_ns() - t0) / 1e6
    return tools


async def timed(call, report: dict) -> None:
    """WARMUP untimed calls, then up to CALLS timed ones (stopping at the time limit)."""
    warmup_max = 0
    for _ in range(args.warmup):
        if left() <= 0:
            break
        t0 = time.perf_counter_ns()
        try:
            await bounded(call(), "a warm-up call")
        except Unanswered:
            raise
        except Exception:  # noqa: BLE001 - a warm-up call's failure is not timed
            pass
        warmup_max = max(warmup_max, time.perf_counter_ns() - t0)
    if args.warmup > 0:
        report["warmup_max_ms"] = warmup_max / 1e6
    latencies: list[int] = []
    report["latencies_ns"] = latencies
    started = time.perf_counter_ns()
    deadline = started + int(args.time_limit * 1e9)
    for _ in range(args.calls):
        t0 = time.perf_counter_ns()
        if t0 >= deadline or left() <= 0:
            report["timed_out"] = True
            break
        try:
            result = await bounded(call(), "a call")
            took = time.perf_counter_ns() - t0
            if result.isError if MAJOR < 2 else result.is_error:
                report["errors"] += 1
                report["first_error"] = report["first_error"] or f"tool error: {result.content}"
            else:
                latencies.append(took)
        except Exception as e:  # noqa: BLE001 - counted and reported, like loadgen does
            report["errors"] += 1
            ms = (time.perf_counter_ns() - t0) / 1e6
            report["first_error"] = report["first_error"] or f"{type(e).__name__}: {e} (after {ms:.0f} ms)"
            if isinstance(e, Unanswered):
                break
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
            init = await bounded(session.initialize(), "the connection")
            report["protocol_version"] = str(init.protocolVersion)
            tools = await listed(session.list_tools, report)
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
        tools = await listed(client.list_tools, report)
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
    # The whole run, closing included, ends at the total limit: what was measured is reported
    # and a step still unanswered is an error.
    with anyio.move_on_after(left() + (1 if HARD_AT is not None else 0)) as scope:
        try:
            await (run_v1(report) if MAJOR < 2 else run_v2(report))
        except BaseException as e:  # noqa: BLE001 - the SDK's task groups wrap what we raise
            unanswered = next((x for x in leaves(e) if isinstance(x, Unanswered)), None)
            if unanswered is None:
                raise
            report["errors"] += 1
            report["first_error"] = report["first_error"] or str(unanswered)
            report["timed_out"] = True
    if scope.cancelled_caught and "list_ms" not in report and not report["errors"]:
        # The 2.x Client connects on entering its context, outside `bounded`.
        report["errors"] += 1
        report["first_error"] = "the connection unanswered at the total limit"
        report["timed_out"] = True
    return report


try:
    text = json.dumps(anyio.run(main))
except Exception as e:  # noqa: BLE001 - bench/run records the reason as "not measured"
    reasons = "; ".join(f"{type(x).__name__}: {x}" for x in leaves(e))
    print(f"bench_calls.py: {reasons}", file=sys.stderr)
    sys.exit(1)
if args.out:
    with open(args.out, "w") as f:
        f.write(text + "\n")
print(text)
