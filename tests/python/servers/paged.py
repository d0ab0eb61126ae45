"""A low-level MCP server that pages `tools/list` (three tools per page) and gives its tools a
field rmcp's typed `Tool` does not know (`execution`), to check roster pages to the end and keeps
unknown fields.

Usage: paged.py [TOOL_COUNT]
"""

from __future__ import annotations

import sys

import anyio
import mcp.server.stdio
from mcp import types
from mcp.server.lowlevel import Server

COUNT = int(sys.argv[1]) if len(sys.argv) > 1 else 8
PAGE = 3
TOOLS = [
    types.Tool(
        name=f"tool_{i:02d}",
        description=f"Tool number {i}",
        input_schema={"type": "object", "properties": {}},
        execution=types.ToolExecution(task_support="optional"),
    )
    for i in range(COUNT)
]


async def list_tools(ctx, params):
    start = int(params.cursor) if params is not None and params.cursor else 0
    page = TOOLS[start : start + PAGE]
    following = start + PAGE
    return types.ListToolsResult(tools=page, next_cursor=str(following) if following < COUNT else None)


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


server = Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with mcp.server.stdio.stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
