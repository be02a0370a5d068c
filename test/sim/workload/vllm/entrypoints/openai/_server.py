# STAND-IN: `vllm serve`'s API server (vllm-fleet proving ground): vLLM 0.17.1's
# vllm/entrypoints/openai/api_server.py, which 0.33 and 0.34 moved to vllm/entrypoints/launchers
# (this module is reached through vllm/entrypoints/openai/api_server.py and launchers/).
#
# run_server is `vllm serve`'s single API server: setup_server (version and model, non-default
# args, the parser plugins, validate_api_server_args, bind the port), the engine core (vllm/v1/engine/core.py: model
# checks, executor, reasoning parser), then the OpenAI-compatible HTTP surface: /health, /ping,
# /version, /metrics, /v1/models, /v1/completions, /v1/chat/completions (also `stream`), and their
# /render twins (the request rendered into engine prompts without generating: vLLM 0.17.1's
# completion/api_router.py and chat_completion/api_router.py; a router's cache_aware policy asks them
# before each request; the stand-in's prompt is one token per word, its ids the words' positions);
# --api-key / VLLM_API_KEY gives 401 on /v1/*. A completion needs every rank to answer; its text
# is "ranks: 0@<ip> 1@<ip> ..." and `vllm_fleet_ranks` holds the same (stand-in fields). Also
# POST /invocations (a completion or a chat completion by the body's shape) and POST /tokenize, which
# vLLM serves outside /v1 (no key there in vLLM's own check).
#
# --middleware (vLLM: app.add_middleware of each class, the last given outermost) runs the given ASGI
# middleware classes for real, in order, around the routes: a request they pass goes on, one they
# answer is answered by them (the stand-in is no ASGI server: each request is handed to them as an
# ASGI scope with its body, on an event loop of its own). --allowed-origins is Starlette's CORS
# middleware as vLLM adds it, innermost: a preflight from an allowed origin gets the allow headers,
# from another 400 "Disallowed CORS origin"; an allowed origin's request gets
# Access-Control-Allow-Origin (vLLM 0.17.1's default ["*"]: every origin).
#
# Parser names, as in vLLM 0.17.1 (and 0.34): validate_api_server_args (called by setup_server, i.e. only
# once the server starts, never by `vllm serve`'s parse-and-validate) refuses an unknown
# --tool-call-parser when --enable-auto-tool-choice is set (KeyError "invalid tool call parser:
# ... (chose from { ... })", uncaught: traceback, exit 1). Its reasoning-parser check reads
# args.structured_outputs_config.reasoning_parser, which --reasoning-parser does not set, so an
# unknown --reasoning-parser passes it and fails later, in the engine core
# (vllm/v1/engine/core.py check_reasoning_parser). Without --enable-auto-tool-choice the tool
# parser name is never looked up.
import asyncio
import importlib
import inspect
import json
import os
import signal
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from vllm.logger import decorate_logs, init_logger
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
from vllm.v1.engine.core import HEALTH_INTERVAL, EngineConfig, EngineDead, StartupError, check_reasoning_parser, make_executor
from vllm.v1.worker.gpu_model_runner import capture_graphs, load_and_compile, start_seconds
from vllm.version import __version__ as VERSION

logger = init_logger("vllm.entrypoints.openai.api_server")
core_logger = init_logger("vllm.v1.engine.core")
kv_logger = init_logger("vllm.v1.core.kv_cache_utils")
launcher_logger = init_logger("vllm.entrypoints.launcher")

# STAND-IN pacing of a stream: seconds between two streamed tokens (no model runs here; vLLM's pace
# is its decode step). Non-streaming answers are not paced.
STREAM_TOKEN_INTERVAL = float(os.environ.get("VLLM_SIM_TOKEN_INTERVAL", "0.02"))


def init_parser_plugin(args) -> None:
    """Loads the parser plugins before any name is looked up (vLLM 0.17.1: in setup_server; 0.33
    and 0.34: vllm.entrypoints.common.cli_args.init_parser_plugin)."""
    if args.tool_parser_plugin and len(args.tool_parser_plugin) > 3:
        ToolParserManager.import_tool_parser(args.tool_parser_plugin)
    if args.reasoning_parser_plugin and len(args.reasoning_parser_plugin) > 3:
        ReasoningParserManager.import_reasoning_parser(args.reasoning_parser_plugin)


def validate_api_server_args(args) -> None:
    valid_tool_parsers = ToolParserManager.list_registered()
    if args.enable_auto_tool_choice and args.tool_call_parser not in valid_tool_parsers:
        raise KeyError(f"invalid tool call parser: {args.tool_call_parser} "
                       f"(chose from {{ {','.join(valid_tool_parsers)} }})")
    valid_reasoning_parsers = ReasoningParserManager.list_registered()
    reasoning_parser = getattr(args.structured_outputs_config, "reasoning_parser", "")
    if reasoning_parser and reasoning_parser not in valid_reasoning_parsers:
        raise KeyError(f"invalid reasoning parser: {reasoning_parser} "
                       f"(chose from {{ {','.join(valid_reasoning_parsers)} }})")


def log_version_and_model(version: str, model: str) -> None:
    logo = ("\n       \u2588     \u2588     \u2588\u2584   \u2584\u2588\n"
            " \u2584\u2584 \u2584\u2588 \u2588     \u2588     \u2588 \u2580\u2584\u2580 \u2588  version %s\n"
            "  \u2588\u2584\u2588\u2580 \u2588     \u2588     \u2588     \u2588  model   %s\n"
            "   \u2580\u2580  \u2580\u2580\u2580\u2580\u2580 \u2580\u2580\u2580\u2580\u2580 \u2580     \u2580\n")
    if os.environ.get("VLLM_DISABLE_LOG_LOGO", "0") not in ("0", ""):
        logo = "vLLM server version %s, serving model %s"
    logger.info(logo, version, model, line=302)


def setup_server(args):
    """Validate API server args and bind the port (bound before the engine starts, as vLLM does)."""
    from vllm.entrypoints._startup import log_non_default_args

    log_version_and_model(VERSION, args.model)
    log_non_default_args(args)
    init_parser_plugin(args)
    validate_api_server_args(args)
    host = args.host or ""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, args.port))
    except OSError as e:
        sock.close()
        raise StartupError("OSError", f"[Errno {e.errno}] {e.strerror}: ('{host}', {args.port})") from None
    return sock


# HTTP: the OpenAI-compatible surface vLLM serves

ROUTES = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/health", "GET"), ("/ping", "GET, POST"),
    ("/version", "GET"), ("/v1/models", "GET"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"), ("/v1/completions/render", "POST"), ("/v1/chat/completions/render", "POST"),
    ("/metrics", "GET"), ("/invocations", "POST"), ("/tokenize", "POST"),
]


class _Passed:
    """The innermost ASGI app of the --middleware chain: marks the request as passed on."""

    async def __call__(self, scope, receive, send):
        scope["vllm_fleet_standin.passed"] = True


def middleware_chain(names):
    """vLLM's --middleware, as vllm/entrypoints/serve/middleware/register.py loads it: a class is
    added with app.add_middleware (the last added outermost); a coroutine function would be an HTTP
    middleware (not offered by the stand-in)."""
    app = _Passed()
    for name in names or []:
        module_path, object_name = name.rsplit(".", 1)
        imported = getattr(importlib.import_module(module_path), object_name)
        if not inspect.isclass(imported):
            raise ValueError(f"Invalid middleware {name}. Must be a function or a class.")
        app = imported(app)
    return app


# vLLM 0.32's histogram buckets (vllm/v1/metrics/buckets.py).
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
                80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0)


class Metrics:
    """STAND-IN: the series of vLLM's /metrics that the fleet's monitoring reads (vLLM 0.32's
    vllm/v1/metrics/loggers.py, in prometheus_client's text format, labels model_name and engine),
    from what the stand-in serves: its requests, the tokens it sent (one per word of the text), the
    time each took. Simpler than real: the KV cache usage is the in-flight requests' tokens over the
    KV cache's size; nothing waits (no scheduler), and a time to first token of an answer that is not
    streamed is its whole time."""

    def __init__(self, model_name: str, kv_tokens: int):
        self.labels = f'model_name="{model_name}",engine="0"'
        self.kv_tokens = max(1, kv_tokens)
        self.created = time.time()
        self.lock = threading.Lock()
        self.running = 0
        self.in_flight_tokens = 0
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.success = {"stop": 0, "length": 0, "abort": 0, "error": 0}
        self.histograms = {"time_to_first_token_seconds": (TTFT_BUCKETS, []), "inter_token_latency_seconds": (ITL_BUCKETS, []),
                           "e2e_request_latency_seconds": (E2E_BUCKETS, [])}

    def started(self, tokens: int) -> None:
        with self.lock:
            self.running += 1
            self.in_flight_tokens += tokens

    def finished(self, tokens: int, reply, seconds: float, first_token_seconds: float) -> None:
        with self.lock:
            self.running -= 1
            self.in_flight_tokens -= tokens
            if reply is None:
                return
            usage = reply["usage"]
            self.prompt_tokens += usage["prompt_tokens"]
            self.generation_tokens += usage["completion_tokens"]
            self.success[reply["choices"][0]["finish_reason"]] += 1
            self.histograms["e2e_request_latency_seconds"][1].append(seconds)
            self.histograms["time_to_first_token_seconds"][1].append(first_token_seconds)
            if usage["completion_tokens"] > 1:
                between = (seconds - first_token_seconds) / (usage["completion_tokens"] - 1)
                self.histograms["inter_token_latency_seconds"][1].extend([between] * (usage["completion_tokens"] - 1))

    def text(self) -> str:
        with self.lock:
            out = []

            def family(name, kind, doc, samples):
                out.append(f"# HELP vllm:{name} {doc}")
                out.append(f"# TYPE vllm:{name} {kind}")
                out.extend(samples)

            gauge = lambda name, value: [f"vllm:{name}{{{self.labels}}} {float(value)}"]  # noqa: E731
            family("num_requests_running", "gauge", "Number of requests in model execution batches.", gauge("num_requests_running", self.running))
            family("num_requests_waiting", "gauge", "Number of requests waiting to be processed.", gauge("num_requests_waiting", 0))
            family("kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.",
                   gauge("kv_cache_usage_perc", min(1.0, self.in_flight_tokens / self.kv_tokens)))
            for name, value, doc in (("prompt_tokens", self.prompt_tokens, "Number of prefill tokens processed."),
                                     ("generation_tokens", self.generation_tokens, "Number of generation tokens processed.")):
                family(name, "counter", doc, [f"vllm:{name}_total{{{self.labels}}} {float(value)}",
                                              f"vllm:{name}_created{{{self.labels}}} {self.created}"])
            family("request_success", "counter", "Count of successfully processed requests.",
                   [f'vllm:request_success_total{{{self.labels},finished_reason="{reason}"}} {float(count)}'
                    for reason, count in self.success.items()])
            for name, (buckets, values) in self.histograms.items():
                samples = [f'vllm:{name}_bucket{{{self.labels},le="{bound}"}} {float(sum(1 for v in values if v <= bound))}'
                           for bound in buckets]
                samples.append(f'vllm:{name}_bucket{{{self.labels},le="+Inf"}} {float(len(values))}')
                samples.append(f"vllm:{name}_count{{{self.labels}}} {float(len(values))}")
                samples.append(f"vllm:{name}_sum{{{self.labels}}} {float(sum(values))}")
                family(name, "histogram", f"Histogram of {name.replace('_', ' ')}.", samples)
            return "\n".join(out) + "\n"


class Server:
    def __init__(self, args, engine, served_names, model_path_arg, max_model_len, kv_tokens):
        self.args = args
        self.engine = engine
        self.names = served_names
        self.root = model_path_arg
        self.max_model_len = max_model_len
        keys = args.api_key or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else [])
        self.api_keys = set(keys)
        self.middleware = middleware_chain(getattr(args, "middleware", None)) if getattr(args, "middleware", None) else None
        self.allowed_origins = list(getattr(args, "allowed_origins", None) or [])
        self.dead = None
        self.metrics = Metrics(served_names[0], kv_tokens)

    def models_body(self) -> dict:
        created = int(time.time())
        return {"object": "list", "data": [
            {"id": name, "object": "model", "created": created, "owned_by": "vllm", "root": self.root,
             "parent": None, "max_model_len": self.max_model_len,
             "permission": [{"id": f"modelperm-{uuid.uuid4().hex}", "object": "model_permission",
                             "created": created, "allow_create_engine": False, "allow_sampling": True,
                             "allow_logprobs": True, "allow_search_indices": False, "allow_view": True,
                             "allow_fine_tuning": False, "organization": "*", "group": None,
                             "is_blocking": False}]}
            for name in self.names]}

    def unknown_model(self, body: dict):
        model = body.get("model") or self.names[0]
        if model not in self.names:
            return 404, {"error": {"message": f"The model `{model}` does not exist.", "type": "NotFoundError",
                                   "param": "model", "code": 404}}
        return None

    def too_long(self, body: dict, chat: bool):
        """vLLM's refusal of a request whose prompt and max_tokens exceed --max-model-len (400)."""
        prompt_tokens = max(1, len(self.prompt_text(body, chat).split()))
        asked = body.get("max_completion_tokens") or body.get("max_tokens") or 0
        if isinstance(asked, int) and prompt_tokens + asked > self.max_model_len:
            return 400, {"error": {"message": f"This model's maximum context length is {self.max_model_len} tokens. "
                                              f"However, you requested {asked} output tokens and your prompt contains "
                                              f"{prompt_tokens} input tokens, for a total of {prompt_tokens + asked} tokens. "
                                              "Please reduce the length of the input prompt or the number of requested "
                                              "output tokens.", "type": "BadRequestError", "param": "max_tokens", "code": 400}}
        return None

    @staticmethod
    def prompt_text(body: dict, chat: bool) -> str:
        if chat:
            return json.dumps(body.get("messages", []))
        prompt = body.get("prompt", "")
        return prompt if isinstance(prompt, str) else json.dumps(prompt)

    def render(self, body: dict, chat: bool):
        """POST /v1/completions/render and /v1/chat/completions/render: the model checked, the
        prompt rendered (no engine step): a list of one engine prompt, its token ids."""
        refused = self.unknown_model(body)
        if refused:
            return refused
        prompt = self.prompt_text(body, chat)
        return 200, [{"type": "token", "prompt_token_ids": list(range(max(1, len(prompt.split())))), "prompt": prompt}]

    def tokenize(self, body: dict):
        """POST /tokenize: the prompt's tokens (the stand-in's: one per word, its id the word's position)."""
        refused = self.unknown_model(body)
        if refused:
            return refused
        count = max(1, len(self.prompt_text(body, "messages" in body).split()))
        return 200, {"count": count, "max_model_len": self.max_model_len, "tokens": list(range(count)), "token_strs": None}

    def complete(self, body: dict, chat: bool):
        refused = self.unknown_model(body) or self.too_long(body, chat)
        if refused:
            return refused
        model = body.get("model") or self.names[0]
        request_id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        ranks = self.engine.execute(request_id)
        text = "ranks: " + " ".join(f"{r['rank']}@{r['ip']}" for r in ranks)
        prompt = self.prompt_text(body, chat)
        prompt_tokens = max(1, len(prompt.split()))
        completion_tokens = len(text.split())
        created = int(time.time())
        usage = {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens + completion_tokens,
                 "completion_tokens": completion_tokens, "prompt_tokens_details": None}
        if chat:
            choice = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None,
                                              "tool_calls": [], "reasoning_content": None},
                      "logprobs": None, "finish_reason": "stop", "stop_reason": None}
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "logprobs": None, "finish_reason": "length",
                      "stop_reason": None, "prompt_logprobs": None}
            obj = "text_completion"
        return 200, {"id": request_id, "object": obj, "created": created, "model": model,
                     "choices": [choice], "usage": usage,
                     "vllm_fleet_ranks": [{"rank": r["rank"], "ip": r["ip"]} for r in ranks]}

    def handler(self):
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "uvicorn"
            # TCP_NODELAY on every connection, as vLLM's uvicorn has it (asyncio sets it on each TCP
            # transport): without it a streamed token written after the headers waits for their ACK
            # (Nagle against the peer's delayed ACK), tens of ms that a client reusing its connection
            # (a router's pool) would see and vLLM does not add.
            disable_nagle_algorithm = True
            sys_version = ""

            def log_message(self, fmt, *a):  # uvicorn's access log line
                pass

            def _access(self, status: int) -> None:
                phrase = {200: "OK", 401: "Unauthorized", 404: "Not Found", 400: "Bad Request",
                          405: "Method Not Allowed", 500: "Internal Server Error"}.get(status, "")
                print(f'INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                      f'"{self.command} {self.path} HTTP/1.1" {status} {phrase}', flush=True)

            cors_origin = None

            def _send(self, status: int, body=None, content_type="application/json", raw: bytes = None, headers=()):
                data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                for name, value in headers:
                    self.send_header(name, value)
                if self.cors_origin:
                    self.send_header("access-control-allow-origin", self.cors_origin)
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self._access(status)

            def _authorized(self) -> bool:
                if not server.api_keys or not self.path.startswith("/v1"):
                    return True
                auth = self.headers.get("Authorization", "")
                return auth.startswith("Bearer ") and auth[len("Bearer "):] in server.api_keys

            def _middleware(self, method: str, path: str, raw: bytes) -> bool:
                """Runs the --middleware chain on this request; True when it passed it on, else its
                answer has been sent."""
                query = self.path.split("?", 1)[1] if "?" in self.path else ""
                scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method,
                         "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "",
                         "query_string": query.encode(), "client": self.client_address[:2],
                         "headers": [(k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in self.headers.items()]}
                sent = []

                async def receive():
                    return {"type": "http.request", "body": raw, "more_body": False}

                async def send(message):
                    sent.append(message)

                asyncio.run(server.middleware(scope, receive, send))
                if scope.get("vllm_fleet_standin.passed"):
                    return True
                start = next((m for m in sent if m["type"] == "http.response.start"), None)
                body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
                if start is None:
                    self._send(500, raw=b"Internal Server Error", content_type="text/plain; charset=utf-8")
                    return False
                headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in start.get("headers", [])
                           if k.lower() not in (b"content-length", b"content-type")]
                content_type = next((v.decode("latin-1") for k, v in start.get("headers", []) if k.lower() == b"content-type"),
                                    "text/plain; charset=utf-8")
                self._send(start["status"], raw=body, content_type=content_type, headers=headers)
                return False

            def _cors(self, method: str) -> bool:
                """Starlette's CORSMiddleware as vLLM adds it (allow_methods and allow_headers "*",
                no credentials): True when it answered a preflight itself."""
                origin = self.headers.get("origin")
                if not origin:
                    return False
                allowed = "*" in server.allowed_origins or origin in server.allowed_origins
                if method == "OPTIONS" and self.headers.get("access-control-request-method"):
                    if not allowed:
                        self._send(400, raw=b"Disallowed CORS origin", content_type="text/plain; charset=utf-8")
                        return True
                    self.cors_origin = "*" if "*" in server.allowed_origins else origin
                    requested = self.headers.get("access-control-request-headers")
                    headers = [("access-control-allow-methods", "DELETE, GET, HEAD, OPTIONS, PATCH, POST, PUT"),
                               ("access-control-max-age", "600")]
                    if requested:
                        headers.append(("access-control-allow-headers", requested))
                    self._send(200, raw=b"OK", content_type="text/plain; charset=utf-8", headers=headers)
                    return True
                if allowed:
                    self.cors_origin = "*" if "*" in server.allowed_origins else origin
                return False

            def _route(self, method: str):
                path = self.path.split("?", 1)[0]
                self.cors_origin = None
                # The body is read before any answer, as uvicorn does: a refused request's body left
                # unread would be taken for the start of the next request on a kept-alive connection.
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length) if length else b""
                if server.middleware is not None and not self._middleware(method, path, raw):
                    return
                # vLLM's AuthenticationMiddleware lets OPTIONS through, to CORS.
                if method != "OPTIONS" and not self._authorized():
                    return self._send(401, {"error": "Unauthorized"})
                if self._cors(method):
                    return
                if server.dead is not None and path != "/health":
                    return self._send(500, {"error": {"message": f"EngineCore encountered an issue: {server.dead}",
                                                      "type": "InternalServerError", "param": None, "code": 500}})
                if path == "/health" and method == "GET":
                    return self._send(200 if server.dead is None else 503, raw=b"")
                if path == "/ping" and method in ("GET", "POST"):
                    return self._send(200, raw=b"")
                if path == "/version" and method == "GET":
                    return self._send(200, {"version": VERSION})
                if path == "/metrics" and method == "GET":
                    return self._send(200, raw=server.metrics.text().encode(), content_type="text/plain; version=0.0.4; charset=utf-8")
                if path == "/v1/models" and method == "GET":
                    return self._send(200, server.models_body())
                if path in ("/v1/completions", "/v1/chat/completions", "/v1/completions/render",
                            "/v1/chat/completions/render", "/invocations", "/tokenize") and method == "POST":
                    try:
                        body = json.loads(raw or b"{}")
                        if not isinstance(body, dict):
                            raise ValueError("body is not a JSON object")
                    except ValueError as e:
                        return self._send(400, {"error": {"message": f"Invalid JSON: {e}", "type": "BadRequestError",
                                                          "param": None, "code": 400}})
                    if path.endswith("/render"):
                        return self._send(*server.render(body, chat=path.startswith("/v1/chat/")))
                    if path == "/tokenize":
                        return self._send(*server.tokenize(body))
                    if path == "/invocations":
                        # vLLM's SageMaker-style route: the body's shape says which API it is.
                        if "messages" in body:
                            path = "/v1/chat/completions"
                        elif "prompt" in body:
                            path = "/v1/completions"
                        else:
                            return self._send(400, {"error": {"message": "Cannot find a suitable handler for request",
                                                              "type": "BadRequestError", "param": None, "code": 400}})
                    began = time.monotonic()
                    asked = max(1, len(server.prompt_text(body, "messages" in body).split())) + int(body.get("max_tokens") or 16)
                    server.metrics.started(asked)
                    done = None
                    try:
                        status, reply = server.complete(body, chat=path.endswith("chat/completions"))
                        if status != 200:
                            return self._send(status, reply)
                        done = reply
                        if body.get("stream"):
                            return self._stream(reply, body)
                        return self._send(status, reply)
                    except EngineDead as e:
                        server.die(str(e))
                        return self._send(500, {"error": {"message": f"EngineCore encountered an issue: {e}",
                                                          "type": "InternalServerError", "param": None, "code": 500}})
                    finally:
                        took = time.monotonic() - began
                        first = min(took, STREAM_TOKEN_INTERVAL) if body.get("stream") and done else took
                        server.metrics.finished(asked, done, took, first)
                if any(path == r for r, _ in ROUTES):
                    return self._send(405, {"detail": "Method Not Allowed"})
                return self._send(404, {"detail": "Not Found"})

            def _stream(self, reply: dict, body: dict):
                """Server-sent events as vLLM 0.17.1 streams them (serving_completion.py, serving_chat.py):
                one chunk per generated token, every STREAM_TOKEN_INTERVAL seconds (the stand-in's
                pacing: no model runs), the last one carrying finish_reason; a chat stream opens with
                a chunk holding the role; a usage chunk when stream_options.include_usage; then
                `data: [DONE]`. The chunks' text joined is the non-streaming text. Chunked transfer
                encoding, as uvicorn sends a StreamingResponse."""
                chat = reply["object"] == "chat.completion"
                first = reply["choices"][0]
                text = first["message"]["content"] if chat else first["text"]
                finish_reason = first["finish_reason"]
                # A token per word, its leading space with it: as many as usage.completion_tokens.
                words = text.split(" ")
                tokens = [words[0]] + [" " + word for word in words[1:]]
                head = {"id": reply["id"], "object": "chat.completion.chunk" if chat else "text_completion",
                        "created": reply["created"], "model": reply["model"]}
                options = body.get("stream_options")
                include_usage = isinstance(options, dict) and bool(options.get("include_usage"))

                def event(obj) -> bytes:  # pydantic's model_dump_json: compact, non-ASCII kept
                    return f"data: {json.dumps(obj, separators=(',', ':'), ensure_ascii=False)}\n\n".encode()

                def token_chunk(index: int, token: str) -> dict:
                    last = index == len(tokens) - 1
                    if chat:  # model_dump_json(exclude_unset=True)
                        choice = {"index": 0, "delta": {"content": token}, "logprobs": None,
                                  "finish_reason": finish_reason if last else None}
                        if last:
                            choice["stop_reason"] = None
                        choice["token_ids"] = None
                        return dict(head, choices=[choice])
                    # model_dump_json(exclude_unset=False)
                    return dict(head, choices=[{"index": 0, "text": token, "logprobs": None,
                                                "finish_reason": finish_reason if last else None,
                                                "stop_reason": None, "prompt_token_ids": None, "token_ids": None}],
                                usage=None)

                self.send_response(200)
                self.send_header("content-type", "text/event-stream; charset=utf-8")
                self.send_header("transfer-encoding", "chunked")
                self.end_headers()
                self._access(200)

                def send(data: bytes) -> None:
                    self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")

                try:
                    if chat:
                        send(event(dict(head, choices=[{"index": 0, "delta": {"role": "assistant", "content": ""},
                                                        "logprobs": None, "finish_reason": None}],
                                        prompt_token_ids=None)))
                    for index, token in enumerate(tokens):
                        time.sleep(STREAM_TOKEN_INTERVAL)
                        send(event(token_chunk(index, token)))
                    if include_usage:  # model_dump_json(exclude_none=True)
                        usage = {k: v for k, v in reply["usage"].items() if v is not None}
                        send(event(dict(head, choices=[], usage=usage)))
                    send(b"data: [DONE]\n\n")
                    self.wfile.write(b"0\r\n\r\n")
                except (BrokenPipeError, ConnectionResetError):
                    self.close_connection = True  # the client went away: vLLM aborts the request

            def do_GET(self):  # noqa: N802
                self._route("GET")

            def do_HEAD(self):  # noqa: N802
                self._route("HEAD")

            def do_POST(self):  # noqa: N802
                self._route("POST")

            def do_OPTIONS(self):  # noqa: N802
                self._route("OPTIONS")

        return Handler

    def die(self, reason: str) -> None:
        if self.dead is None:
            self.dead = reason
            core_logger.error("EngineCore encountered a fatal error: %s", reason, line=1095)
            logger.error("AsyncLLM output_handler failed. EngineDeadError: EngineCore encountered an issue. "
                         "See stack trace (above) for the root cause.", line=589)
            # Like vLLM: a dead engine takes the API server down.
            threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGUSR1)),
                             daemon=True).start()




class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True
    # uvicorn's listen backlog (its --backlog default), not socketserver's 5: many clients at once
    # queue, they are not dropped.
    request_queue_size = 2048

    def __init__(self, sock, handler):
        super().__init__(sock.getsockname(), handler, bind_and_activate=False)
        self.socket.close()
        self.socket = sock
        self.server_activate()


def report_startup_error(e: StartupError) -> None:
    for line in str(e).splitlines():
        logger.error("%s", line, line=1088)
    import sys

    print(f"{e.kind}: {e}", file=sys.stderr, flush=True)


def run_server(args) -> int:
    """A single-worker API server with its engine; returns the exit code."""
    decorate_logs("APIServer")
    try:
        sock = setup_server(args)
        config = EngineConfig(args)
        engine = make_executor(args, config)
        try:
            check_reasoning_parser(args)
        except StartupError:
            engine.shutdown()
            raise
    except StartupError as e:
        report_startup_error(e)
        return 1
    core_logger.info("Initializing a V1 LLM engine (v%s) with config: model=%r, tensor_parallel_size=%d, "
                "pipeline_parallel_size=%d, distributed_executor_backend=%s, max_model_len=%d", VERSION,
                config.model, config.tp, config.pp, config.backend, config.max_model_len, line=94)
    core_logger.info("ranks: %s", ", ".join(f"{r['rank']}@{r['ip']}" for r in engine.ranks), line=120)
    # The phases of the engine's start in vLLM's words (v1/worker/gpu_model_runner.py), paced.
    engine_began = time.monotonic()
    pace = start_seconds()
    load_and_compile(config.model, pace)
    kv_tokens = 643232 // max(1, config.world_size) * config.world_size
    kv_logger.info("GPU KV cache size: %s tokens", f"{kv_tokens:,}", line=775)
    kv_logger.info("Maximum concurrency for %s tokens per request: %.2fx", f"{config.max_model_len:,}",
                kv_tokens / config.max_model_len, line=779)
    capture_graphs(pace, engine_began)

    served = args.served_model_name or [config.model]
    server = Server(args, engine, served, config.model, config.max_model_len, kv_tokens)
    httpd = _HTTPServer(sock, server.handler())
    listen = f"http://{args.host or '0.0.0.0'}:{args.port}"
    logger.info("Starting vLLM API server %d on %s", 0, listen, line=500)
    launcher_logger.info("Available routes are:", line=37)
    for route, methods in ROUTES:
        launcher_logger.info("Route: %s, Methods: %s", route, methods, line=46)
    # uvicorn's main loop looks for a shutdown request every 0.1 s (Server.main_loop); so does this
    # server (http.server's default, 0.5 s, would make every stop 0.4 s slower than vLLM's).
    threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.1}, daemon=True).start()
    print(f"INFO:     Started server process [{os.getpid()}]", flush=True)
    print("INFO:     Waiting for application startup.", flush=True)
    print("INFO:     Application startup complete.", flush=True)

    stop = threading.Event()

    def on_signal(signum, _frame):
        # SIGUSR1: the engine died. Real vLLM's API server then shuts down and exits 0 (0.32,
        # measured: Docker's on-failure policy restarts neither rank), as after SIGTERM.
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)
    while not stop.wait(HEALTH_INTERVAL):
        try:
            engine.check()
        except EngineDead as e:
            server.die(str(e))
    print("INFO:     Shutting down", flush=True)
    httpd.shutdown()
    engine.shutdown()
    return 0
