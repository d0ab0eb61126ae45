"""The conformance suite's fixture server, written with the official Python SDK.

roster fronts it (naming `never`, so the names stay as the suite expects) while the
`@modelcontextprotocol/conformance` server scenarios run against roster's HTTP endpoint: the
tools-call, prompts and resources scenarios then pass *through* roster. It offers the suite's
`test_*` tools, the `test://` resources and template, and the `test_*` prompts, each returning
exactly what the scenario's "Server Implementation Requirements" ask for.

The tools that need the client (sampling, elicitation, roots) ask it the way the connection's
era allows: mid-call requests on an initialize-era connection, an `input_required` result
(answered by the client's retry) on a 2026-07-28 one. Each works in both eras, so roster's
relaying is exercised in every pairing of client era and server era.

Usage: conformance_server.py [--no-subscribe] [--http PORT [--json-response]]
       (stdio, or streamable HTTP; --json-response answers a POST with JSON, not an SSE stream)
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.shared.exceptions import MCPError
from mcp.server.mcpserver.prompts.base import Message, UserMessage
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    AudioContent,
    Completion,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequest,
    ElicitRequestFormParams,
    ElicitResult,
    EmbeddedResource,
    EmptyResult,
    ImageContent,
    InputRequiredResult,
    ListRootsRequest,
    ListRootsResult,
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
            if tool.name == "test_custom_header":
                tool.input_schema["properties"]["region"]["x-mcp-header"] = "Region"
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


@mcp.tool(description="Echoes a region, which an HTTP client mirrors into Mcp-Param-Region (SEP-2243)")
def test_custom_header(region: str) -> str:
    return f"region {region}"


@mcp.tool(description="Tool with JSON Schema 2020-12 features")
def json_schema_2020_12_tool(name: str = "") -> str:
    return f"received {name}"


# Diagnostic tools of the stateless scenario (SEP-2575). Behind roster they exercise roster's
# own surface: a server's JSON-RPC error passed through, no log notifications leaking to a
# client that set no log level, a response stream without independent requests, and
# list_changed delivered on a subscriptions/listen stream after a server's tool list changed.


@mcp.tool()
async def test_missing_capability(ctx: Context) -> str:
    """Needs the client's sampling capability (roster declares its caller's, per request)."""
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


# --- Tools that ask the client: sampling, elicitation, roots, and log messages. ---

MODERN = "2026-07-28"


def modern(ctx: Context) -> bool:
    """Whether the connection speaks 2026-07-28 (no server-to-client requests)."""
    return (ctx.protocol_version or "") >= MODERN


def dump(model: Any) -> Any:
    return model.model_dump(by_alias=True, exclude_none=True, mode="json") if hasattr(model, "model_dump") else model


async def ask_now(ctx: Context, request: dict) -> dict:
    """Sends one request to the client mid-call (initialize era) and returns its result."""
    method, params = request["method"], request.get("params") or {}
    meta = ServerMessageMetadata(related_request_id=ctx.request_context.request_id)
    if method == "sampling/createMessage":
        typed, result_type = CreateMessageRequest(params=CreateMessageRequestParams.model_validate(params)), CreateMessageResult
    elif method == "elicitation/create":
        typed, result_type = ElicitRequest(params=ElicitRequestFormParams.model_validate(params)), ElicitResult
    else:
        typed, result_type = ListRootsRequest(), ListRootsResult
    return dump(await ctx.session.send_request(typed, result_type, metadata=meta))


async def ask(ctx: Context, requests: dict[str, dict], state: str | None = None) -> dict | InputRequiredResult:
    """The client's answer to every request, by key. On 2026-07-28: the answers the retry
    carries, or an `input_required` result asking for what is missing (with `state`); before:
    each request sent to the client now."""
    if not modern(ctx):
        return {key: await ask_now(ctx, request) for key, request in requests.items()}
    given = ctx.input_responses or {}
    missing = {key: request for key, request in requests.items() if key not in given}
    if missing:
        return InputRequiredResult(input_requests=missing, request_state=state)
    return {key: dump(given[key]) for key in requests}


def sampling(text: str, max_tokens: int) -> dict:
    return {
        "method": "sampling/createMessage",
        "params": {"messages": [{"role": "user", "content": {"type": "text", "text": text}}], "maxTokens": max_tokens},
    }


def elicitation(message: str, properties: dict, required: list[str]) -> dict:
    schema: dict = {"type": "object", "properties": properties}
    if required:
        schema["required"] = required
    return {"method": "elicitation/create", "params": {"message": message, "requestedSchema": schema}}


ROOTS = {"method": "roots/list", "params": {}}


def sampled_text(result: dict) -> str:
    content = result.get("content") or {}
    if isinstance(content, list):
        content = content[0] if content else {}
    return content.get("text", "")


async def elicited(ctx: Context, request: dict, said: str) -> str | InputRequiredResult:
    """Asks one elicitation and reports the answer as `<said>: action=…, content={…}`."""
    answers = await ask(ctx, {"answer": request})
    if isinstance(answers, InputRequiredResult):
        return answers
    answer = answers["answer"]
    return f"{said}: action={answer.get('action')}, content={json.dumps(answer.get('content'), sort_keys=True)}"


@mcp.tool()
async def test_sampling(prompt: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model to answer the prompt (sampling/createMessage)."""
    answers = await ask(ctx, {"sampling": sampling(prompt, 100)})
    if isinstance(answers, InputRequiredResult):
        return answers
    return f"LLM response: {sampled_text(answers['sampling'])}"


@mcp.tool()
async def test_elicitation(message: str, ctx: Context) -> str | InputRequiredResult:
    """Asks the user for a username and an email (elicitation/create)."""
    request = elicitation(
        message,
        {
            "username": {"type": "string", "description": "User's response"},
            "email": {"type": "string", "description": "User's email address"},
        },
        ["username", "email"],
    )
    return await elicited(ctx, request, "User response")


@mcp.tool()
async def test_elicitation_sep1034_defaults(ctx: Context) -> str | InputRequiredResult:
    """Asks for one field of each primitive type, each with a default (SEP-1034)."""
    request = elicitation(
        "Please review these defaults",
        {
            "name": {"type": "string", "default": "John Doe"},
            "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5},
            "status": {"type": "string", "enum": ["active", "inactive", "pending"], "default": "active"},
            "verified": {"type": "boolean", "default": True},
        },
        [],
    )
    return await elicited(ctx, request, "Elicitation completed")


@mcp.tool()
async def test_elicitation_sep1330_enums(ctx: Context) -> str | InputRequiredResult:
    """Asks with every enum form: untitled, titled, legacy enumNames, and both multi-selects
    (SEP-1330)."""
    request = elicitation(
        "Please choose",
        {
            "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
            "titledSingle": {
                "type": "string",
                "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"},
                ],
            },
            "legacyEnum": {
                "type": "string",
                "enum": ["opt1", "opt2", "opt3"],
                "enumNames": ["Option One", "Option Two", "Option Three"],
            },
            "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
            "titledMulti": {
                "type": "array",
                "items": {
                    "anyOf": [
                        {"const": "value1", "title": "First Choice"},
                        {"const": "value2", "title": "Second Choice"},
                        {"const": "value3", "title": "Third Choice"},
                    ]
                },
            },
        },
        [],
    )
    return await elicited(ctx, request, "Elicitation completed")


@mcp.tool()
async def test_tool_with_logging(ctx: Context) -> str:
    """Logs three messages at info, 50 ms apart."""
    await ctx.info("Tool execution started")
    await asyncio.sleep(0.05)
    await ctx.info("Tool processing data")
    await asyncio.sleep(0.05)
    await ctx.info("Tool execution completed")
    return "Tool with logging executed successfully"


LATER: set[asyncio.Task] = set()


@mcp.tool()
async def test_log_after_return(ctx: Context) -> str:
    """Logs at debug, then at warning, 200 ms after it answered: outside any request
    (initialize era only)."""
    session = ctx.session

    async def later() -> None:
        await asyncio.sleep(0.2)
        await session.send_log_message(level="debug", data="a detail", logger="fixture")
        await session.send_log_message(level="warning", data="logged after the call", logger="fixture")

    task = asyncio.get_running_loop().create_task(later())
    LATER.add(task)
    task.add_done_callback(LATER.discard)
    return "a log message follows"


NAME_REQUEST = elicitation("What is your name?", {"name": {"type": "string"}}, ["name"])
CONFIRM = elicitation(
    "Please confirm", {"ok": {"type": "boolean"}}, ["ok"]
)


def content_of(answer: dict) -> dict:
    return answer.get("content") or {}


@mcp.tool()
async def test_input_required_result_elicitation(ctx: Context) -> str | InputRequiredResult:
    """Asks the user's name (key `user_name`); greets them."""
    answers = await ask(ctx, {"user_name": NAME_REQUEST})
    if isinstance(answers, InputRequiredResult):
        return answers
    return f"Hello, {content_of(answers['user_name']).get('name', 'stranger')}!"


@mcp.tool()
async def test_input_required_result_sampling(ctx: Context) -> str | InputRequiredResult:
    """Asks the client's model for the capital of France (key `capital_question`)."""
    answers = await ask(ctx, {"capital_question": sampling("What is the capital of France?", 100)})
    if isinstance(answers, InputRequiredResult):
        return answers
    return f"The model says: {sampled_text(answers['capital_question'])}"


@mcp.tool()
async def test_input_required_result_list_roots(ctx: Context) -> str | InputRequiredResult:
    """Asks for the client's roots (key `client_roots`) and names them."""
    answers = await ask(ctx, {"client_roots": ROOTS})
    if isinstance(answers, InputRequiredResult):
        return answers
    roots = answers["client_roots"].get("roots") or []
    return "Roots: " + ", ".join(str(root.get("uri")) for root in roots)


@mcp.tool()
async def test_input_required_result_request_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation with a requestState, and checks the state comes back."""
    answers = await ask(ctx, {"confirm": CONFIRM}, state="confirm-pending")
    if isinstance(answers, InputRequiredResult):
        return answers
    if modern(ctx) and ctx.request_state != "confirm-pending":
        raise MCPError(-32602, f"unexpected requestState {ctx.request_state!r}")
    return f"state-ok: confirmed={content_of(answers['confirm']).get('ok')}"


@mcp.tool()
async def test_input_required_result_multiple_inputs(ctx: Context) -> str | InputRequiredResult:
    """Asks for a name, a model's greeting and the roots at once."""
    requests = {
        "user_name": NAME_REQUEST,
        "greeting": sampling("Generate a greeting", 50),
        "client_roots": ROOTS,
    }
    answers = await ask(ctx, requests, state="multiple-pending")
    if isinstance(answers, InputRequiredResult):
        return answers
    name = content_of(answers["user_name"]).get("name")
    roots = [str(root.get("uri")) for root in answers["client_roots"].get("roots") or []]
    return f"name={name}; greeting={sampled_text(answers['greeting'])}; roots={','.join(roots)}"


@mcp.tool()
async def test_input_required_result_multi_round(ctx: Context) -> str | InputRequiredResult:
    """Asks a name, then (a new round, a new requestState) a favourite colour."""
    if modern(ctx) and (ctx.request_state or "").startswith("round-2:"):
        name = ctx.request_state.removeprefix("round-2:")
    else:
        first = await ask(ctx, {"step1": elicitation("Step 1: What is your name?", {"name": {"type": "string"}}, ["name"])}, state="round-1")
        if isinstance(first, InputRequiredResult):
            return first
        name = content_of(first["step1"]).get("name", "")
        if modern(ctx):
            step2 = elicitation("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])
            return InputRequiredResult(input_requests={"step2": step2}, request_state=f"round-2:{name}")
    second = await ask(ctx, {"step2": elicitation("Step 2: What is your favorite color?", {"color": {"type": "string"}}, ["color"])}, state=f"round-2:{name}")
    if isinstance(second, InputRequiredResult):
        return second
    return f"{name} likes {content_of(second['step2']).get('color')}"


@mcp.tool()
async def test_input_required_result_tampered_state(ctx: Context) -> str | InputRequiredResult:
    """Asks for a confirmation with a requestState the SDK seals (a tampered one is refused)."""
    answers = await ask(ctx, {"confirm": CONFIRM}, state="sealed-state")
    if isinstance(answers, InputRequiredResult):
        return answers
    return "state verified"


@mcp.tool()
async def test_input_required_result_capabilities(ctx: Context) -> str | InputRequiredResult:
    """Asks only what the client declared it can answer (sampling, elicitation, roots)."""
    caps = ctx.client_capabilities
    requests = {}
    if caps is not None and caps.sampling is not None:
        requests["sampling"] = sampling("Say hello", 20)
    if caps is not None and caps.elicitation is not None:
        requests["elicitation"] = NAME_REQUEST
    if caps is not None and caps.roots is not None:
        requests["roots"] = ROOTS
    answers = await ask(ctx, requests)
    if isinstance(answers, InputRequiredResult):
        return answers
    return "answered: " + ", ".join(sorted(answers)) if answers else "the client declared nothing to ask"


@mcp.prompt(description="A prompt that asks the user for context first")
async def test_input_required_result_prompt(ctx: Context) -> list[Message] | InputRequiredResult:
    request = elicitation("What context should the prompt use?", {"context": {"type": "string"}}, ["context"])
    answers = await ask(ctx, {"user_context": request})
    if isinstance(answers, InputRequiredResult):
        return answers
    return [UserMessage(content=f"Use this context: {content_of(answers['user_context']).get('context')}")]


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
    if "--http" in sys.argv[1:]:  # --http PORT: streamable HTTP on 127.0.0.1
        mcp.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[sys.argv.index("--http") + 1]),
            json_response="--json-response" in sys.argv[1:],
        )
    else:
        mcp.run()
