"""For fixtures that answer some HTTP requests themselves by what their JSON-RPC body says: the
body read before the app sees it, then handed to the app as if unread."""

from __future__ import annotations

import json


async def read_request(receive):
    """The whole body of an ASGI HTTP request, and its JSON-RPC message (`None` if it is not a
    JSON object)."""
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body"):
            break
    body = b"".join(chunks)
    try:
        request = json.loads(body)
    except ValueError:
        request = None
    return body, request if isinstance(request, dict) else None


def replaying(body, receive):
    """An ASGI `receive` that hands `body` over first, then whatever `receive` gives."""
    replayed = False

    async def replay():
        nonlocal replayed
        if not replayed:
            replayed = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay
