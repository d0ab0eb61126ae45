"""The conformance suite's fixture server, written with the official Python SDK.

roster fronts it (naming `never`, so the names stay as the suite expects) while the
`@modelcontextprotocol/conformance` server scenarios run against roster's HTTP endpoint: the
tools-call, prompts and resources scenarios then pass *through* roster. It offers the suite's
`test_*` tools, the `test://` resources and template, and the `test_*` prompts, each returning
exactly what the scenario's "Server Implementation Requirements" ask for.

Usage: conformance_server.py [--no-subscribe]      (stdio)
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.types import (
    AudioContent,
    Completion,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    PromptReference,
    ResourceTemplateReference,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    TextContent,
    TextResourceContents,
    ToolExecution,
    UnsubscribeRequestParams,
)

# A 1x1 transparent PNG and a tiny WAV header: real media, small enough to inline.
PNG = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)
WAV = base64.b64encode(
    b"RIFF$\x00\x00\x00WAVEfmt \x10\x00\x00\x00\x01\x00\x01\x00D\xac\x00\x00\x88X\x01\x00\x02\x00\x10\x00data\x00\x00\x00\x00"
).decode()

JSON_SCHEMA_2020_12 = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "type": "object",
    "$defs": {
        "address": {
            "$anchor": "addressDef",
            "type": "object",
            "properties": {"street": {"type": "string"}, "city": {"type": "string"}},
        }
    },
    "properties": {
        "name": {"type": "string"},
        "address": {"$ref": "#/$defs/address"},
        "contactMethod": {"type": "string", "enum": ["phone", "email"]},
        "phone": {"type": "string"},
        "email": {"type": "string"},
    },
    "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
    "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
    "then": {"required": ["phone"]},
    "else": {"required": ["email"]},
    "additionalProperties": False,
}


class ConformanceServer(MCPServer):
    async def list_tools(self):  # type: ignore[override]
        # The SDK derives schemas from signatures; this one tool must carry the suite's schema
        # verbatim, 2020-12 keywords and all.
        tools = await super().list_tools()
        for tool in tools:
            if tool.name == "json_schema_2020_12_tool":
                tool.input_schema = JSON_SCHEMA_2020_12
            if tool.name in TASK_SUPPORT:
                tool.execution = ToolExecution(task_support=TASK_SUPPORT[tool.name])
        return tools


# --no-subscribe: no subscriptions (no subscriptions/listen, no resources/subscribe).
NO_SUBSCRIBE = "--no-subscribe" in sys.argv[1:]
mcp = ConformanceServer(
    name="conformance-fixture", log_level="WARNING", subscriptions=False if NO_SUBSCRIBE else None
)


@mcp.tool()
def test_simple_text() -> str:
    """Returns a simple text result."""
    return "This is a simple text response for testing."


@mcp.tool()
def test_image_content() -> list:
    """Returns an image."""
    return [ImageContent(type="image", data=PNG, mime_type="image/png")]


@mcp.tool()
def test_audio_content() -> list:
    """Returns an audio clip."""
    return [AudioContent(type="audio", data=WAV, mime_type="audio/wav")]


def _embedded() -> EmbeddedResource:
    return EmbeddedResource(
        type="resource",
        resource=TextResourceContents(
            uri="test://embedded-resource",
            mime_type="text/plain",
            text="This is an embedded resource content.",
        ),
    )


@mcp.tool()
def test_embedded_resource() -> list:
    """Returns an embedded resource."""
    return [_embedded()]


@mcp.tool()
def test_multiple_content_types() -> list:
    """Returns text, an image and an embedded resource."""
    return [
        TextContent(type="text", text="Multiple content types test:"),
        ImageContent(type="image", data=PNG, mime_type="image/png"),
        _embedded(),
    ]


@mcp.tool()
def test_error_handling() -> str:
    """Always fails, as a tool error."""
    raise ToolError("This tool intentionally returns an error for testing")


@mcp.tool()
async def test_tool_with_progress(ctx: Context) -> str:
    """Reports progress 0, 50, 100 of 100."""
    for step in (0, 50, 100):
        await ctx.report_progress(step, 100)
        await asyncio.sleep(0.05)
    return "Progress test completed"


@mcp.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "") -> str:
    return f"received {name}"


# Diagnostic tools of the stateless scenario (SEP-2575). Behind roster they exercise roster's
# own surface: a server's JSON-RPC error passed through, no log notifications leaking to a
# client that set no log level, a response stream without independent requests, and
# list_changed delivered on a subscriptions/listen stream after a server's tool list changed.


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability, which roster never declares to its servers."""
    caps = ctx.client_capabilities
    if caps is None or caps.sampling is None:
        raise MCPError(
            -32021,
            "this tool needs the client's sampling capability",
            {"requiredCapabilities": {"sampling": {}}},
        )
    return "sampling is available"


@mcp.tool()
async def test_logging_tool(ctx: Context) -> str:
    """Logs one message, then answers."""
    await ctx.info("test_logging_tool ran")
    return "logged"


@mcp.tool()
async def test_streaming_elicitation() -> str:
    """Would ask the user; behind a gateway that does not relay elicitation it answers plainly."""
    return "no elicitation was requested"


@mcp.tool()
async def test_trigger_tool_change(ctx: Context) -> str:
    """Adds or removes the `test_dynamic_tool` tool and announces the change."""
    if any(t.name == "test_dynamic_tool" for t in await mcp.list_tools()):
        mcp.remove_tool("test_dynamic_tool")
        verb = "removed"
    else:

        def test_dynamic_tool() -> str:
            return "dynamic"

        mcp.add_tool(test_dynamic_tool, name="test_dynamic_tool", description="Appears and vanishes.")
        verb = "added"
    try:
        await ctx.session.send_tool_list_changed()
    except Exception:  # noqa: BLE001 - a 2026-07-28 session announces through the listen bus only
        pass
    await ctx.notify_tools_changed()
    return f"{verb} test_dynamic_tool"


@mcp.resource("test://static-text", name="static-text", description="A static text resource", mime_type="text/plain")
def static_text() -> str:
    return "This is the content of the static text resource."


@mcp.resource("test://static-binary", name="static-binary", description="A static binary resource", mime_type="image/png")
def static_binary() -> bytes:
    return base64.b64decode(PNG)


@mcp.resource("test://template/{id}/data", name="template", description="A templated resource", mime_type="application/json")
def template(id: str) -> str:
    return json.dumps({"id": id, "templateTest": True, "data": f"Data for ID: {id}"}, separators=(",", ":"))


@mcp.prompt(description="A simple prompt without arguments")
def test_simple_prompt() -> str:
    return "This is a simple prompt for testing."


@mcp.prompt(description="A prompt with two arguments")
def test_prompt_with_arguments(arg1: str, arg2: str) -> str:
    return f"Prompt with arguments: arg1='{arg1}', arg2='{arg2}'"


@mcp.prompt(description="A prompt embedding a resource")
def test_prompt_with_embedded_resource(resourceUri: str) -> list[Message]:  # noqa: N803 - the suite's name
    return [
        UserMessage(
            content=EmbeddedResource(
                type="resource",
                resource=TextResourceContents(
                    uri=resourceUri, mime_type="text/plain", text="Embedded resource content for testing."
                ),
            )
        ),
        UserMessage(content="Please process the embedded resource above."),
    ]


@mcp.prompt(description="A prompt with an image")
def test_prompt_with_image() -> list[Message]:
    return [
        UserMessage(content=ImageContent(type="image", data=PNG, mime_type="image/png")),
        UserMessage(content="Please analyze the image above."),
    ]


# --- Resource subscriptions and completions -----------------------------------------------
# `test://watched-resource` is what the resources-subscribe/unsubscribe scenarios subscribe to.
# A 2026-07-28 client (roster) subscribes through `subscriptions/listen`, which the SDK serves;
# an initialize-era client through `resources/subscribe`, registered below because MCPServer
# has no decorator for it. `test_update_resource` announces updates on both paths, and
# `test_resource_subscriptions` reports what the server holds, so a test can watch roster
# subscribe and unsubscribe at the server. Started with --no-subscribe the server takes no
# subscriptions at all and offers `test://unsubscribable` (a test's second, plain server).

SUBSCRIBED: set[str] = set()  # resources/subscribe
LISTENING: list[list[str]] = []  # the resource URIs of each open subscriptions/listen stream


@mcp.resource("test://watched-resource", name="watched-resource", description="A resource to subscribe to", mime_type="text/plain")
def watched_resource() -> str:
    return "This resource announces its updates to subscribers."


@mcp.resource("test://watched-other", name="watched-other", description="A second resource to subscribe to", mime_type="text/plain")
def watched_other() -> str:
    return "This resource announces its updates too."


async def _subscribe(ctx, params: SubscribeRequestParams) -> EmptyResult:  # noqa: ANN001 - SDK context
    SUBSCRIBED.add(str(params.uri))
    return EmptyResult()


async def _unsubscribe(ctx, params: UnsubscribeRequestParams) -> EmptyResult:  # noqa: ANN001
    SUBSCRIBED.discard(str(params.uri))
    return EmptyResult()


if NO_SUBSCRIBE:

    @mcp.resource("test://unsubscribable", name="unsubscribable", description="On a server without subscriptions", mime_type="text/plain")
    def unsubscribable() -> str:
        return "Nobody can subscribe to this resource."

else:
    mcp._lowlevel_server.add_request_handler("resources/subscribe", SubscribeRequestParams, _subscribe)
    mcp._lowlevel_server.add_request_handler("resources/unsubscribe", UnsubscribeRequestParams, _unsubscribe)
    _listen = mcp._lowlevel_server.get_request_handler("subscriptions/listen").handler

    async def _tracked_listen(ctx, params: SubscriptionsListenRequestParams):  # noqa: ANN001, ANN202
        uris = list(params.notifications.resource_subscriptions or [])
        LISTENING.append(uris)
        try:
            return await _listen(ctx, params)
        finally:
            LISTENING.remove(uris)

    mcp._lowlevel_server.add_request_handler("subscriptions/listen", SubscriptionsListenRequestParams, _tracked_listen)


@mcp.tool()
async def test_update_resource(uris: list[str], ctx: Context) -> str:
    """Announces that each resource in `uris` changed, in order."""
    for uri in uris:
        await ctx.notify_resource_updated(uri)  # 2026-07-28 listen streams
        if uri in SUBSCRIBED:  # initialize-era resources/subscribe
            await ctx.session.send_resource_updated(uri)
    return f"updated {', '.join(uris)}"


@mcp.tool()
def test_resource_subscriptions() -> str:
    """How many subscriptions the server holds per resource URI (both paths counted)."""
    watched: dict[str, int] = {uri: 1 for uri in SUBSCRIBED}
    for uris in LISTENING:
        for uri in uris:
            watched[uri] = watched.get(uri, 0) + 1
    return json.dumps({"watched": watched})


@mcp.completion()
async def complete(ref, argument, context):  # noqa: ANN001, ARG001 - the SDK's completion signature
    """Completes `test_prompt_with_arguments`' arguments and the template's `id`."""
    if isinstance(ref, PromptReference) and ref.name == "test_prompt_with_arguments":
        options = ["paris", "park", "party"]
    elif isinstance(ref, ResourceTemplateReference) and ref.uri == "test://template/{id}/data":
        options = ["1", "2", "42"]
    else:
        return None
    values = [o for o in options if o.startswith(argument.value)]
    return Completion(values=values, total=len(values), has_more=False)


# --- Tasks (SEP-2663) ----------------------------------------------------------------------
# The tools the tasks scenarios call. The Python SDK has no tasks: roster runs a tool as a task
# for a client that opted in to io.modelcontextprotocol/tasks when the tool's
# execution.taskSupport allows it and the call outlasts roster's `task_after` window (an answer
# within it comes back as it is). WORK is well past that window, so the slow paths always
# become tasks; answers without WORK always come back within it. A tool that needs input
# returns an input_required result (SEP-2322); inside a task, roster turns it into the task's
# inputRequests and calls again with the client's tasks/update answers.

WORK = 1.0  # seconds
TASK_SUPPORT = {
    "slow_compute": "optional",
    "failing_job": "required",
    "protocol_error_job": "optional",
    "confirm_delete": "optional",
    "multi_input": "optional",
    "test_tool_with_task": "required",
}


def _elicit(message: str, properties: dict, required: list[str]) -> ElicitRequest:
    schema = {"type": "object", "properties": properties, "required": required}
    return ElicitRequest(params=ElicitRequestFormParams(message=message, requested_schema=schema))


def _accepted(response) -> dict | None:  # noqa: ANN001 - an InputResponse
    """The content of an accepted elicitation answer, else None."""
    if isinstance(response, ElicitResult) and response.action == "accept":
        return dict(response.content or {})
    return None


@mcp.tool()
def greet(name: str) -> str:
    """Greets at once (no task support)."""
    return f"Hello, {name}!"


CANCELLED: list[str] = []  # labels of slow_compute calls cancelled while they slept


@mcp.tool()
async def slow_compute(seconds: float = 0, label: str = "") -> str:
    """Sleeps `seconds`, then answers."""
    try:
        await asyncio.sleep(seconds)
    except asyncio.CancelledError:
        CANCELLED.append(label)
        raise
    return f"computed {label or 'it'} after {seconds}s"


@mcp.tool()
def test_cancelled_calls() -> str:
    """The labels of the slow_compute calls that were cancelled, in order."""
    return json.dumps(CANCELLED)


@mcp.tool()
async def failing_job() -> str:
    """Works a while, then fails as a tool error."""
    await asyncio.sleep(WORK)
    raise ToolError("failing_job failed, as it always does")


@mcp.tool()
async def protocol_error_job() -> str:
    """Works a while, then fails with a JSON-RPC error."""
    await asyncio.sleep(WORK)
    raise MCPError(-32603, "protocol_error_job broke at the protocol level")


@mcp.tool()
async def confirm_delete(filename: str, ctx: Context) -> str | InputRequiredResult:
    """Looks the file up, asks for a confirmation, then deletes (pretends to)."""
    answer = (ctx.input_responses or {}).get("confirm")
    if answer is None:
        await asyncio.sleep(WORK)
        ask = _elicit(f"Delete {filename}?", {"confirm": {"type": "boolean"}}, ["confirm"])
        return InputRequiredResult(input_requests={"confirm": ask})
    content = _accepted(answer)
    return f"deleted {filename}" if content and content.get("confirm") else f"kept {filename}"


@mcp.tool()
async def multi_input(ctx: Context) -> str | InputRequiredResult:
    """Asks two questions at once and answers when both are answered."""
    responses = ctx.input_responses or {}
    missing = {
        key: _elicit(f"The {key} answer?", {"name": {"type": "string"}}, ["name"])
        for key in ("first", "second")
        if key not in responses
    }
    if missing:
        if len(missing) == 2:
            await asyncio.sleep(WORK)
        return InputRequiredResult(input_requests=missing)
    names = {key: (_accepted(responses[key]) or {}).get("name") for key in ("first", "second")}
    return f"first={names['first']}, second={names['second']}"


@mcp.tool()
async def test_tool_with_task(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name at once (input_required), then works a while with it."""
    answer = (ctx.input_responses or {}).get("user_name")
    if answer is None:
        ask = _elicit("What is your name?", {"name": {"type": "string"}}, ["name"])
        return InputRequiredResult(input_requests={"user_name": ask})
    await asyncio.sleep(WORK)
    return f"Hello, {(_accepted(answer) or {}).get('name', 'nobody')}!"


if __name__ == "__main__":
    mcp.run()
