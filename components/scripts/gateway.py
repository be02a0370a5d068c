"""vllm-fleet gateway launcher: starts vllm-router behind HAProxy and keeps the stack's routes registered.

This file travels whole to the node (its text is the gateway container's program), so it is one file.

Two programs, both from their published packages, and this launcher, which is neither:
- vllm-router (the vLLM project's router, PyPI `vllm-router`) in its inference-gateway mode
  (--enable-igw) on 127.0.0.1:GATEWAY_ROUTER_PORT only: it routes each request by its `model` to the
  workers registered for that model and passes streaming through. Its admin API (/workers,
  /add_worker, /remove_worker, /list_workers, /flush_cache, ...) answers on the same port without a
  key, so no one off this node reaches it.
- HAProxy on GATEWAY_PORT (all the node's IPv4 addresses), configured by GATEWAY_PROXY_CONFIG
  (infra/core/plan/gateway.ts gatewayProxyConfig): the door clients use. It refuses a request
  without the stack's API key (it compares the key's SHA-256 with GATEWAY_KEY_SHA256: this
  container holds no key), passes only the OpenAI routes and /health to the router, answers CORS
  preflights from the stack's allowed origins only, and drops the router's allow-every-origin answers.
The launcher starts both and keeps the router's workers as the routes file says, through the admin
API on the loopback: every GATEWAY_CHECK_SECONDS it reads the file and GET /workers, registers each
route that is missing or points elsewhere (POST /workers: the worker URL and the model id), then
removes each worker that is none of the routes (DELETE /workers/<url>). New routes go in before old
ones go out, so a name that moves from one service to another always has a worker. The routes file
is written by the stack (gateway-routes.sh, through `docker exec`), so a changed route set is applied
in place, the router and its container kept. Until the file exists the router runs without routes.
When either program exits, the launcher stops the other and exits with its status, so the
container's restart policy brings all back (the routes file is in the container's own filesystem: it
survives that).

The router forwards the client's Authorization header to the service, whose vLLM checks it against
the stack's API key once more (the services' own key check: vllm_fleet_key.py).

Configuration (environment):

  GATEWAY_PORT            the port clients connect to (HAProxy's), on all the node's addresses (required)
  GATEWAY_ROUTER_PORT     the router's port, on 127.0.0.1 (required)
  GATEWAY_PROXY_CONFIG    HAProxy's configuration (required)
  GATEWAY_KEY_SHA256      the SHA-256 (hex) of the stack's API key, which HAProxy's configuration reads
  GATEWAY_ROUTES_FILE     the routes, a JSON list of {"model": id, "url": "http://<ip>:<port>"}
                          (required; it may not exist yet)
  GATEWAY_CHECK_SECONDS   how often the routes are checked (default 1)
  GATEWAY_METRICS_HOST    where the router's Prometheus metrics listen, on its port 29000 (default
                          127.0.0.1; the node's fabric address when the stack's Prometheus scrapes them)
  GATEWAY_ROUTER          the router's program (default vllm-router)
  GATEWAY_PROXY           the proxy's program (default haproxy)

Only Python 3's standard library besides the two programs.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.parse
import urllib.request

PORT = int(os.environ["GATEWAY_PORT"])
ROUTER_PORT = int(os.environ["GATEWAY_ROUTER_PORT"])
PROXY_CONFIG = os.environ["GATEWAY_PROXY_CONFIG"]
ROUTES_FILE = os.environ["GATEWAY_ROUTES_FILE"]
CHECK_SECONDS = float(os.environ.get("GATEWAY_CHECK_SECONDS", "1"))
ROUTER = os.environ.get("GATEWAY_ROUTER", "vllm-router")
PROXY = os.environ.get("GATEWAY_PROXY", "haproxy")
METRICS_HOST = os.environ.get("GATEWAY_METRICS_HOST", "127.0.0.1")
PROXY_CONFIG_FILE = "/tmp/vllm-fleet-gateway-haproxy.cfg"
ADMIN = f"http://127.0.0.1:{ROUTER_PORT}"


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
    # No api_key: the router passes each client's Authorization header on, and the service checks it.
    body = {"url": route["url"], "model_id": route["model"]}
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


def start(program, args, what):
    """Starts one of the two programs; a missing one ends the launcher, naming what to install."""
    if shutil.which(program) is None:
        log(f"{program} is not in this image: the gateway's image needs {what}")
        sys.exit(127)
    return subprocess.Popen([program, *args])


def main():
    # The proxy first, from its configuration checked before it runs (-c: a wrong one is said here).
    with open(PROXY_CONFIG_FILE, "w") as f:
        f.write(PROXY_CONFIG)
    checked = subprocess.run([PROXY, "-c", "-q", "-f", PROXY_CONFIG_FILE]) if shutil.which(PROXY) else None
    if checked is not None and checked.returncode != 0:
        log(f"{PROXY} refuses its configuration ({PROXY_CONFIG_FILE})")
        return 2
    proxy = start(PROXY, ["-db", "-f", PROXY_CONFIG_FILE], "HAProxy (Debian's or Ubuntu's haproxy package)")
    # The router: the loopback only, IGW mode (routing by model), no key on its command line (it
    # needs none: the client's Authorization header goes on to the service). round_robin: each model
    # has one worker, so the policy chooses nothing; the default, cache_aware, first asks the worker
    # to render every request (vLLM's /v1/completions/render, /v1/chat/completions/render: its
    # tokenizer, on the API server that streams the tokens) and only then sends it, a second round
    # trip before each request's first token.
    # Its Prometheus metrics on its default port, on the loopback, or where the stack's Prometheus
    # reaches them (GATEWAY_METRICS_HOST: the node's fabric address, with monitoring).
    router = start(ROUTER, ["--enable-igw", "--policy", "round_robin", "--host", "127.0.0.1", "--port", str(ROUTER_PORT),
                            "--prometheus-host", METRICS_HOST],
                   "vllm-router (pip install vllm-router)")
    children = {"router": router, "proxy": proxy}

    def stop(signum, _frame):
        for child in children.values():
            if child.poll() is None:
                child.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    routes = None
    said = None

    def exited():
        return next(((name, child) for name, child in children.items() if child.poll() is not None), None)

    while exited() is None:
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
        while exited() is None and time.monotonic() < deadline:
            time.sleep(0.1)
    name, child = exited()
    log(f"the {name} exited with status {child.returncode}; stopping the other")
    for other in children.values():
        if other.poll() is None:
            other.terminate()
            try:
                other.wait(timeout=10)
            except subprocess.TimeoutExpired:
                other.kill()
    return child.returncode if child.returncode >= 0 else 128 - child.returncode


if __name__ == "__main__":
    sys.exit(main())
