"""A client that answers what servers ask through roster: the official Python SDK client with
sampling, elicitation and roots callbacks (and a log callback), calling tools and prompts.

Usage: answering_client.py (--url URL | --stdio ROSTER CONFIG) --mode legacy|2026-07-28
                           --calls JSON [--declare none] [--log-level LEVEL]

`--calls` is a JSON list of `[tool, arguments]`; a name starting with `prompt:` is a
`prompts/get` of the rest; `["wait:logs", {"count": N}]` waits (at most 30 s) until N log
messages arrived. `--declare none` registers no callbacks (the client declares no
sampling, elicitation or roots). `--log-level` asks for log messages (`logging/setLevel` on an
initialize-era session, the per-request `_meta` level on 2026-07-28).

Prints one JSON object: `results` (each call's result, or `{"error": {code, message}}`), and what
the callbacks saw: `sampling` (the prompt texts), `elicitation` (the messages), `roots` (how many
times roots were listed), `logs` (the log messages' data).
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback

import anyio
from mcp import StdioServerParameters
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.types import CreateMessageResult, ElicitResult, ListRootsResult, Root, TextContent

parser = argparse.ArgumentParser()
parser.add_argument("--url")
parser.add_argument("--stdio", nargs=2, metavar=("ROSTER", "CONFIG"))
parser.add_argument("--mode", required=True)
parser.add_argument("--calls", required=True)
parser.add_argument("--declare", default="all")
parser.add_argument("--log-level")
args = parser.parse_args()

# What the user "types" into any form: each field the schema asks for that is known here.
ANSWERS = {
    "name": "Alice",
    "username": "alice",
    "email": "alice@example.com",
    "ok": True,
    "color": "blue",
    "context": "the tests",
}

seen: dict = {"sampling": [], "elicitation": [], "roots": 0, "logs": []}


async def on_sampling(context, params) -> CreateMessageResult:
    text = " ".join(m.content.text for m in params.messages if isinstance(m.content, TextContent))
    seen["sampling"].append(text)
    return CreateMessageResult(
        role="assistant",
        content=TextContent(type="text", text=f"sampled reply to: {text}"),
        model="answering-client-model",
        stop_reason="endTurn",
    )


async def on_elicitation(context, params) -> ElicitResult:
    seen["elicitation"].append(params.message)
    properties = (getattr(params, "requested_schema", None) or {}).get("properties", {})
    content = {key: ANSWERS[key] for key in properties if key in ANSWERS}
    return ElicitResult(action="accept", content=content)


async def on_roots(context) -> ListRootsResult:
    seen["roots"] += 1
    return ListRootsResult(roots=[Root(uri="file:///work/project", name="project")])


async def on_log(params) -> None:
    seen["logs"].append(params.data)


async def main() -> dict:
    if args.url:
        server = streamable_http_client(args.url)
    else:
        roster, config = args.stdio
        server = StdioServerParameters(command=roster, args=["--config", config, "serve"])
    callbacks = {}
    if args.declare == "all":
        callbacks = {
            "sampling_callback": on_sampling,
            "elicitation_callback": on_elicitation,
            "list_roots_callback": on_roots,
        }
    modern = args.mode != "legacy"
    level = args.log_level if modern else None
    out: dict = {"results": []}
    async with Client(
        server, mode=args.mode, cache=None, logging_callback=on_log, log_level=level, **callbacks
    ) as client:
        if args.log_level and not modern:
            await client.set_logging_level(args.log_level)
        for name, arguments in json.loads(args.calls):
            if name == "wait:logs":
                # Waits (at most 30 s) until this many log messages arrived in all.
                with anyio.move_on_after(30):
                    while len(seen["logs"]) < arguments["count"]:
                        await anyio.sleep(0.02)
                continue
            try:
                if name.startswith("prompt:"):
                    result = await client.get_prompt(name.removeprefix("prompt:"), arguments)
                else:
                    result = await client.call_tool(name, arguments)
                out["results"].append(result.model_dump(mode="json", by_alias=True, exclude_none=True))
            except MCPError as e:
                out["results"].append({"error": {"code": e.error.code, "message": e.error.message}})
    out.update(seen)
    return out


try:
    print(json.dumps(anyio.run(main)))
except Exception as e:  # noqa: BLE001 - reported to the Rust test
    traceback.print_exc()
    print(json.dumps({"error": f"{type(e).__name__}: {e}", **seen}))
    sys.exit(1)
