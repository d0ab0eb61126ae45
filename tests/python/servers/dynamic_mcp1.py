"""A dynamic MCP server written with the official Python SDK's 1.x line (`FastMCP`), as most
servers in the wild still are: it adds and removes tools at run time and sends
`notifications/tools/list_changed` through its session. Stdio only; run it with the 1.x venv
(`.venv-mcp1`, installed by scripts/test).

Usage: dynamic_mcp1.py [--name NAME]
"""

from __future__ import annotations

import argparse

import anyio
from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel.server import NotificationOptions
from mcp.server.stdio import stdio_server

parser = argparse.ArgumentParser()
parser.add_argument("--name", default="legacy")
args = parser.parse_args()

mcp = FastMCP(args.name, log_level="WARNING")


@mcp.tool()
def echo(text: str) -> str:
    """Echo the text back."""
    return f"{args.name}: {text}"


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Add a tool named `name` that answers with its own name, and announce it."""

    def added() -> str:
        return f"I am {name}"

    mcp.add_tool(added, name=name, description=f"Added at run time: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool()
async def remove_tool(name: str, ctx: Context) -> str:
    """Remove a tool added with add_tool, and announce it."""
    mcp.remove_tool(name)
    await ctx.session.send_tool_list_changed()
    return f"removed {name}"


async def main() -> None:
    # FastMCP.run() announces no listChanged capability; this server does send the notification.
    server = mcp._mcp_server
    options = server.create_initialization_options(NotificationOptions(tools_changed=True))
    async with stdio_server() as (read, write):
        await server.run(read, write, options)


anyio.run(main)
