"""A dynamic MCP server for roster's integration tests, written with the official Python SDK.

It adds and removes tools at run time and tells its client with
`notifications/tools/list_changed` in both protocol eras: on an `initialize` session through
the session, on a 2026-07-28 session through the `subscriptions/listen` bus. It counts the
`tools/list` requests it answers and reports the count through the `listing_count` tool, so a
test can check how often roster listed it.

Usage: dynamic.py [--name NAME] [--fail-first-listing] [--garbage] [--exit-at-start]
                  [--transport stdio|sse|streamable-http] [--port PORT]
                  [--hang-listing-after N] [--slow-listing SECONDS] [--ttl-ms MS]
                  [--echo-description TEXT] [--echo-title TEXT] [--echo-meta JSON]
                  [--echo-icon URL] [--throttle-calls N] [--throttle-status CODE]
                  [--throttle-retry-after SECONDS]

`--echo-title`, `--echo-meta` (a JSON object) and `--echo-icon` (a URL) give `echo` the parts a
host reads besides its description; the `dress_echo` tool changes them at run time.

`--throttle-calls N` (streamable HTTP): the first N POSTs of a `tools/call` are refused with
HTTP `--throttle-status` (429 unless given) before the server reads them, with `Retry-After`
when `--throttle-retry-after` is given — a server shedding load, or behind a proxy that does.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

parser = argparse.ArgumentParser()
parser.add_argument("--name", default="dynamic")
parser.add_argument("--fail-first-listing", action="store_true")
parser.add_argument("--garbage", action="store_true")
parser.add_argument("--exit-at-start", action="store_true")
parser.add_argument("--transport", default="stdio")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--hang-listing-after", type=int, default=0)
# Answer tools/list this many seconds late, with the tools as they were when it arrived.
parser.add_argument("--slow-listing", type=float, default=0.0)
# The tools/list freshness hint for 2026-07-28 sessions (the SDK default is 0: never fresh).
parser.add_argument("--ttl-ms", type=int, default=3_600_000)
# What `echo` says it does at start (a redefined tool that was approved before a restart).
parser.add_argument("--echo-description", default="Echo the text back.")
parser.add_argument("--echo-title", default="")
parser.add_argument("--echo-meta", default="")
parser.add_argument("--echo-icon", default="")
parser.add_argument("--throttle-calls", type=int, default=0)
parser.add_argument("--throttle-status", type=int, default=429)
parser.add_argument("--throttle-retry-after", default=None)
args = parser.parse_args()

if args.exit_at_start:
    print("this server always fails", file=sys.stderr)
    sys.exit(3)

if args.garbage:
    # Before the SDK owns stdout: a banner line, a JSON scalar, half a JSON object.
    sys.stdout.write("Starting dynamic server...\n42\n{\"jsonrpc\": \n")
    sys.stdout.flush()
    sys.stdout.buffer.write(b"\xff\xfe not UTF-8\n")
    sys.stdout.buffer.flush()

# Imported after the early exit, which so stays fast (the SDK takes a while to import).
import anyio  # noqa: E402
from mcp.server.caching import CacheHint  # noqa: E402
from mcp.server.mcpserver import Context, MCPServer  # noqa: E402
from pydantic import BaseModel  # noqa: E402


class CountingServer(MCPServer):
    listings = 0

    async def _handle_list_tools(self, ctx, params):  # type: ignore[override]
        CountingServer.listings += 1
        print(f"tools/list #{CountingServer.listings}", file=sys.stderr, flush=True)
        if args.fail_first_listing and CountingServer.listings == 1:
            raise RuntimeError("first listing fails on purpose")
        if args.hang_listing_after and CountingServer.listings > args.hang_listing_after:
            await anyio.sleep(3600)
        result = await super()._handle_list_tools(ctx, params)
        if args.slow_listing:
            await anyio.sleep(args.slow_listing)
        return result


mcp = CountingServer(
    name=args.name,
    log_level="WARNING",
    cache_hints={"tools/list": CacheHint(ttl_ms=args.ttl_ms)},
)


async def announce(ctx: Context, times: int = 1) -> None:
    for _ in range(times):
        # Only one of the two reaches the client, depending on the session's era.
        try:
            await ctx.session.send_tool_list_changed()
        except Exception:  # noqa: BLE001 - a modern session has no legacy channel
            pass
        await ctx.notify_tools_changed()


def echo(text: str) -> str:
    return f"{args.name}: {text}"


def dressed(title: str, meta: str, icon: str) -> dict:
    """`add_tool`'s arguments for a title, a `_meta` object (JSON) and an icon URL; each left
    empty is unset."""
    from mcp.types import Icon

    return {
        "title": title or None,
        "meta": json.loads(meta) if meta else None,
        "icons": [Icon(src=icon, mimeType="image/png")] if icon else None,
    }


ECHO = {"description": args.echo_description}
mcp.add_tool(
    echo,
    name="echo",
    description=args.echo_description,
    **dressed(args.echo_title, args.echo_meta, args.echo_icon),
)


def echo_with(field: str):
    """`echo` with one more string argument named `field` (its schema changes)."""

    def redefined(text: str, **extra: str) -> str:
        return f"{args.name}: {text}"

    import inspect

    params = [
        inspect.Parameter("text", inspect.Parameter.KEYWORD_ONLY, annotation=str),
        inspect.Parameter(field, inspect.Parameter.KEYWORD_ONLY, annotation=str, default=""),
    ]
    redefined.__signature__ = inspect.Signature(params, return_annotation=str)
    # Named as the original, so only the new argument tells the schemas apart.
    redefined.__name__ = redefined.__qualname__ = "echo"
    redefined.__annotations__ = {"text": str, field: str, "return": str}
    return redefined


@mcp.tool()
async def change_echo(description: str, ctx: Context, schema_field: str = "") -> str:
    """Give `echo` a new description (and, with `schema_field`, one more argument of that
    name) and announce the change."""
    mcp.remove_tool("echo")
    mcp.add_tool(echo_with(schema_field) if schema_field else echo, name="echo", description=description)
    ECHO["description"] = description
    await announce(ctx)
    return "changed"


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool named `name` that answers with its own name."""

    def added() -> str:
        return f"I am {name}"

    mcp.add_tool(added, name=name, description=f"Added at run time: {name}")
    await announce(ctx)
    return f"added {name}"


@mcp.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Remove a tool added with add_tool."""
    mcp.remove_tool(name)
    await announce(ctx)
    return f"removed {name}"


@mcp.tool()
async def add_prompt(name: str, ctx: Context) -> str:
    """Add a prompt named `name` and announce it with `notifications/prompts/list_changed`."""
    from mcp.server.mcpserver.prompts.base import Prompt

    def prompt() -> str:
        return f"prompt {name}"

    mcp.add_prompt(Prompt.from_function(prompt, name=name, description=f"Added at run time: {name}"))
    try:
        await ctx.session.send_prompt_list_changed()
    except Exception:  # noqa: BLE001 - a modern session has no legacy channel
        pass
    await ctx.notify_prompts_changed()
    return f"added prompt {name}"


@mcp.tool()
async def storm(count: int, ctx: Context) -> str:
    """Send `count` list_changed notifications in a burst (the tool list does not change)."""
    await announce(ctx, count)
    return f"sent {count}"


@mcp.tool()
async def storm_on_call(count: int, ctx: Context) -> str:
    """Send `count` list_changed notifications on this call's own stream, then answer: over
    streamable HTTP they travel with the answer, in order (unlike `storm`'s, on the stream of
    the session)."""
    from mcp.types import ToolListChangedNotification

    for _ in range(count):
        await ctx.session.send_notification(
            ToolListChangedNotification(), related_request_id=ctx.request_id
        )
    return f"sent {count}"


@mcp.tool()
def listing_count() -> int:
    """How many tools/list requests this server has answered."""
    return CountingServer.listings


@mcp.tool()
def pid() -> int:
    """This process's id."""
    return os.getpid()


@mcp.tool()
def garbage() -> str:
    """Write a non-JSON line straight to stdout, then answer normally."""
    sys.stdout.write("this is not JSON-RPC\n")
    sys.stdout.flush()
    return "wrote garbage"


@mcp.tool()
def flood_stderr(kib: int) -> str:
    """Write a line of invalid UTF-8, then `kib` KiB of text, to stderr; then answer."""
    sys.stderr.buffer.write(b"\xff\xfe not UTF-8 \xc3\n")
    line = b"x" * 1023 + b"\n"
    for _ in range(kib):
        sys.stderr.buffer.write(line)
    sys.stderr.buffer.flush()
    return f"flooded {kib}"


@mcp.tool()
def end_listen() -> str:
    """End every open subscriptions/listen stream gracefully (the server keeps running)."""
    mcp._lowlevel_server._request_handlers["subscriptions/listen"].handler.close()
    return "ended"


class Confirmation(BaseModel):
    confirm: bool


@mcp.tool()
async def confirm_delete(path: str, ctx: Context) -> str:
    """Ask the client's user (elicitation) before pretending to delete `path`."""
    result = await ctx.elicit(f"Delete {path}?", schema=Confirmation)
    if result.action == "accept":
        return f"accept confirm={result.data.confirm}"
    return result.action


CANCELLED = 0


@mcp.tool()
async def slow(seconds: float, ctx: Context) -> str:
    """Report progress, then sleep; counts the calls cancelled while sleeping."""
    global CANCELLED
    await ctx.report_progress(1, 2, "halfway")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        CANCELLED += 1
        raise
    return "done"


@mcp.tool()
async def note(text: str, ctx: Context) -> str:
    """Send `text` as a log message (notifications/message) while answering."""
    await ctx.log("warning", text)
    return f"noted {text}"


@mcp.tool()
def cancelled_count() -> int:
    """How many `slow` calls were cancelled by the client."""
    return CANCELLED


@mcp.tool()
def last_traceparent(ctx: Context) -> str:
    """The W3C trace context the request calling this tool (the last one this server got)
    carried, as JSON: `header` (the HTTP `traceparent` header) and `meta` (`_meta.traceparent`)."""
    headers = ctx.headers or {}
    meta = ctx.request_context.meta or {}
    return json.dumps({"header": headers.get("traceparent"), "meta": meta.get("traceparent")})


@mcp.tool()
async def dress_echo(ctx: Context, title: str = "", meta: str = "", icon: str = "") -> str:
    """Give `echo` this title, `_meta` (a JSON object) and icon (a URL), its description and
    schema as they are (each left empty is unset), and announce the change."""
    mcp.remove_tool("echo")
    mcp.add_tool(echo, name="echo", description=ECHO["description"], **dressed(title, meta, icon))
    await announce(ctx)
    return "dressed"


if args.transport == "stdio":
    mcp.run()
elif args.transport == "sse":
    mcp.run("sse", host="127.0.0.1", port=args.port)
elif args.throttle_calls == 0:
    mcp.run("streamable-http", host="127.0.0.1", port=args.port)
else:
    import uvicorn
    from asgi_body import read_request, replaying

    refused = 0

    def throttle(app):
        """ASGI wrapper: refuses the first `--throttle-calls` POSTs of a `tools/call`."""

        async def wrapped(scope, receive, send):
            global refused
            if scope["type"] != "http" or scope["method"] != "POST":
                return await app(scope, receive, send)
            body, request = await read_request(receive)
            if request and request.get("method") == "tools/call" and refused < args.throttle_calls:
                refused += 1
                headers = [(b"content-type", b"text/plain")]
                if args.throttle_retry_after is not None:
                    headers.append((b"retry-after", args.throttle_retry_after.encode()))
                await send({"type": "http.response.start", "status": args.throttle_status, "headers": headers})
                await send({"type": "http.response.body", "body": b"slow down\n"})
                return
            return await app(scope, replaying(body, receive), send)

        return wrapped

    uvicorn.run(throttle(mcp.streamable_http_app()), host="127.0.0.1", port=args.port, log_level="warning")
