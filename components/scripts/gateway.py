"""vllm-fleet gateway launcher: starts vllm-router and keeps the stack's routes registered in it.

This file travels whole to the node (its text is the gateway container's program), so it is one file.

It is not a proxy: every request goes through vllm-router (the vLLM project's router, PyPI
`vllm-router`) in its inference-gateway mode (--enable-igw), which routes by the request's `model`
to the workers registered for that model and passes streaming through. The launcher only starts the
router, registers each route through the router's admin API (POST /workers: the worker URL, the
model id, the stack's API key), and then every GATEWAY_CHECK_SECONDS looks at GET /workers,
registers again any route that is missing or points elsewhere, and removes any worker that is not
one of the routes (a change made through the admin API, which the router leaves open). It exits with the router's exit status when the router
exits, so the container's restart policy brings both back.

The router forwards the client's Authorization header to the service, whose vLLM checks it against
the stack's API key: a request without the key is refused by the service (401), through the gateway.

Configuration (environment):

  GATEWAY_PORT            the port the router listens on, on all the node's addresses (required)
  GATEWAY_ROUTES          JSON list of {"model": id, "url": "http://<ip>:<port>"} (required)
  VLLM_API_KEY            the stack's API key, given to the router with each worker; empty: none
  GATEWAY_CHECK_SECONDS   how often the routes are checked (default 10)
  GATEWAY_ROUTER          the router's program (default vllm-router)

Only Python 3's standard library besides the router itself.
"""
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

PORT = int(os.environ["GATEWAY_PORT"])
ROUTES = json.loads(os.environ["GATEWAY_ROUTES"])
API_KEY = os.environ.get("VLLM_API_KEY", "")
CHECK_SECONDS = float(os.environ.get("GATEWAY_CHECK_SECONDS", "10"))
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


def register(route):
    body = {"url": route["url"], "model_id": route["model"]}
    if API_KEY:
        body["api_key"] = API_KEY
    answer = admin("POST", "/workers", body)
    if not answer.get("success", False):
        raise RuntimeError(answer.get("message", "refused"))
    log(f"route {route['model']} -> {route['url']}")


def keep_routes():
    """Registers every route the router lacks, removes every worker that is none of them; returns
    how many it could not put right."""
    failed = 0
    have = registered()
    wanted = {route["url"] for route in ROUTES}
    for url in sorted(set(have) - wanted):
        try:
            admin("DELETE", "/workers/" + urllib.parse.quote(url, safe=""))
            log(f"removed the worker {url} ({have[url]}): not a route of the stack")
        except (OSError, ValueError) as error:
            failed += 1
            log(f"the worker {url} ({have[url]}) is not a route of the stack and could not be removed: {error}")
    for route in ROUTES:
        if have.get(route["url"]) == route["model"]:
            continue
        try:
            register(route)
        except (OSError, RuntimeError, ValueError) as error:
            failed += 1
            log(f"route {route['model']} -> {route['url']} not registered: {error}")
    return failed


def main():
    # The router's own settings: all addresses, IGW mode (routing by model), no key on its command
    # line (the workers get it in the registration, from this environment).
    router = subprocess.Popen([ROUTER, "--enable-igw", "--host", "0.0.0.0", "--port", str(PORT)])

    def stop(signum, _frame):
        router.send_signal(signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    while router.poll() is None:
        try:
            registered()
            break
        except OSError:
            time.sleep(0.2)
    while router.poll() is None:
        try:
            keep_routes()
        except (OSError, ValueError) as error:
            log(f"the router's admin API did not answer: {error}")
        deadline = time.monotonic() + CHECK_SECONDS
        while router.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
    log(f"the router exited with status {router.returncode}")
    return router.returncode if router.returncode >= 0 else 128 - router.returncode


if __name__ == "__main__":
    sys.exit(main())
