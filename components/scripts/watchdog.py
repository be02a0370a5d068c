"""vllm-fleet watchdog: keeps the endpoint serving.

This file travels whole to the node (its text is the watchdog container's program), so it is one file.

Runs as the container `vllm-fleet-watchdog` on the first node (host network, the Docker socket
mounted), probes vLLM where it listens (WATCHDOG_HOST) and, when the server stopped serving, brings it back:

- executor `ray`: `vllm serve` runs in the Ray head container as a process started with
  `docker exec`. When that process is gone (seen absent on two probes in a row) the watchdog starts
  it again, with the same arguments; when it runs but its engine is dead (/health answers 503) or
  completions failed WATCHDOG_FAILURES times in a row after its startup grace, the watchdog kills it
  (SIGTERM, then SIGKILL) and starts it again. Both are the restart of vLLM's lifecycle script
  (WATCHDOG_LIFECYCLE, vllm-lifecycle.sh: the stop and the start vllm-serve runs too), run in the
  container by one exec: it checks the serve arguments first (a server that could not be started
  again is left running), stops whatever runs, and starts the server from those arguments.
- executor `mp`: vLLM's rank 0 is the main process of its container. After WATCHDOG_FAILURES failed
  completions in a row (after the startup grace) or a 503 from /health, the watchdog restarts that
  container; the headless ranks on the other nodes follow: each one's keeper (vllm-rank.py) ends its
  rank when rank 0 stops answering, and their restart policy brings them back to the rendezvous.

- executor `gateway`: the container is the stack's gateway (vllm-router behind HAProxy, and their
  launcher, gateway.py). The probe asks the proxy on WATCHDOG_PROXY_PORT for /health (the door
  clients use), and the router's admin API on 127.0.0.1:WATCHDOG_PORT (GET /workers), and checks that
  every route of WATCHDOG_ROUTES is registered; the services behind it are not probed (a service
  that is down is its own watchdog's, and the router answers 503 for its model meanwhile). After
  WATCHDOG_FAILURES failed probes in a row (a router that no longer answers, routes the launcher
  could not register again) the watchdog restarts the gateway's container, whose launcher then
  registers the routes again (from the routes file in the container, which a restart keeps).

A serving container that does not run at all is left to Docker's restart policy: the watchdog only
logs it. So is one that is paused (it is held by whoever paused it) or restarting (Docker counts both
as running, but neither takes an exec), and one that stops, pauses or goes between a look and the
call that needed it running: Docker's refusal (404, 409) is logged as the container being down, and
an action it stops fails with one line naming the container's state. The probe is one completion of a few tokens (POST /v1/completions, success: HTTP 200 with
a list of choices) and GET /health (200: healthy; 503: vLLM's engine died).

Actions are rationed: after each one the watchdog waits WATCHDOG_BACKOFF seconds before probing
again, doubling that wait after each action up to WATCHDOG_BACKOFF_MAX; at most
WATCHDOG_MAX_RESTARTS actions fall within any WATCHDOG_WINDOW seconds. At the cap it logs that it
gives up, keeps probing and logging, and acts again once the window has room. A server that serves
again resets the wait to WATCHDOG_BACKOFF.

It needs only Python 3's standard library: it runs in the vLLM image, which has neither the docker
CLI nor a guaranteed HTTP library, and talks to the Docker Engine API over its unix socket. It
reads nothing from its own file, so `python3 watchdog.py`, `python3 - < watchdog.py` and
`python3 -c "$(cat watchdog.py)"` all work.

Configuration (environment; durations in seconds, fractions allowed):

  WATCHDOG_EXECUTOR       `ray`, `mp` or `gateway` (required)
  WATCHDOG_CONTAINER      the serving container on this node: the Ray head container
                          (`vllm-fleet-ray`, executor ray) or rank 0's container (`vllm-fleet-vllm`,
                          executor mp) (required)
  WATCHDOG_HOST           the address vLLM's API answers on (default 127.0.0.1; the fabric
                          address when it listens there only)
  WATCHDOG_PORT           vLLM's port (required)
  WATCHDOG_MODEL          the served model name sent as `model` (required; not with `gateway`)
  WATCHDOG_ROUTES         executor gateway: JSON list of {"model": id, "url": worker URL}, the routes
                          the router must have (required with `gateway`)
  WATCHDOG_PROXY_PORT     executor gateway: the proxy's port, on 127.0.0.1 (required with `gateway`;
                          WATCHDOG_PORT is then the router's)
  VLLM_API_KEY            vLLM's API key, sent as `Authorization: Bearer`; empty or unset: none
  WATCHDOG_LIFECYCLE      executor ray: the text of vllm-lifecycle.sh, run in the container as
                          `sh -c "$WATCHDOG_LIFECYCLE" vllm-lifecycle restart LOG ARGS_FILE TIMEOUT`
                          (required)
  WATCHDOG_SERVE_ARGS_FILE
                          executor ray: the file inside the container that holds the arguments
                          of `vllm` as a JSON list, e.g. ["serve", "/models/x", "--port", "8000"]
                          (default /tmp/vllm-fleet-serve.args). The lifecycle's start (vllm-start.sh)
                          writes it with each start, so the watchdog starts the server the stack
                          last started, and a change of the serve arguments alone leaves the
                          watchdog as it is.
  WATCHDOG_SERVE_LOG      executor ray: the file inside the container that `vllm serve` writes its
                          output to (default /tmp/vllm-fleet-serve.log)
  WATCHDOG_INTERVAL       between probes (default 10)
  WATCHDOG_FAILURES       failed probes in a row before acting (default 3)
  WATCHDOG_STARTUP_GRACE  how long a freshly (re)started server may fail before failures count
                          (default 600); it ends early once the server has served. Measured from
                          the container's State.StartedAt (mp) or the start of `vllm serve` (ray)
  WATCHDOG_BACKOFF        wait after the first action before probing again (default 30); doubled
                          after each action
  WATCHDOG_BACKOFF_MAX    the longest wait after an action (default 900)
  WATCHDOG_MAX_RESTARTS   actions allowed within WATCHDOG_WINDOW (default 3; 0: only watch)
  WATCHDOG_WINDOW         the window of WATCHDOG_MAX_RESTARTS (default 21600, 6 h)
  WATCHDOG_PROBE_TIMEOUT  how long a completion may take before it counts as failed (default 60)
  WATCHDOG_STOP_TIMEOUT   executor ray: how long `vllm serve` gets to exit after SIGTERM before
                          SIGKILL (default 30): the lifecycle's stop timeout
  WATCHDOG_STATE_FILE     where the last 50 events are kept as JSON (default
                          /tmp/vllm-fleet-watchdog.json)
  WATCHDOG_DOCKER_SOCKET  the Docker Engine API socket (default /var/run/docker.sock)

Output: one line per event on stdout, `<UTC time> watchdog <executor>: <what happened>`; state
changes (serving, failing, serving again) and actions, never a healthy probe. The state file holds
a JSON list of the last 50 events, oldest first, each
{"time": "2026-12-02T21:50:00Z", "event": "action", "detail": "<the log text>",
 "actions_in_window": 1}, replaced atomically after each event. The events: started, serving,
failing, starting (inside the startup grace), serving-again, serve-absent and serve-found (ray),
container-down, container-up, action, kill (the lifecycle's stop had to SIGKILL the server after
the stop timeout), action-failed (with the reason, in one line), gave-up, docker-error, stopped.
SIGTERM or SIGINT: exits 0.

The watchdog finds `vllm serve` with `pgrep -f` inside the serving container, so its own container
must not share that container's process namespace: its own command line holds these words too.
"""

import collections
import datetime
import http.client
import json
import os
import signal
import socket
import struct
import sys
import time

SERVE_PATTERN = "vllm serve"
STATE_EVENTS = 50
DOCKER_TIMEOUT = 30.0


class ConfigError(Exception):
    pass


class ActionError(Exception):
    """An action that cannot be taken (what it needs is missing)."""


class DockerError(Exception):
    """The Docker Engine API could not be reached or answered an error."""


class ContainerDown(DockerError):
    """The container a call needed running is gone, or not running (stopped, paused, restarting)."""

    def __init__(self, container, state, said=""):
        super().__init__(f"container {container} is {state}" + (f" (Docker: {said})" if said else ""))
        self.state = state


def down_state(status, said):
    """The state Docker's refusal (404 or 409) of a call that needs a running container names."""
    if status == 404:
        return "gone"
    lowered = said.lower()
    return "paused" if "paused" in lowered else "restarting" if "restarting" in lowered else "not running"


def container_status(state):
    """State.Status of an inspected container (None: there is none); only `running` takes an exec."""
    if state is None:
        return None
    return state.get("Status") or ("running" if state.get("Running") else "exited")


class Stop(BaseException):
    """Raised by the SIGTERM/SIGINT handler to leave whatever is running at once."""


# ---------------------------------------------------------------------------------------------
# Configuration


def env_str(name, default=None):
    value = os.environ.get(name, "")
    if value == "":
        if default is None:
            raise ConfigError(f"{name} is required")
        return default
    return value


def env_seconds(name, default, minimum=0.0):
    raw = os.environ.get(name, "")
    if raw == "":
        return float(default)
    try:
        value = float(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a number of seconds") from None
    if not value >= minimum:
        raise ConfigError(f"{name}={raw!r}: expected at least {minimum:g}")
    return value


def env_count(name, default, minimum):
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected a whole number") from None
    if value < minimum:
        raise ConfigError(f"{name}={raw!r}: expected at least {minimum}")
    return value


class Config:
    def __init__(self):
        self.executor = env_str("WATCHDOG_EXECUTOR")
        if self.executor not in ("ray", "mp", "gateway"):
            raise ConfigError(f"WATCHDOG_EXECUTOR={self.executor!r}: expected ray, mp or gateway")
        self.container = env_str("WATCHDOG_CONTAINER")
        port = env_str("WATCHDOG_PORT")
        if not port.isdigit() or not 0 < int(port) < 65536:
            raise ConfigError(f"WATCHDOG_PORT={port!r}: expected a TCP port")
        self.port = int(port)
        self.host = env_str("WATCHDOG_HOST", "127.0.0.1")
        self.routes = []
        self.proxy_port = 0
        if self.executor == "gateway":
            proxy_port = env_str("WATCHDOG_PROXY_PORT")
            if not proxy_port.isdigit() or not 0 < int(proxy_port) < 65536:
                raise ConfigError(f"WATCHDOG_PROXY_PORT={proxy_port!r}: expected a TCP port")
            self.proxy_port = int(proxy_port)
            try:
                self.routes = [(str(route["url"]), str(route["model"])) for route in json.loads(env_str("WATCHDOG_ROUTES"))]
            except (ValueError, TypeError, KeyError) as err:
                raise ConfigError(f"WATCHDOG_ROUTES: expected a JSON list of {{\"model\", \"url\"}} ({err})")
        self.model = env_str("WATCHDOG_MODEL", "") if self.executor == "gateway" else env_str("WATCHDOG_MODEL")
        self.api_key = os.environ.get("VLLM_API_KEY", "")
        self.serve_log = env_str("WATCHDOG_SERVE_LOG", "/tmp/vllm-fleet-serve.log")
        self.serve_args_file = env_str("WATCHDOG_SERVE_ARGS_FILE", "/tmp/vllm-fleet-serve.args")
        if not self.serve_args_file.startswith("/"):
            raise ConfigError(f"WATCHDOG_SERVE_ARGS_FILE={self.serve_args_file!r}: expected an absolute path")
        self.lifecycle = env_str("WATCHDOG_LIFECYCLE") if self.executor == "ray" else ""
        self.interval = env_seconds("WATCHDOG_INTERVAL", 10, 0.01)
        self.failures = env_count("WATCHDOG_FAILURES", 3, 1)
        self.grace = env_seconds("WATCHDOG_STARTUP_GRACE", 600)
        self.backoff = env_seconds("WATCHDOG_BACKOFF", 30)
        self.backoff_max = max(self.backoff, env_seconds("WATCHDOG_BACKOFF_MAX", 900))
        self.max_actions = env_count("WATCHDOG_MAX_RESTARTS", 3, 0)
        self.window = env_seconds("WATCHDOG_WINDOW", 21600, 0.01)
        self.probe_timeout = env_seconds("WATCHDOG_PROBE_TIMEOUT", 60, 0.01)
        self.stop_timeout = env_seconds("WATCHDOG_STOP_TIMEOUT", 30)
        self.state_file = env_str("WATCHDOG_STATE_FILE", "/tmp/vllm-fleet-watchdog.json")
        self.socket = env_str("WATCHDOG_DOCKER_SOCKET", "/var/run/docker.sock")


# ---------------------------------------------------------------------------------------------
# Formatting


def utc(ts):
    return datetime.datetime.fromtimestamp(ts, datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def duration(seconds):
    """6h, 15m, 30s, 0.2s: as a person writes a configured duration."""
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{int(seconds // 3600)}h"
    if seconds >= 60 and seconds % 60 == 0:
        return f"{int(seconds // 60)}m"
    if seconds >= 10:
        return f"{seconds:.0f}s"
    return f"{round(seconds, 2):g}s"


def parse_docker_time(text):
    """Docker's RFC 3339 time with nanoseconds (2026-12-02T21:50:00.123456789Z) as epoch seconds."""
    if not text or text.startswith("0001-"):
        return None
    try:
        main, _, rest = text.partition(".")
        frac, zone = "", "Z"
        if rest:
            digits = 0
            while digits < len(rest) and rest[digits].isdigit():
                digits += 1
            frac, zone = rest[:digits], rest[digits:]
        elif text.endswith("Z"):
            main, zone = text[:-1], "Z"
        elif len(text) > 19:
            main, zone = text[:19], text[19:]
        base = datetime.datetime.strptime(main[:19], "%Y-%m-%dT%H:%M:%S")
        if zone in ("Z", ""):
            offset = datetime.timedelta(0)
        else:
            sign = -1 if zone[0] == "-" else 1
            hours, _, minutes = zone[1:].partition(":")
            offset = sign * datetime.timedelta(hours=int(hours), minutes=int(minutes or 0))
        base = base.replace(tzinfo=datetime.timezone.utc) - offset
        return base.timestamp() + (float("0." + frac) if frac else 0.0)
    except (ValueError, IndexError):
        return None


# ---------------------------------------------------------------------------------------------
# The Docker Engine API over its unix socket (unversioned paths: the daemon's own API version)


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.unix_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def demultiplex(data):
    """(stdout, stderr) of an attached exec without a TTY: frames of [stream, 0, 0, 0, size(4)] + payload."""
    out = {1: [], 2: []}
    pos = 0
    while pos + 8 <= len(data):
        kind, size = data[pos], struct.unpack(">I", data[pos + 4 : pos + 8])[0]
        if kind not in (0, 1, 2) or data[pos + 1 : pos + 4] != b"\0\0\0":
            return data.decode("utf-8", "replace"), ""  # not multiplexed after all
        if kind in out:
            out[kind].append(data[pos + 8 : pos + 8 + size])
        pos += 8 + size
    return tuple(b"".join(out[kind]).decode("utf-8", "replace") for kind in (1, 2))


class Docker:
    def __init__(self, socket_path):
        self.socket_path = socket_path

    def request(self, method, path, body=None, timeout=DOCKER_TIMEOUT):
        conn = UnixHTTPConnection(self.socket_path, timeout)
        try:
            headers = {"Host": "docker"}
            payload = None
            if body is not None:
                payload = json.dumps(body).encode()
                headers["Content-Type"] = "application/json"
            conn.request(method, path, body=payload, headers=headers)
            response = conn.getresponse()
            data = response.read()
            return response.status, data
        except (OSError, http.client.HTTPException) as err:
            raise DockerError(f"Docker Engine API at {self.socket_path}: {describe_error(err)}") from None
        finally:
            conn.close()

    def json(self, method, path, body=None, ok=(200,), timeout=DOCKER_TIMEOUT):
        status, data = self.request(method, path, body, timeout)
        if status not in ok:
            raise DockerError(f"{method} {path}: HTTP {status} {api_message(data)}")
        return json.loads(data) if data.strip() else {}

    def inspect(self, name):
        """The container's State, or None when there is no such container."""
        status, data = self.request("GET", f"/containers/{name}/json")
        if status == 404:
            return None
        if status != 200:
            raise DockerError(f"inspect {name}: HTTP {status} {api_message(data)}")
        return json.loads(data).get("State") or {}

    def restart(self, name, stop_seconds=10):
        path = f"/containers/{name}/restart?t={stop_seconds}"
        status, data = self.request("POST", path, timeout=stop_seconds + 120)
        if status == 404:
            raise ContainerDown(name, "gone", api_message(data))
        if status not in (204, 200):
            raise DockerError(f"POST {path}: HTTP {status} {api_message(data)}")

    def exec_run(self, container, cmd, env=None, timeout=120):
        """Runs cmd in the container; returns (exit code, stdout, stderr) once it has ended, within
        `timeout` seconds (a process it leaves behind, such as the server the lifecycle starts,
        holds none of its output)."""
        spec = {"Cmd": cmd, "AttachStdin": False, "AttachStdout": True, "AttachStderr": True, "Tty": False}
        if env:
            spec["Env"] = env
        status, data = self.request("POST", f"/containers/{container}/exec", spec)
        if status in (404, 409):
            # Docker refuses an exec into a container that is gone, stopped, paused or restarting.
            raise ContainerDown(container, down_state(status, api_message(data)), api_message(data))
        if status not in (201, 200):
            raise DockerError(f"POST /containers/{container}/exec: HTTP {status} {api_message(data)}")
        exec_id = json.loads(data)["Id"]
        status, data = self.request("POST", f"/exec/{exec_id}/start", {"Detach": False, "Tty": False}, timeout=timeout)
        if status in (404, 409):
            # The container stopped (or went) between the exec's creation and its start.
            raise ContainerDown(container, down_state(status, api_message(data)), api_message(data))
        if status not in (200, 101, 204):
            raise DockerError(f"exec {cmd[0]} in {container}: HTTP {status} {api_message(data)}")
        stdout, stderr = demultiplex(data)
        deadline = time.monotonic() + 10
        while True:
            info = self.json("GET", f"/exec/{exec_id}/json")
            if not info.get("Running") or time.monotonic() > deadline:
                code = info.get("ExitCode")
                return (code if isinstance(code, int) else -1), stdout, stderr
            time.sleep(0.05)


def api_message(data):
    try:
        return json.loads(data).get("message", "").strip()
    except (ValueError, AttributeError):
        return data[:200].decode("utf-8", "replace").strip()


def describe_error(err):
    if isinstance(err, socket.timeout):
        return "timed out"
    if isinstance(err, ConnectionRefusedError):
        return "connection refused"
    if isinstance(err, FileNotFoundError):
        return "no such socket"
    text = str(err) or type(err).__name__
    return text


# ---------------------------------------------------------------------------------------------
# Probing vLLM


class Probe:
    def __init__(self, ok, detail, engine_dead=False):
        self.ok = ok
        self.detail = detail
        self.engine_dead = engine_dead


def http_call(host, port, method, path, body, headers, timeout):
    """(status, body bytes) or raises OSError / HTTPException."""
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def probe_vllm(config):
    headers = {"Content-Type": "application/json"}
    if config.api_key:
        headers["Authorization"] = "Bearer " + config.api_key
    # /health first: a 503 there is vLLM saying its engine died.
    try:
        status, data = http_call(config.host, config.port, "GET", "/health", None, headers, min(10.0, config.probe_timeout))
        if status == 503:
            return Probe(False, "/health answered 503: engine dead", engine_dead=True)
    except (OSError, http.client.HTTPException):
        pass  # not an answer either way; the completion decides
    body = json.dumps({"model": config.model, "prompt": "Say hello.", "max_tokens": 4, "temperature": 0}).encode()
    try:
        status, data = http_call(config.host, config.port, "POST", "/v1/completions", body, headers, config.probe_timeout)
    except socket.timeout:
        return Probe(False, f"no answer within {duration(config.probe_timeout)}")
    except (OSError, http.client.HTTPException) as err:
        return Probe(False, describe_error(err))
    if status != 200:
        text = " ".join(data[:200].decode("utf-8", "replace").split())
        return Probe(False, f"HTTP {status}" + (f" {text}" if text else ""))
    try:
        choices = json.loads(data).get("choices")
    except (ValueError, AttributeError):
        choices = None
    if not isinstance(choices, list) or not choices:
        return Probe(False, "HTTP 200 without choices")
    return Probe(True, "completion answered")


def probe_gateway(config):
    """The proxy answers /health, and the router its admin API with every route (url -> model) registered."""
    try:
        status, _ = http_call(config.host, config.proxy_port, "GET", "/health", None, {}, min(10.0, config.probe_timeout))
    except socket.timeout:
        return Probe(False, f"the gateway's proxy gave no answer to /health within {duration(min(10.0, config.probe_timeout))}")
    except (OSError, http.client.HTTPException) as err:
        return Probe(False, "the gateway's proxy: " + describe_error(err))
    if status != 200:
        return Probe(False, f"the gateway's proxy answered /health with HTTP {status}")
    try:
        status, data = http_call(config.host, config.port, "GET", "/workers", None, {}, min(10.0, config.probe_timeout))
    except socket.timeout:
        return Probe(False, f"the router's /workers gave no answer within {duration(min(10.0, config.probe_timeout))}")
    except (OSError, http.client.HTTPException) as err:
        return Probe(False, describe_error(err))
    if status != 200:
        return Probe(False, f"the router's /workers answered HTTP {status}")
    try:
        have = {(worker.get("url"), worker.get("model_id")) for worker in json.loads(data).get("workers", [])}
    except (ValueError, AttributeError):
        return Probe(False, "the router's /workers answered no JSON")
    missing = [model for url, model in config.routes if (url, model) not in have]
    if missing:
        return Probe(False, "routes missing in the router: " + ", ".join(missing))
    return Probe(True, "every route registered")


# ---------------------------------------------------------------------------------------------
# The watchdog


class Watchdog:
    def __init__(self, config, docker):
        self.config = config
        self.docker = docker
        self.events = collections.deque(maxlen=STATE_EVENTS)
        self.actions = collections.deque()  # wall times of the actions within the window
        self.backoff = config.backoff
        self.failures = 0  # failed probes in a row that count (after the grace)
        self.serving = None  # None: not known yet
        self.failing_since = None
        self.container_state = None  # "running" or "down"
        self.docker_error = None  # the last error of the Docker Engine API, logged once
        self.gave_up = False
        self.in_grace_logged = False
        # The server being watched: when it started and whether it has served since.
        self.server_id = None  # ray: pid of `vllm serve`; mp: the container's StartedAt
        self.server_started = None
        self.served_since_start = False
        self.absent = 0  # ray: probes in a row that found no `vllm serve`

    # -- logging and state

    def event(self, kind, detail):
        now = time.time()
        entry = {"time": utc(now), "event": kind, "detail": detail, "actions_in_window": self.actions_in_window(now)}
        self.events.append(entry)
        sys.stdout.write(f"{entry['time']} watchdog {self.config.executor}: {detail}\n")
        sys.stdout.flush()
        self.write_state()

    def write_state(self):
        path = self.config.state_file
        tmp = f"{path}.{os.getpid()}.tmp"
        try:
            with open(tmp, "w") as f:
                json.dump(list(self.events), f, indent=1)
                f.write("\n")
            os.replace(tmp, path)
        except OSError as err:
            sys.stderr.write(f"watchdog: cannot write {path}: {err}\n")
            sys.stderr.flush()

    def actions_in_window(self, now):
        while self.actions and self.actions[0] <= now - self.config.window:
            self.actions.popleft()
        return len(self.actions)

    # -- the loop

    def run(self):
        c = self.config
        what = (
            f"{c.container} (the gateway on port {c.proxy_port}, its router on {c.port}, {len(c.routes)} route{'' if len(c.routes) == 1 else 's'})"
            if c.executor == "gateway"
            else f"{c.container} (executor {c.executor}, model {c.model} on port {c.port})"
        )
        self.event(
            "started",
            f"watching {what}: a probe every {duration(c.interval)}, acting after {c.failures} failures, "
            f"startup grace {duration(c.grace)}, at most {c.max_actions} action{'' if c.max_actions == 1 else 's'} "
            f"in {duration(c.window)}",
        )
        while True:
            pause = self.step()
            time.sleep(pause)

    def step(self):
        """One probe and what follows from it; returns the seconds to wait before the next."""
        c = self.config
        try:
            state = self.docker.inspect(c.container)
            status = container_status(state)
            if status == "paused":
                self.set_container_state("down:paused", f"container {c.container} is paused; not acting until it is unpaused")
                pause = c.interval
            elif status != "running":
                how = "does not exist" if state is None else f"is not running ({status})"
                self.set_container_state(
                    f"down:{status}", f"container {c.container} {how}; Docker's restart policy owns it, not acting"
                )
                pause = c.interval
            else:
                self.set_container_state("running", f"container {c.container} is running again")
                pause = self.step_ray() if c.executor == "ray" else self.step_mp(state, probe_gateway if c.executor == "gateway" else probe_vllm)
        except ContainerDown as err:
            # It stopped, paused or went between the look and the exec: down, not an error of Docker's.
            self.set_container_state(f"down:{err.state}", f"{err}; not acting")
            pause = c.interval
        except DockerError as err:
            # Logged once per distinct error, not on every probe.
            if str(err) != self.docker_error:
                self.docker_error = str(err)
                self.event("docker-error", f"{err}; not acting")
            return c.interval
        self.docker_error = None
        return pause

    def set_container_state(self, state, detail):
        """state: `running`, or `down:<why>` (each change of why is logged once)."""
        if state == self.container_state:
            return
        first = self.container_state is None
        self.container_state = state
        if state == "running":
            if not first:
                self.event("container-up", detail)
            return
        self.failures = 0
        self.absent = 0
        self.event("container-down", detail)
        self.set_serving(False, detail, log=False)  # the line above says it

    def new_server(self, server_id, started):
        self.server_id = server_id
        self.server_started = started
        self.served_since_start = False
        self.in_grace_logged = False
        self.failures = 0

    def step_mp(self, state, probe=probe_vllm):
        """mp: rank 0's container, probed with a completion; gateway: the gateway's, probed by its routes."""
        started_at = state.get("StartedAt") or ""
        if started_at != self.server_id:
            self.new_server(started_at, parse_docker_time(started_at) or time.time())
        return self.judge(probe(self.config), f"restarting container {self.config.container}", self.restart_container)

    def step_ray(self):
        c = self.config
        pid = self.serve_pid()
        if pid is None:
            self.absent += 1
            if self.absent == 1:
                self.event("serve-absent", f"vllm serve is not running in {c.container}")
                self.set_serving(False, "", log=False)  # the line above says it
                return c.interval
            return self.act(f"vllm serve is not running in {c.container} ({self.absent} probes)", "starting it", self.start_serve)
        self.absent = 0
        if pid != self.server_id:
            age = self.serve_age(pid)
            self.new_server(pid, time.time() - (age or 0.0))
            self.event("serve-found", f"vllm serve runs in {c.container} (pid {pid}, up {duration(age or 0)})")
        return self.judge(probe_vllm(c), "restarting vllm serve", self.restart_serve)

    def judge(self, probe, action_text, action):
        c = self.config
        now = time.time()
        if probe.ok:
            self.failures = 0
            self.served_since_start = True
            self.set_serving(True, "")
            return c.interval
        if probe.engine_dead:
            self.set_serving(False, probe.detail)
            return self.act("engine dead (/health answered 503)", action_text, action)
        in_grace = not self.served_since_start and self.server_started is not None and now < self.server_started + c.grace
        if in_grace:
            if not self.in_grace_logged:
                self.in_grace_logged = True
                self.event(
                    "starting",
                    f"not serving yet ({probe.detail}); in its startup grace until {utc(self.server_started + c.grace)}",
                )
            return c.interval
        self.failures += 1
        self.set_serving(False, probe.detail)
        if self.failures < c.failures:
            return c.interval
        noun = "probe" if c.executor == "gateway" else "completion"
        plural = noun if self.failures == 1 else f"{noun}s"
        return self.act(f"{self.failures} {plural} failed ({probe.detail})", action_text, action)

    def set_serving(self, serving, detail, log=True):
        if serving == self.serving:
            return
        previous = self.serving
        self.serving = serving
        now = time.time()
        if serving:
            self.backoff = self.config.backoff
            self.gave_up = False
            if previous is None or self.failing_since is None:
                what = "every route" if self.config.executor == "gateway" else self.config.model
                self.event("serving", f"serving {what} on port {self.config.port}")
            else:
                took = now - self.failing_since
                self.event("serving-again", f"serving again after {duration(took if took >= 10 else round(took, 1))}")
            self.failing_since = None
        else:
            self.failing_since = now
            if log:
                self.event("failing", f"not serving: {detail}")

    def act(self, reason, action_text, action):
        """Acts if the window has room; returns the seconds to wait before probing again."""
        c = self.config
        now = time.time()
        used = self.actions_in_window(now)
        if used >= c.max_actions:
            if not self.gave_up:
                self.gave_up = True
                until = utc(self.actions[0] + c.window) if self.actions else "the window has room"
                self.event(
                    "gave-up",
                    f"gave up: {used} action{'' if used == 1 else 's'} within {duration(c.window)}; "
                    f"not acting until {until} ({reason})",
                )
            return c.interval
        self.gave_up = False
        self.actions.append(now)
        wait = self.backoff
        self.backoff = min(self.backoff * 2, c.backoff_max)
        self.event(
            "action",
            f"{reason}; {action_text} (action {used + 1} of {c.max_actions} in {duration(c.window)}; "
            f"next probe in {duration(wait)})",
        )
        self.failures = 0
        self.absent = 0
        try:
            action()
        except (DockerError, ActionError) as err:
            self.event("action-failed", f"{action_text} failed: {err}")
        return wait

    # -- the actions and what they look at

    def serve_pid(self):
        code, out, _ = self.docker.exec_run(self.config.container, ["pgrep", "-o", "-f", SERVE_PATTERN])
        if code != 0:
            return None
        pids = out.split()
        return pids[0] if pids else "?"

    def serve_age(self, pid):
        if not pid.isdigit():
            return None
        try:
            code, out, _ = self.docker.exec_run(self.config.container, ["ps", "-o", "etimes=", "-p", pid])
        except DockerError:
            return None
        out = out.strip()
        return float(out) if code == 0 and out.isdigit() else None

    def restart_container(self):
        c = self.config
        # Looked at again: one stopped since the probe is its restart policy's (or whoever stopped it).
        status = container_status(self.docker.inspect(c.container))
        if status != "running":
            raise ContainerDown(c.container, status or "gone")
        self.docker.restart(c.container, 10)

    def start_serve(self):
        self.run_lifecycle("starting it")

    def restart_serve(self):
        self.run_lifecycle("restarting vllm serve")

    def run_lifecycle(self, action_text):
        """The lifecycle's restart in the Ray head, in one exec that returns when it has: it checks
        the serve arguments the stack's last start left first (a server that could not be started
        again is left running), stops whatever runs (nothing, when the server is gone), and starts
        the server from those arguments, keeping the start's token."""
        c = self.config
        # The arguments and the key never travel here: the lifecycle reads the arguments from the
        # file, the key reaches the server only in the environment of the exec, never a command line.
        env = [f"VLLM_API_KEY={c.api_key}"] if c.api_key else None
        cmd = ["sh", "-c", c.lifecycle, "vllm-lifecycle", "restart", c.serve_log, c.serve_args_file, seconds_arg(c.stop_timeout)]
        # Its stop may take the stop timeout and 5 s more, after a run of another (vllm-start.sh's) it waits for.
        code, out, err = self.docker.exec_run(c.container, cmd, env=env, timeout=2 * c.stop_timeout + 120)
        for line in out.splitlines():
            if line.startswith("the server was killed"):
                self.event("kill", f"{action_text}: {line}")
        if code != 0:
            # Stopped (or gone) under the exec: the container's state is the reason, not the lifecycle's.
            status = container_status(self.docker.inspect(c.container))
            if status != "running":
                raise ContainerDown(c.container, status or "gone")
            lines = [line.strip() for line in (err or out).splitlines() if line.strip()]
            # Its first line says why; a failed start follows it with the server's log, whose last line tells most.
            reason = " ".join(lines[:1] + lines[-1:]) if len(lines) > 1 else (lines[0] if lines else f"the lifecycle exited {code} without saying why")
            raise ActionError(reason)
        self.new_server(None, time.time())


def seconds_arg(seconds):
    """A duration as the lifecycle takes it: 30, 0.2 (never 1e-05)."""
    return f"{seconds:f}".rstrip("0").rstrip(".") or "0"


def main():
    def stop(signum, frame):
        raise Stop()

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        config = Config()
    except ConfigError as err:
        sys.stderr.write(f"watchdog: {err}\n")
        return 2
    watchdog = Watchdog(config, Docker(config.socket))
    try:
        watchdog.run()
    except Stop:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        watchdog.event("stopped", "stopped by a signal")
    return 0


if __name__ == "__main__":
    sys.exit(main())
