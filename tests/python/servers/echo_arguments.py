"""An MCP server whose one tool, `echo_arguments`, answers with the arguments it was called
with, as JSON: to check roster gives a server a client's arguments as the client wrote them (a
whole number past 2^64 stays whole; Python reads it exactly).

Usage: echo_arguments.py [--transport stdio|sse|streamable-http] [--port PORT] [--json-response]
"""

from __future__ import annotations

import argparse
import json

from mcp.server.mcpserver import MCPServer

parser = argparse.ArgumentParser()
parser.add_argument("--transport", default="stdio")
parser.add_argument("--port", type=int, default=0)
parser.add_argument("--json-response", action="store_true")
args = parser.parse_args()

mcp = MCPServer("echo-arguments")


@mcp.tool()
def echo_arguments(big: int, text: str, nested: dict) -> str:
    """Answers with its arguments as JSON."""
    return json.dumps({"big": big, "text": text, "nested": nested}, ensure_ascii=False)


if args.transport == "sse":
    mcp.run("sse", host="127.0.0.1", port=args.port)
elif args.transport == "streamable-http":
    mcp.run("streamable-http", host="127.0.0.1", port=args.port, json_response=args.json_response)
else:
    mcp.run()
