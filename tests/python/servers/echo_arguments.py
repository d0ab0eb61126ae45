"""A low-level MCP server whose one tool, `echo_arguments`, answers with the arguments it was
called with, as JSON: to check roster gives a server a client's arguments as the client wrote
them (a whole number past 2^64 stays whole; Python reads it exactly).

Usage: echo_arguments.py
"""

from __future__ import annotations

import json

import anyio
import mcp.server.stdio
from mcp import types
from mcp.server.lowlevel import Server

TOOL = types.Tool(
    name="echo_arguments",
    description="Answers with its arguments as JSON",
    input_schema={"type": "object"},
)


async def list_tools(ctx, params):
    return types.ListToolsResult(tools=[TOOL])


async def call_tool(ctx, params):
    text = json.dumps(params.arguments or {}, ensure_ascii=False)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)])


server = Server("echo-arguments", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
