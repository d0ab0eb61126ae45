"""What one client identity sees of roster and what it may use, through the official Python SDK
client: the names of tools/list, prompts/list, resources/list and resources/templates/list (with
the tool list's cacheScope), then each of `--calls` (`[tool, arguments]`), `--prompts` (names
to get) and `--reads` (URIs to read) as the wire answers it.

Usage: identity_view.py --url URL [--token T] [--calls JSON] [--prompts JSON] [--reads JSON]
(streamable HTTP only)

Prints one JSON object: `tools`, `tools_cache_scope`, `prompts`, `resources`, `templates`,
`calls`, `prompt_gets`, `reads`. A connection roster refuses (401/403) is reported as
`{"refused": "HTTP 401: <WWW-Authenticate>"}` (exit 0), so a test can tell a refusal from a
failure of the script.
"""

from __future__ import annotations

import json
import sys

from mcp.client.client import Client
from mcp.shared.exceptions import MCPError

import roster_client

parser = roster_client.parser()
parser.add_argument("--calls", default="[]")
parser.add_argument("--prompts", default="[]")
parser.add_argument("--reads", default="[]")
args = parser.parse_args()


async def answer(call) -> dict:
    try:
        result = await call
    except MCPError as e:
        return {"error": {"code": e.error.code, "message": e.error.message}}
    return result.model_dump(mode="json", by_alias=True, exclude_none=True)


# Each HTTP answer's status and challenge: the SDK turns a 401/403 into a generic error.
answers: list[tuple[int, str]] = []


async def record(response) -> None:
    answers.append((response.status_code, response.headers.get("www-authenticate", "")))


def server():
    import httpx2
    from mcp.client.streamable_http import streamable_http_client

    http = httpx2.AsyncClient(
        headers=roster_client.bearer(args.token),
        timeout=roster_client.WAIT,
        event_hooks={"response": [record]},
    )
    return streamable_http_client(args.url, http_client=http)


async def main() -> dict:
    out: dict = {}
    async with Client(server(), mode="legacy", cache=None) as client:
        tools = await client.list_tools()
        out["tools"] = [t.name for t in tools.tools]
        dumped = tools.model_dump(mode="json", by_alias=True, exclude_none=True)
        out["tools_cache_scope"] = dumped.get("cacheScope")
        out["prompts"] = [p.name for p in (await client.list_prompts()).prompts]
        out["resources"] = [str(r.uri) for r in (await client.list_resources()).resources]
        templates = await client.list_resource_templates()
        out["templates"] = [t.uri_template for t in templates.resource_templates]
        out["calls"] = [await answer(client.call_tool(n, a)) for n, a in json.loads(args.calls)]
        out["prompt_gets"] = [await answer(client.get_prompt(n)) for n in json.loads(args.prompts)]
        out["reads"] = [await answer(client.read_resource(u)) for u in json.loads(args.reads)]
    return out


async def guarded() -> dict:
    try:
        return await main()
    except Exception as e:  # noqa: BLE001 - a refused connection is what some tests expect
        refusals = [f"HTTP {status}: {challenge}" for status, challenge in answers if status in (401, 403)]
        if refusals:
            return {"refused": refusals[0]}
        print(" | ".join(describe(e)), file=sys.stderr)
        raise


def describe(e: BaseException) -> list[str]:
    """Every exception inside `e` (groups and causes unwrapped), as `Type: message`."""
    out = [f"{type(e).__name__}: {e}"]
    for inner in getattr(e, "exceptions", None) or []:
        out.extend(describe(inner))
    if e.__cause__ is not None:
        out.extend(describe(e.__cause__))
    return out


roster_client.report(guarded)
