"""vllm-fleet gateway launcher: starts vllm-router and keeps the stack's routes registered in it.

This file travels whole to the node (its text is the gateway container's program), so it is one file.

It is not a proxy: every request goes through vllm-router (the vLLM project's router, PyPI
`vllm-router`) in its inference-gateway mode (--enable-igw), which routes by the request's `model`
to the workers registered for that model and passes streaming through. The launcher only starts the
router and keeps its workers as the routes file says, through the router's admin API: every
GATEWAY_CHECK_SECONDS it reads the file and GET /workers, registers each route that is missing or
points elsewhere (POST /workers: the worker URL, the model id, the stack's API key), then removes
each worker that is none of the routes (DELETE /workers/<url>). New routes go in before old ones go
out, so a name that moves from one service to another always has a worker. The routes file is
written by the stack (gateway-routes.sh, through `docker exec`), so a changed route set is applied
in place, the router and its container kept; a change made by hand through the admin API, which
the router leaves open, is undone the same way. Until the file exists the router runs without
routes. The launcher exits with the router's exit status when the router exits, so the container's
restart policy brings both back (the file is in the container's own filesystem: it survives that).

The router forwards the client's Authorization header to the service, whose vLLM checks it against
the stack's API key: a request without the key is refused by the service (401), through the gateway.

Configuration (environment):

  GATEWAY_PORT            the port the router listens on, on all the node's addresses (required)
  GATEWAY_ROUTES_FILE     the routes, a JSON list of {"model": id, "url": "http://<ip>:<port>"}
                          (required; it may not exist yet)
  VLLM_API_KEY            the stack's API key, given to the router with each worker; empty: none
  GATEWAY_CHECK_SECONDS   how often the routes are checked (default 1)
  GATEWAY_ROUTER          the router's program (default vllm-router)

Only Python 3's standard library besides the router itself.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PORT = int(os.environ["GATEWAY_PORT"])
ROUTES_FILE = os.environ["GATEWAY_ROUTES_FILE"]
API_KEY = os.environ.get("VLLM_API_KEY", "")
CHECK_SECONDS = float(os.environ.get("GATEWAY_CHECK_SECONDS", "1"))
ROUTER = os.environ.get("GATEWAY_ROUTER", "vllm-router")
ADMIN = f"http://127.0.0.1:{PORT}"


def log(message):
    print(f"gateway: {message}", flush=True)


def admin(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(ADMIN + path, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def registered():
    """url -> model id of every worker the router has."""
    return {worker["url"]: worker.get("model_id") for worker in admin("GET", "/workers").get("workers", [])}


def wanted_routes():
    """The routes file's routes (None: no file yet); a file that cannot be read keeps the last ones."""
    try:
        with open(ROUTES_FILE) as f:
            return [{"model": str(route["model"]), "url": str(route["url"])} for route in json.load(f)]
    except FileNotFoundError:
        return None


def register(route):
    body = {"url": route["url"], "model_id": route["model"]}
    if API_KEY:
        body["api_key"] = API_KEY
    answer = admin("POST", "/workers", body)
    if not answer.get("success", False):
        raise RuntimeError(answer.get("message", "refused"))
    log(f"route {route['model']} -> {route['url']}")


def keep_routes(routes):
    """Makes the router's workers the routes: the missing ones in first, then the others out."""
    have = registered()
    for route in routes:
        if have.get(route["url"]) == route["model"]:
            continue
        try:
            register(route)
        except (OSError, RuntimeError, ValueError) as error:
            log(f"route {route['model']} -> {route['url']} not registered: {error}")
    wanted = {route["url"] for route in routes}
    for url in sorted(set(have) - wanted):
        try:
            admin("DELETE", "/workers/" + urllib.parse.quote(url, safe=""))
            log(f"removed the worker {url} ({have[url]}): not a route of the stack")
        except (OSError, ValueError) as error:
            log(f"the worker {url} ({have[url]}) is not a route of the stack and could not be removed: {error}")


def main():
    # The router's own settings: all addresses, IGW mode (routing by model), no key on its command
    # line (the workers get it in the registration, from this environment). round_robin: each model
    # has one worker, so the policy chooses nothing; the default, cache_aware, first asks the worker
    # to render every request (vLLM's /v1/completions/render, /v1/chat/completions/render: its
    # tokenizer, on the API server that streams the tokens) and only then sends it, a second round
    # trip before each request's first token.
    router = subprocess.Popen([ROUTER, "--enable-igw", "--policy", "round_robin", "--host", "0.0.0.0", "--port", str(PORT)])

    def stop(signum, _frame):
        router.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    routes = None
    said = None
    while router.poll() is None:
        try:
            current = wanted_routes()
            routes = routes if current is None else current
            if routes is not None:
                keep_routes(routes)
                said = None
        except (OSError, ValueError, KeyError, TypeError) as error:
            # The router still starting, or a routes file half written: said once, tried again.
            if str(error) != said:
                said = str(error)
                log(f"routes not checked: {error}")
        deadline = time.monotonic() + CHECK_SECONDS
        while router.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    log(f"the router exited with status {router.returncode}")
    return router.returncode if router.returncode >= 0 else 128 - router.returncode


if __name__ == "__main__":
    sys.exit(main())
