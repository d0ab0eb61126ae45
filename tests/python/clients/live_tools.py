"""A real MCP client (the official Python SDK) driving roster through a live tool change.

roster fronts `tests/python/servers/dynamic.py` as server `dynamic`. The client lists the tools,
has the server add a tool, waits for roster's `notifications/tools/list_changed` (on the
session's stream in the initialize era, on a `subscriptions/listen` stream in 2026-07-28),
makes the next call and reads the change note roster appends to its result, calls the new
tool, has it removed, waits for the next list_changed and checks that the tool is gone.

It prints one JSON object of what it observed; the Rust test asserts on it.

Usage: live_tools.py --mode legacy|2026-07-28 (--url URL | --stdio ROSTER_BIN CONFIG) [--token T]
"""

from __future__ import annotations

import anyio
from mcp.client.client import Client
from mcp.shared.exceptions import MCPError
from mcp.types import TextContent, ToolListChangedNotification

import roster_client
from roster_client import WAIT

parser = roster_client.parser()
parser.add_argument("--mode", required=True)
args = parser.parse_args()


def texts(result) -> list[str]:
    return [c.text for c in result.content if isinstance(c, TextContent)]


async def main() -> dict:
    changed = anyio.Event()
    changes = 0

    async def on_message(message) -> None:
        nonlocal changed, changes
        if isinstance(message, ToolListChangedNotification) and not modern:
            changes += 1
            changed.set()

    server = roster_client.server(args)

    modern = args.mode != "legacy"
    report: dict = {}
    # Modern mode probes server/discover ("auto"), so the capabilities are roster's own.
    mode = "legacy" if args.mode == "legacy" else "auto"
    async with Client(server, mode=mode, message_handler=on_message, cache=None) as client:
        report["protocol_version"] = client.protocol_version
        report["list_changed_capability"] = bool(
            client.server_capabilities.tools and client.server_capabilities.tools.list_changed
        )

        async def wait_change(step: str) -> bool:
            nonlocal changed
            with anyio.move_on_after(WAIT):
                await changed.wait()
            seen = changed.is_set()
            changed = anyio.Event()
            report[f"list_changed_{step}"] = seen
            return seen

        async def run(task_status=anyio.TASK_STATUS_IGNORED) -> None:
            nonlocal changes
            async with client.listen(tools_list_changed=True) as sub:
                task_status.started()
                async for _event in sub:
                    changes += 1
                    changed.set()

        async with anyio.create_task_group() as tg:
            if modern:
                await tg.start(run)
            tools = await client.list_tools()
            report["initial_tools"] = [t.name for t in tools.tools]

            added = await client.call_tool("dynamic__add_tool", {"name": "fresh"})
            report["add_result"] = texts(added)
            await wait_change("after_add")

            echo = await client.call_tool("dynamic__echo", {"text": "hi"})
            report["echo_after_add"] = texts(echo)
            echo_again = await client.call_tool("dynamic__echo", {"text": "again"})
            report["echo_after_that"] = texts(echo_again)

            tools = await client.list_tools()
            report["tools_after_add"] = [t.name for t in tools.tools]
            fresh = await client.call_tool("dynamic__fresh", {})
            report["fresh_result"] = texts(fresh)

            await client.call_tool("dynamic__remove_tool", {"name": "fresh"})
            await wait_change("after_remove")
            tools = await client.list_tools()
            report["tools_after_remove"] = [t.name for t in tools.tools]
            try:
                gone = await client.call_tool("dynamic__fresh", {})
                report["fresh_after_remove"] = {"result": texts(gone), "is_error": gone.is_error}
            except MCPError as e:
                report["fresh_after_remove"] = {"code": e.error.code, "message": e.error.message}

            refresh = await client.call_tool("refresh_tools", {})
            report["refresh_structured"] = refresh.structured_content
            report["list_changed_total"] = changes
            tg.cancel_scope.cancel()
    return report


roster_client.report(main)
