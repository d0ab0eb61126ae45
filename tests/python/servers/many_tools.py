"""A low-level MCP server with many tools, for tests of roster's tool search among thousands.

Its tools read like a SaaS server's (`crm_create_invoice`, "Create an invoice in the crm
service."), made from fixed word lists, so every run serves the same tools. Pages of 500.

Usage: many_tools.py DOMAIN COUNT
"""

from __future__ import annotations

import itertools
import sys

import anyio
import mcp.server.stdio
from mcp import types
from mcp.server.lowlevel import Server

DOMAIN = sys.argv[1]
COUNT = int(sys.argv[2])
PAGE = 500
VERBS = ["create", "list", "get", "update", "delete", "archive", "export", "import", "assign",
         "approve", "sync", "merge", "tag", "schedule", "cancel", "restore", "share", "clone",
         "publish", "validate"]
NOUNS = ["invoice", "customer", "ticket", "campaign", "order", "shipment", "contract", "lead",
         "account", "subscription", "payment", "refund", "coupon", "product", "warehouse",
         "employee", "meeting", "survey", "report", "dashboard", "webhook", "attachment",
         "comment", "label", "project", "milestone", "budget", "vendor", "quote", "asset",
         "policy", "incident", "alert", "deployment", "pipeline", "segment", "audience",
         "playlist", "recipe", "booking", "room", "vehicle", "route", "device", "sensor",
         "forecast", "license", "certificate", "backup", "workspace"]


def tool(i: int, verb: str, noun: str) -> types.Tool:
    return types.Tool(
        name=f"{verb}_{noun}_{i}",
        description=f"{verb.capitalize()} a {noun} in the {DOMAIN} service (record {i}).",
        input_schema={
            "type": "object",
            "properties": {
                f"{noun}_id": {"type": "string", "description": f"The {noun}'s id in {DOMAIN}."},
                "note": {"type": "string", "description": "Why, for the audit log."},
            },
        },
    )


TOOLS = [tool(i, verb, noun) for i, (verb, noun) in
         zip(range(COUNT), itertools.cycle(itertools.product(VERBS, NOUNS)))]


async def list_tools(ctx, params):
    start = int(params.cursor) if params is not None and params.cursor else 0
    following = start + PAGE
    return types.ListToolsResult(tools=TOOLS[start:following],
                                 next_cursor=str(following) if following < COUNT else None)


async def call_tool(ctx, params):
    return types.CallToolResult(content=[types.TextContent(type="text", text=f"called {params.name}")])


server = Server(DOMAIN, on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with mcp.server.stdio.stdio_server() as (read, write):
        await server.run(read, write, server.create_initialization_options())


anyio.run(main)
