"""An MCP server whose one tool, `echo_arguments`, answers with the arguments it was called
with, as JSON: to check roster gives a server a client's arguments as the client wrote them (a
whole number past 2^64 stays whole; Python reads it exactly).

With `--resumable` (streamable HTTP) it keeps its events for a client to resume a stream from,
and `closes_its_stream` sends a log message, closes its call's response stream, and answers on
the stream the client resumes (SEP-1699 polling).

Usage: echo_arguments.py [--transport stdio|sse|streamable-http] [--port PORT] [--json-response]
                         [--resumable]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http import EventMessage, EventStore

parser = argparse.ArgumentParser()
parser.add_argument("--transport", default="stdio")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--json-response", action="store_true")
parser.add_argument("--resumable", action="store_true")
args = parser.parse_args()

mcp = MCPServer("echo-arguments")


@mcp.tool()
def echo_arguments(big: int, text: str, nested: dict) -> str:
    """Answers with its arguments as JSON."""
    return json.dumps({"big": big, "text": text, "nested": nested}, ensure_ascii=False)


@mcp.tool()
async def closes_its_stream(ctx: Context) -> str:
    """Logs, closes its response stream, and answers once the client has resumed it."""
    await ctx.info("before the stream closed")
    await ctx.close_sse_stream()
    await asyncio.sleep(0.3)
    return "answered after the stream closed"


class Events(EventStore):
    """Every event of every stream, in memory."""

    def __init__(self) -> None:
        self.events: list[tuple[str, str, object]] = []
        self.ids = itertools.count(1)

    async def store_event(self, stream_id, message):
        event_id = str(next(self.ids))
        self.events.append((event_id, stream_id, message))
        return event_id

    async def replay_events_after(self, last_event_id, send_callback):
        stream = next((s for e, s, _ in self.events if e == last_event_id), None)
        if stream is None:
            return None
        after = False
        for event_id, stream_id, message in list(self.events):
            if after and stream_id == stream and message is not None:
                await send_callback(EventMessage(message, event_id))
            after = after or event_id == last_event_id
        return stream


if args.transport == "sse":
    mcp.run("sse", host="127.0.0.1", port=args.port)
elif args.transport == "streamable-http":
    resumable = {"event_store": Events(), "retry_interval": 100} if args.resumable else {}
    mcp.run(
        "streamable-http",
        host="127.0.0.1",
        port=args.port,
        json_response=args.json_response,
        **resumable,
    )
else:
    mcp.run()
