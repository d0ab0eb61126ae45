"""An OAuth-protected MCP server for roster's integration tests, written with the official
Python SDK: the SDK's own authorization server routes (RFC 8414 metadata, dynamic client
registration, /authorize, /token with PKCE and refresh) and resource server (RFC 9728
protected resource metadata, 401 with `WWW-Authenticate: Bearer resource_metadata=…`).

Only the provider's storage is written here, in memory, and its /authorize approves at once
(it redirects straight back with a code, as the conformance suite's server does), so a client
that follows the redirect completes the flow without a person.

Tools: `whoami` (the scopes of the token that called), `auth_stats` (codes, refreshes and
tokens issued, so a test sees a refresh), `revoke_access_tokens` (forgets every access token
the server issued: the next request with one gets 401, and a client refreshes; with
`refresh: true` the refresh tokens too, so only a new login gets a token), `admin_task`
(needs the `extra` scope: a call with a token without it gets 403 `insufficient_scope`, the
spec's step-up challenge).

Usage: oauth_protected.py --port PORT [--token-ttl SECONDS] [--transport streamable-http|sse]
"""

from __future__ import annotations

import argparse
import secrets
import time

import uvicorn
from asgi_body import read_request, replaying

from mcp.server.auth.provider import (
    AccessToken,
    AuthorizationCode,
    AuthorizationParams,
    RefreshToken,
    construct_redirect_uri,
)
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.settings import AuthSettings, ClientRegistrationOptions
from mcp.server.mcpserver import MCPServer
from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

parser = argparse.ArgumentParser()
parser.add_argument("--port", type=int, required=True)
parser.add_argument("--token-ttl", type=int, default=3600)
parser.add_argument("--transport", default="streamable-http")
# `initialize` (and notifications) pass without a token; every other request needs one, as
# some servers do (and the conformance suite's scope-step-up scenario).
parser.add_argument("--open-initialize", action="store_true")
args = parser.parse_args()

BASE = f"http://127.0.0.1:{args.port}"
MCP_PATH = "/mcp" if args.transport == "streamable-http" else "/sse"


class Provider:
    def __init__(self) -> None:
        self.clients: dict[str, OAuthClientInformationFull] = {}
        self.codes: dict[str, AuthorizationCode] = {}
        self.access: dict[str, AccessToken] = {}
        self.refresh: dict[str, RefreshToken] = {}
        self.stats = {"codes": 0, "refreshes": 0, "access_tokens": 0, "registrations": 0}

    async def get_client(self, client_id: str) -> OAuthClientInformationFull | None:
        return self.clients.get(client_id)

    async def register_client(self, client_info: OAuthClientInformationFull) -> None:
        self.stats["registrations"] += 1
        self.clients[client_info.client_id] = client_info

    async def authorize(self, client: OAuthClientInformationFull, params: AuthorizationParams) -> str:
        code = secrets.token_urlsafe(24)
        self.codes[code] = AuthorizationCode(
            code=code,
            scopes=params.scopes or ["mcp"],
            expires_at=time.time() + 300,
            client_id=client.client_id,
            code_challenge=params.code_challenge,
            redirect_uri=params.redirect_uri,
            redirect_uri_provided_explicitly=params.redirect_uri_provided_explicitly,
            resource=params.resource,
        )
        self.stats["codes"] += 1
        return construct_redirect_uri(str(params.redirect_uri), code=code, state=params.state)

    async def load_authorization_code(self, client, authorization_code: str):
        return self.codes.get(authorization_code)

    def _issue(self, client_id: str, scopes: list[str], resource: str | None) -> OAuthToken:
        access = secrets.token_urlsafe(24)
        refresh = secrets.token_urlsafe(24)
        self.access[access] = AccessToken(
            token=access,
            client_id=client_id,
            scopes=scopes,
            expires_at=int(time.time()) + args.token_ttl,
            resource=resource,
        )
        self.refresh[refresh] = RefreshToken(token=refresh, client_id=client_id, scopes=scopes, resource=resource)
        self.stats["access_tokens"] += 1
        return OAuthToken(
            access_token=access,
            expires_in=args.token_ttl,
            scope=" ".join(scopes),
            refresh_token=refresh,
        )

    async def exchange_authorization_code(self, client, authorization_code: AuthorizationCode) -> OAuthToken:
        self.codes.pop(authorization_code.code, None)
        return self._issue(client.client_id, authorization_code.scopes, authorization_code.resource)

    async def load_refresh_token(self, client, refresh_token: str):
        return self.refresh.get(refresh_token)

    async def exchange_refresh_token(self, client, refresh_token: RefreshToken, scopes: list[str]) -> OAuthToken:
        self.refresh.pop(refresh_token.token, None)
        self.stats["refreshes"] += 1
        return self._issue(client.client_id, scopes or refresh_token.scopes, refresh_token.resource)

    async def load_access_token(self, token: str):
        found = self.access.get(token)
        if found is None or (found.expires_at is not None and found.expires_at < time.time()):
            return None
        return found

    async def revoke_token(self, token) -> None:
        self.access.pop(getattr(token, "token", ""), None)
        self.refresh.pop(getattr(token, "token", ""), None)


provider = Provider()
# The principal `--open-initialize` lets initialize through as (never handed to a client).
OPEN_TOKEN = secrets.token_urlsafe(24)
provider.access[OPEN_TOKEN] = AccessToken(token=OPEN_TOKEN, client_id="open", scopes=["mcp"], expires_at=None)
mcp = MCPServer(
    "oauth-protected",
    auth_server_provider=provider,
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=f"{BASE}{MCP_PATH}",
        client_registration_options=ClientRegistrationOptions(
            enabled=True, valid_scopes=["mcp", "extra"], default_scopes=["mcp"]
        ),
        required_scopes=["mcp"],
        validate_token_resource=False,
    ),
)


@mcp.tool()
def whoami() -> str:
    """The scopes of the token this call came with."""
    token = get_access_token()
    return " ".join(token.scopes) if token else "anonymous"


@mcp.tool()
def auth_stats() -> dict:
    """Codes, refreshes, access tokens and registrations the authorization server issued."""
    return dict(provider.stats)


@mcp.tool()
def admin_task() -> str:
    """Needs the `extra` scope."""
    return "done"


@mcp.tool()
def revoke_access_tokens(refresh: bool = False) -> int:
    """Forget every access token issued so far (refresh tokens stay, unless `refresh`: then
    only a new login gets a token)."""
    count = len(provider.access)
    provider.access.clear()
    if refresh:
        count += len(provider.refresh)
        provider.refresh.clear()
    return count


def step_up(app):
    """ASGI wrapper: a `tools/call` of `admin_task` whose token lacks `extra` is refused with
    403 and the `WWW-Authenticate` the spec gives for insufficient scope."""

    async def wrapped(scope, receive, send):
        if scope["type"] != "http" or scope["method"] != "POST":
            return await app(scope, receive, send)
        body, request = await read_request(receive)
        headers = scope["headers"]
        method = request.get("method") if request else None
        if (
            args.open_initialize
            and isinstance(method, str)
            and (method == "initialize" or method.startswith("notifications/"))
            and b"authorization" not in dict(headers)
        ):
            scope = dict(scope, headers=[*headers, (b"authorization", f"Bearer {OPEN_TOKEN}".encode())])
        if request and request.get("method") == "tools/call" and (
            request.get("params") or {}
        ).get("name") == "admin_task":
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            token = provider.access.get(auth.removeprefix("Bearer ").strip())
            if token is not None and "extra" not in token.scopes:
                challenge = (
                    'Bearer error="insufficient_scope", scope="mcp extra", '
                    f'resource_metadata="{BASE}/.well-known/oauth-protected-resource{MCP_PATH}"'
                )
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [(b"www-authenticate", challenge.encode()), (b"content-type", b"application/json")],
                    }
                )
                await send({"type": "http.response.body", "body": b'{"error":"insufficient_scope"}'})
                return
        return await app(scope, replaying(body, receive), send)

    return wrapped


app = mcp.sse_app() if args.transport == "sse" else mcp.streamable_http_app()
uvicorn.run(step_up(app), host="127.0.0.1", port=args.port, log_level="warning")
