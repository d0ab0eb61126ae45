"""A small authorization server for roster's `[auth]` tests: its RFC 8414 metadata and JWKS over
real HTTP on 127.0.0.1, and JWT access tokens signed (with PyJWT and `cryptography`) by keys it
generated at start.

Usage: idp.py  — prints `{"port": N}` once it listens, then serves until killed.

- `GET /.well-known/oauth-authorization-server`: `issuer` (this server's URL) and `jwks_uri`.
- `GET /jwks`: the public keys in force (`rsa-1` RS256 and `ec-1` ES256 at start).
- `POST /mint` `{"kid", "claims", "exp_in", "forge"}`: a token signed by the key `kid` (default
  `rsa-1`) holding `claims` over the defaults (`iss` this server, `sub`, `iat`, `exp` in
  `exp_in` seconds, default 300); `forge` signs with a key of the same id that the JWKS does
  not hold.
- `POST /rotate`: a new RSA key `rsa-N` replaces the RSA keys in the JWKS; answers its id.
- `GET /fetches`: how many times the JWKS was fetched.
"""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from jwt.algorithms import ECAlgorithm, RSAAlgorithm

lock = threading.Lock()
keys: dict[str, tuple[str, object]] = {}  # kid -> (alg, private key)
published: list[str] = []
fetches = 0
rsa_count = 0


def new_rsa() -> str:
    global rsa_count
    rsa_count += 1
    kid = f"rsa-{rsa_count}"
    keys[kid] = ("RS256", rsa.generate_private_key(public_exponent=65537, key_size=2048))
    return kid


def jwk(kid: str) -> dict:
    alg, private = keys[kid]
    algorithm = RSAAlgorithm if alg == "RS256" else ECAlgorithm
    key = json.loads(algorithm.to_jwk(private.public_key()))
    key.update({"kid": kid, "alg": alg, "use": "sig"})
    return key


published.append(new_rsa())
keys["ec-1"] = ("ES256", ec.generate_private_key(ec.SECP256R1()))
published.append("ec-1")


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def answer(self, status: int, body) -> None:
        data = (body if isinstance(body, str) else json.dumps(body)).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json" if not isinstance(body, str) else "text/plain")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        global fetches
        if self.path == "/.well-known/oauth-authorization-server":
            self.answer(200, {
                "issuer": self.issuer(),
                "jwks_uri": f"{self.issuer()}/jwks",
                "authorization_endpoint": f"{self.issuer()}/authorize",
                "token_endpoint": f"{self.issuer()}/token",
                "response_types_supported": ["code"],
                "code_challenge_methods_supported": ["S256"],
            })
        elif self.path == "/jwks":
            with lock:
                fetches += 1
                self.answer(200, {"keys": [jwk(kid) for kid in published]})
        elif self.path == "/fetches":
            with lock:
                self.answer(200, {"fetches": fetches})
        else:
            self.answer(404, {"error": "not found"})

    def do_POST(self) -> None:
        length = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(length) or b"{}")
        if self.path == "/mint":
            kid = body.get("kid", "rsa-1")
            now = int(time.time())
            claims = {"iss": self.issuer(), "sub": "ann", "iat": now, "exp": now + body.get("exp_in", 300)}
            claims.update(body.get("claims", {}))
            with lock:
                alg, private = keys[kid]
            if body.get("forge"):
                private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            token = jwt.encode(claims, private, algorithm=alg, headers={"kid": kid})
            self.answer(200, token)
        elif self.path == "/rotate":
            with lock:
                kid = new_rsa()
                published[:] = [k for k in published if not k.startswith("rsa-")] + [kid]
            self.answer(200, kid)
        else:
            self.answer(404, {"error": "not found"})


server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(json.dumps({"port": server.server_address[1]}), flush=True)
server.serve_forever()
