"""vllm-fleet's key check for vLLM's API server: every route needs the stack's API key.

vLLM's own check (`--api-key`, VLLM_API_KEY) covers only the paths under /v1, /v2, /inference and
/cohere (vllm/entrypoints/serve/middleware/authenticate.py, GUARDED_PREFIX, in 0.32; /v1 alone in
0.17.1). The rest of the server answers anyone: POST /invocations runs a completion, /tokenize,
/pooling, /score, /classify, /rerank run the model, /metrics, /load, /version, /docs and
/openapi.json describe it. This middleware closes them all: a request without
`Authorization: Bearer <the key>` gets 401 on every path but the probes'.

Open without the key, for load balancers', Docker's and people's liveness probes:
  /health   200 while the engine lives, 503 once it died (vLLM's); says nothing about the fleet
  /ping     the same answer (vLLM's SageMaker-style twin of /health)
and OPTIONS, which carries no key by the browsers' rules: a CORS preflight is answered by vLLM's
CORS middleware inside this one (its allowlist is --allowed-origins, which vllm-fleet sets), and any
other OPTIONS gets 405 from the routes.

vLLM loads it itself: `vllm serve ... --middleware vllm_fleet_key.RequireKey` (vLLM's documented
extension point: a class given there is added with app.add_middleware, outermost, so it sees every
request first). The serving container carries this file (ContainerSpec.files) in a directory on
PYTHONPATH. The key comes from VLLM_API_KEY, as vLLM's own check takes it; with no key set this
middleware passes everything (vllm-fleet then does not load it). Compared as SHA-256 digests with
hmac.compare_digest, like vLLM's own check. A pure ASGI middleware: only Python's standard library,
so it runs in any vLLM image (and in the proving ground's vLLM stand-in, which runs it the same way).
"""
import hashlib
import hmac
import json
import os

OPEN_PATHS = frozenset(("/health", "/ping"))


class RequireKey:
    """ASGI middleware: 401 for a request without the key, on every path but OPEN_PATHS."""

    def __init__(self, app):
        self.app = app
        key = os.environ.get("VLLM_API_KEY", "")
        self.digest = hashlib.sha256(key.encode("utf-8")).digest() if key else None

    def authorized(self, scope):
        for name, value in scope.get("headers") or ():
            if name.lower() == b"authorization":
                scheme, _, token = value.decode("latin-1").partition(" ")
                if scheme.lower() == "bearer":
                    return hmac.compare_digest(hashlib.sha256(token.encode("utf-8")).digest(), self.digest)
                return False
        return False

    async def __call__(self, scope, receive, send):
        if self.digest is None or scope["type"] not in ("http", "websocket") or scope.get("method") == "OPTIONS":
            return await self.app(scope, receive, send)
        path = scope["path"]
        root = scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        if path in OPEN_PATHS or self.authorized(scope):
            return await self.app(scope, receive, send)
        if scope["type"] == "websocket":
            # Refused before the handshake is accepted: the client sees the connection closed.
            await send({"type": "websocket.close", "code": 1008})
            return
        body = json.dumps({"error": "Unauthorized"}).encode()
        await send({
            "type": "http.response.start",
            "status": 401,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                        (b"www-authenticate", b"Bearer")],
        })
        await send({"type": "http.response.body", "body": body})
