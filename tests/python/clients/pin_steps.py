"""Walks roster through a pin decision with the official Python SDK client: lists and calls
tools, runs a person's command (`roster tools approve`) between steps in the same session, and
waits for the `notifications/tools/list_changed` that follows.

Usage: pin_steps.py (--url URL [--token T] | --stdio ROSTER CONFIG) --steps JSON

Steps, each answered by one entry of the report's `results`:
  ["list"]                 -> {"tools": {name: description}}
  ["call", NAME, ARGS]     -> the result as the wire carries it (or the JSON-RPC error)
  ["run", [ARGV...]]       -> {"code", "stdout", "stderr"} of a command a person runs
  ["wait:list_changed"]    -> {"list_changed": true|false} (waits at most 30 s)
"""

from __future__ import annotations

import json
import subprocess

import anyio
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import ToolListChangedNotification

import roster_client

parser = roster_client.parser()
parser.add_argument("--steps", required=True)
args = parser.parse_args()


async def main() -> dict:
    out: dict = {"results": []}
    changed = anyio.Event()

    async def on_message(message) -> None:
        nonlocal changed
        if isinstance(message, ToolListChangedNotification):
            changed.set()

    server = roster_client.server(args)
    async with Client(server, mode="legacy", cache=None, message_handler=on_message) as client:
        for step in json.loads(args.steps):
            kind = step[0]
            if kind == "list":
                tools = await client.list_tools()
                out["results"].append({"tools": {t.name: t.description for t in tools.tools}})
            elif kind == "call":
                _, name, arguments = step
                out["results"].append(
                    await roster_client.on_the_wire(client.call_tool(name, arguments), MCPError)
                )
            elif kind == "run":
                done = await anyio.to_thread.run_sync(
                    lambda: subprocess.run(step[1], capture_output=True, text=True, timeout=60)
                )
                out["results"].append(
                    {"code": done.returncode, "stdout": done.stdout, "stderr": done.stderr}
                )
            elif kind == "wait:list_changed":
                with anyio.move_on_after(roster_client.WAIT):
                    await changed.wait()
                out["results"].append({"list_changed": changed.is_set()})
                changed = anyio.Event()
            else:
                raise ValueError(f"unknown step {step!r}")
    return out


roster_client.report(main)
