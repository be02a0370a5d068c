#!/usr/bin/python3
# STAND-IN for vLLM (`vllm serve`), for the vllm-fleet proving ground. No model runs here.
#
# It behaves like vLLM where a launcher can see it, and nowhere else:
#  - accepts vLLM's `serve` flags (argparse; an unknown flag exits 2 with argparse's message);
#  - reads the model directory (config.json + *.safetensors) and fails like vLLM when it is
#    missing, on every rank's node;
#  - finds its own address like vllm.utils.network_utils.get_ip(): VLLM_HOST_IP, else the
#    source address of the default route, so a missing pin shows up as the real bug;
#  - Ray backend: joins the running Ray cluster, creates the placement group vLLM creates
#    (TPxPP bundles of {GPU: 1}, the first also asking node:<get_ip()>), fails with vLLM's
#    wording when it cannot be placed, starts one Ray actor per bundle and runs the
#    "unique IP per node" check of vLLM's Ray executor;
#  - mp backend (--nnodes/--node-rank/--master-addr/--master-port/--headless): rank 0
#    rendezvouses with the headless ranks over TCP;
#  - serves /health, /v1/models, /v1/completions, /v1/chat/completions; a completion needs
#    every rank to answer and names the node address each rank ran on.
# Timeouts are bounded: VLLM_SIM_STARTUP_TIMEOUT (s, default 60) replaces vLLM's 1800 s
# placement group wait and torch's 600 s rendezvous wait.
import argparse
import fcntl
import glob
import json
import os
import signal
import socket
import struct
import sys
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

VERSION = "0.11.0+vllm-fleet-standin"
STARTUP_TIMEOUT = float(os.environ.get("VLLM_SIM_STARTUP_TIMEOUT", "60"))
HEALTH_INTERVAL = float(os.environ.get("VLLM_SIM_HEALTH_INTERVAL", "5"))
RANK_ENV_VARS = (
    "VLLM_HOST_IP", "RAY_OVERRIDE_NODE_IP_ADDRESS", "RAY_NODE_IP_ADDRESS", "NCCL_SOCKET_IFNAME",
    "GLOO_SOCKET_IFNAME", "TP_SOCKET_IFNAME", "UCX_NET_DEVICES", "NCCL_IB_HCA",
    "NCCL_IB_DISABLE", "CUDA_VISIBLE_DEVICES",
)
PROC = "APIServer"


def set_proc(name: str) -> None:
    global PROC  # noqa: PLW0603 - the log prefix names the process role, like vLLM's
    PROC = name


class StartupError(Exception):
    """A failure vLLM reports as `<ExceptionType>: <message>`; printed, exit 1."""

    def __init__(self, kind: str, message: str):
        super().__init__(kind, message)  # both in args, so it pickles
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message


# --------------------------------------------------------------------------------------------
# logging like vLLM: "(APIServer pid=1) INFO 07-23 13:56:04 [api_server.py:584] message"

def _log(level: str, where: str, message: str, stream) -> None:
    stamp = time.strftime("%m-%d %H:%M:%S")
    for line in message.splitlines() or [""]:
        print(f"({PROC} pid={os.getpid()}) {level} {stamp} [{where}] {line}", file=stream, flush=True)


def info(where: str, message: str) -> None:
    _log("INFO", where, message, sys.stdout)


def warning(where: str, message: str) -> None:
    _log("WARNING", where, message, sys.stdout)


def error(where: str, message: str) -> None:
    _log("ERROR", where, message, sys.stderr)


# --------------------------------------------------------------------------------------------
# node facts

def get_ip() -> str:
    """vllm.utils.network_utils.get_ip(): VLLM_HOST_IP, else the default route's source."""
    host_ip = os.environ.get("VLLM_HOST_IP", "")
    if host_ip:
        return host_ip
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("8.8.8.8", 80))  # no packet is sent
            return s.getsockname()[0]
    except OSError:
        pass
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.connect(("2001:4860:4860::8888", 80))
            return s.getsockname()[0]
    except OSError:
        pass
    warning("network_utils.py:58", "Failed to get the IP address, using 0.0.0.0 by default."
            "The value can be set by the environment variable VLLM_HOST_IP or HOST_IP.")
    return "0.0.0.0"


def iface_ipv4(name: str):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))
            return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None


def match_ifname(spec: str):
    """NCCL/GLOO-style interface selection: '=name' exact, '^x' exclude, else prefix."""
    names = [n for _, n in socket.if_nameindex()]
    for part in spec.split(","):
        part = part.strip()
        if not part or part.startswith("^"):
            continue
        for n in names:
            if (part[1:] == n) if part.startswith("=") else n.startswith(part):
                if iface_ipv4(n):
                    return n
    return None


def local_gpu_count() -> int:
    """GPUs this process can use: the driver stand-in's count, limited by CUDA_VISIBLE_DEVICES."""
    try:
        with open(os.environ.get("SIM_GPUS_FILE", "/etc/sim/gpus"), encoding="utf-8") as f:
            count = int(f.read().strip() or "0")
    except (OSError, ValueError):
        return 0
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        ids = [v for v in visible.split(",") if v.strip() != ""]
        count = min(count, len(ids))
    return count


def resolve_model(model: str) -> str:
    """A local model directory, or a repo id found in the Hugging Face cache (offline)."""
    if os.path.isdir(model):
        path = model
    else:
        path = None
        if "/" in model and not model.startswith(("/", ".")):
            hub = os.environ.get("HF_HUB_CACHE") or os.path.join(
                os.environ.get("HF_HOME", os.path.expanduser("~/.cache/huggingface")), "hub")
            repo = os.path.join(hub, "models--" + model.replace("/", "--"))
            ref = os.path.join(repo, "refs", "main")
            if os.path.isfile(ref):
                with open(ref, encoding="utf-8") as f:
                    candidate = os.path.join(repo, "snapshots", f.read().strip())
                if os.path.isdir(candidate):
                    path = candidate
            if path is None:
                snapshots = sorted(glob.glob(os.path.join(repo, "snapshots", "*")))
                if snapshots:
                    path = snapshots[-1]
        if path is None:
            raise StartupError("ValueError", invalid_model_message(model))
    if not os.path.isfile(os.path.join(path, "config.json")):
        raise StartupError("ValueError", invalid_model_message(model))
    return path


def invalid_model_message(model: str) -> str:
    return (
        f"Invalid repository ID or local directory specified: '{model}'.\n"
        "Please verify the following requirements:\n"
        "1. Provide a valid Hugging Face repository ID.\n"
        "2. Specify a local directory that contains a recognized configuration file.\n"
        "   - For Hugging Face models: ensure the presence of a 'config.json'.\n"
        "   - For Mistral models: ensure the presence of a 'params.json'.\n"
    )


def load_model_config(model: str) -> dict:
    path = resolve_model(model)
    try:
        with open(os.path.join(path, "config.json"), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise StartupError("ValueError", f"Failed to load the model config of '{model}': {e}") from None
    return config


def check_weights(model: str) -> list:
    """The weight files a rank would load; vLLM's error when there are none."""
    path = resolve_model(model)
    files = sorted(glob.glob(os.path.join(path, "*.safetensors")))
    if not files:
        raise StartupError("RuntimeError", f"Cannot find any model weights with `{model}`")
    return files


def check_comm_env() -> dict:
    """What NCCL/Gloo would do with this rank's interface settings; fail like them."""
    facts = {}
    for var in ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"):
        spec = os.environ.get(var)
        if spec:
            iface = match_ifname(spec)
            if iface is None:
                if var == "NCCL_SOCKET_IFNAME":
                    raise StartupError("RuntimeError", "NCCL error: internal error - please report this "
                                       f"issue to the NCCL developers. Last error: Bootstrap : no socket "
                                       f"interface found (NCCL_SOCKET_IFNAME={spec})")
                raise StartupError("RuntimeError", f"[enforce fail at ../third_party/gloo/gloo/transport/"
                                   f"tcp/device.cc:83] ifa != nullptr. Unable to find address for: {spec}")
            facts[var] = {"iface": iface, "ip": iface_ipv4(iface)}
    return facts


def nccl_lines(rank: int, facts: dict) -> list:
    """NCCL_DEBUG=INFO lines (test/fixtures/nccl-fabric-lines.txt): NET/IB or NET/Socket."""
    if os.environ.get("NCCL_DEBUG", "").upper() not in ("INFO", "TRACE"):
        return []
    sock = facts.get("NCCL_SOCKET_IFNAME") or {}
    iface = sock.get("iface") or "eth0"
    ip = sock.get("ip") or get_ip()
    host = socket.gethostname()
    lines = [f"{host}:{os.getpid()}:{os.getpid()} [{rank}] NCCL INFO Bootstrap : Using {iface}:{ip}<0>"]
    hcas = os.environ.get("NCCL_IB_HCA", "")
    if os.environ.get("NCCL_IB_DISABLE") == "1" or not hcas:
        lines.append(f"{host}:{os.getpid()}:{os.getpid()} [{rank}] NCCL INFO NET/Socket : Using [0]{iface}:{ip}<0>")
    else:
        devices = " ".join(f"[{i}]{h.strip().lstrip('=^').split(':')[0]}:1/RoCE"
                           for i, h in enumerate(hcas.split(",")) if h.strip())
        lines.append(f"{host}:{os.getpid()}:{os.getpid()} [{rank}] NCCL INFO NET/IB : Using {devices} [RO]; OOB {iface}:{ip}<0>")
    return lines


def rank_report(rank: int, node_ip: str) -> dict:
    """What one rank tells the engine when it starts: where it runs and what it was given."""
    facts = check_comm_env()
    return {
        "rank": rank,
        "ip": node_ip,
        "vllm_host_ip": get_ip(),
        "hostname": socket.gethostname(),
        "pid": os.getpid(),
        "env": {k: os.environ[k] for k in RANK_ENV_VARS if k in os.environ},
        "comm": facts,
        "nccl": nccl_lines(rank, facts),
    }


# --------------------------------------------------------------------------------------------
# command line: vLLM's `serve` flags (a subset; unknown flags are rejected by argparse)

def _max_model_len(value: str) -> int:
    v = value.strip().lower()
    mult = 1
    if v.endswith("k"):
        mult, v = 1000, v[:-1]
    elif v.endswith("m"):
        mult, v = 1000000, v[:-1]
    try:
        return int(float(v) * mult)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid max_model_len value: '{value}'") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="vllm", description="vLLM CLI (vllm-fleet stand-in)")
    parser.add_argument("-v", "--version", action="version", version=VERSION)
    sub = parser.add_subparsers(dest="subcommand", required=True)
    s = sub.add_parser("serve", help="Start the vLLM OpenAI Compatible API server.",
                       usage="vllm serve [model_tag] [options]")
    s.add_argument("model_tag", nargs="?", help="The model tag to serve (optional if specified in config)")
    s.add_argument("--model", help="Name or path of the Hugging Face model to use.")
    s.add_argument("--host", default=None)
    s.add_argument("--port", type=int, default=8000)
    s.add_argument("--uds", default=None)
    s.add_argument("--api-key", nargs="+", default=None)
    s.add_argument("--served-model-name", nargs="+", default=None)
    s.add_argument("--tensor-parallel-size", "-tp", type=int, default=1)
    s.add_argument("--pipeline-parallel-size", "-pp", type=int, default=1)
    s.add_argument("--data-parallel-size", "-dp", type=int, default=1)
    s.add_argument("--data-parallel-size-local", "-dpl", type=int, default=None)
    s.add_argument("--data-parallel-address", "-dpa", default=None)
    s.add_argument("--data-parallel-rpc-port", "-dpp", type=int, default=None)
    s.add_argument("--data-parallel-backend", "-dpb", choices=["mp", "ray"], default="mp")
    s.add_argument("--enable-expert-parallel", action=argparse.BooleanOptionalAction, default=False)
    s.add_argument("--distributed-executor-backend", choices=["ray", "mp", "uni", "external_launcher"], default=None)
    s.add_argument("--nnodes", "-n", type=int, default=1)
    s.add_argument("--node-rank", "-r", type=int, default=0)
    s.add_argument("--master-addr", default="127.0.0.1")
    s.add_argument("--master-port", type=int, default=29501)
    s.add_argument("--headless", action="store_true")
    s.add_argument("--gpu-memory-utilization", type=float, default=0.9)
    s.add_argument("--max-model-len", type=_max_model_len, default=None)
    s.add_argument("--max-num-seqs", type=int, default=None)
    s.add_argument("--max-num-batched-tokens", type=int, default=None)
    s.add_argument("--dtype", choices=["auto", "half", "float16", "bfloat16", "float", "float32"], default="auto")
    s.add_argument("--kv-cache-dtype", choices=["auto", "bfloat16", "fp8", "fp8_e4m3", "fp8_e5m2", "fp8_inc", "fp8_ds_mla"], default="auto")
    s.add_argument("--quantization", "-q", default=None)
    s.add_argument("--load-format", default="auto")
    s.add_argument("--download-dir", default=None)
    s.add_argument("--tokenizer", default=None)
    s.add_argument("--revision", default=None)
    s.add_argument("--trust-remote-code", action="store_true")
    s.add_argument("--enforce-eager", action="store_true")
    s.add_argument("--seed", type=int, default=None)
    s.add_argument("--swap-space", type=float, default=None)
    s.add_argument("--cpu-offload-gb", type=float, default=0)
    s.add_argument("--enable-prefix-caching", action=argparse.BooleanOptionalAction, default=None)
    s.add_argument("--enable-chunked-prefill", action=argparse.BooleanOptionalAction, default=None)
    s.add_argument("--async-scheduling", action=argparse.BooleanOptionalAction, default=None)
    s.add_argument("--disable-custom-all-reduce", action="store_true")
    s.add_argument("--reasoning-parser", default=None)
    s.add_argument("--tool-call-parser", default=None)
    s.add_argument("--enable-auto-tool-choice", action="store_true")
    s.add_argument("--chat-template", default=None)
    s.add_argument("--generation-config", default="auto")
    s.add_argument("--limit-mm-per-prompt", default=None)
    s.add_argument("--compilation-config", "-O", default=None)
    s.add_argument("--enable-log-requests", action=argparse.BooleanOptionalAction, default=False)
    s.add_argument("--disable-log-stats", action="store_true")
    s.add_argument("--uvicorn-log-level", choices=["debug", "info", "warning", "error", "critical", "trace"], default="info")
    s.add_argument("--allowed-origins", default=None)
    return parser


def normalize_argv(argv: list) -> list:
    """vLLM's FlexibleArgumentParser accepts --snake_case too."""
    out = []
    for arg in argv:
        if arg.startswith("--") and "_" in arg.split("=", 1)[0]:
            name, eq, value = arg.partition("=")
            arg = name.replace("_", "-") + eq + value
        out.append(arg)
    return out


def non_default_args(parser: argparse.ArgumentParser, args: argparse.Namespace) -> dict:
    serve = parser._subparsers._group_actions[0].choices["serve"]  # noqa: SLF001
    defaults = {a.dest: a.default for a in serve._actions}  # noqa: SLF001
    return {k: v for k, v in vars(args).items() if k != "subcommand" and defaults.get(k) != v}


# --------------------------------------------------------------------------------------------
# engines: one object per backend with .ranks (reports), .execute() and .check()

class EngineDead(Exception):
    pass


class UniEngine:
    def __init__(self, args, model: str):
        if local_gpu_count() < 1:
            raise StartupError("RuntimeError", "No CUDA GPUs are available")
        check_weights(model)
        self.ranks = [rank_report(0, get_ip())]

    def execute(self, request_id: str) -> list:
        return [{"rank": 0, "ip": self.ranks[0]["ip"]}]

    def check(self) -> None:
        return None

    def shutdown(self) -> None:
        return None


class RayEngine:
    """vllm/v1/executor/ray_utils.py initialize_ray_cluster + the Ray executor's worker setup."""

    def __init__(self, args, model: str, world_size: int):
        import ray
        from ray.util.placement_group import placement_group, remove_placement_group
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy
        try:
            from ray._private.state import available_resources_per_node
        except ImportError:  # pragma: no cover
            from ray._private.state import state as _state
            available_resources_per_node = _state._available_resources_per_node  # noqa: SLF001

        self.ray = ray
        self._remove_pg = remove_placement_group
        self.pg = None
        self.actors = []
        where = "ray_utils.py:331"
        visible = local_gpu_count()
        if world_size > visible:
            warning(where, f"Total GPU requirement (world_size={world_size}) exceeds locally visible "
                           f"GPUs ({visible}). For multi-node Ray clusters, this may be expected if the "
                           "total cluster has enough GPUs. If running single-node, consider reducing "
                           f"tensor_parallel_size ({args.tensor_parallel_size}) or "
                           f"pipeline_parallel_size ({args.pipeline_parallel_size}).")
        try:
            ray.init(address=os.environ.get("RAY_ADDRESS", "auto"), logging_level="WARNING")
        except ConnectionError as e:
            raise StartupError("ConnectionError", str(e)) from None
        info(where, "No current placement group found. Creating a new placement group.")
        if world_size > ray.cluster_resources().get("GPU", 0):
            warning(where, "The number of required GPUs exceeds the total number of available GPUs "
                           "in the placement group.")
        specs = [{"GPU": 1.0} for _ in range(world_size)]
        current_ip = get_ip()
        current_node_id = ray.get_runtime_context().get_node_id()
        current_node_resource = available_resources_per_node().get(current_node_id, {})
        if current_node_resource.get("GPU", 0) < 1:
            raise StartupError("ValueError", (
                f"Current node has no GPU available. current_node_resource={current_node_resource}. "
                "vLLM engine cannot start without GPU. Make sure you have at least 1 GPU available in "
                f"a node current_node_id={current_node_id!r} current_ip={current_ip!r}."))
        specs[0][f"node:{current_ip}"] = 0.001
        self.pg = placement_group(specs, strategy="PACK")
        self._wait_pg(specs)

        # One actor per bundle, like vLLM's RayWorkerWrapper (num_cpus=0, num_gpus=1).
        worker_cls = ray.remote(num_cpus=0, num_gpus=1)(RayWorkerWrapper)
        self.actors = [
            worker_cls.options(scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=self.pg, placement_group_bundle_index=i,
                placement_group_capture_child_tasks=True)).remote(i, model)
            for i in range(world_size)
        ]
        try:
            reports = ray.get([a.report.remote() for a in self.actors], timeout=STARTUP_TIMEOUT)
        except ray.exceptions.GetTimeoutError:
            self.shutdown()
            raise StartupError("TimeoutError", f"Ray workers did not start within {STARTUP_TIMEOUT:g} seconds") from None
        except ray.exceptions.RayError as e:
            self.shutdown()
            raise StartupError("RuntimeError", f"a Ray worker failed to start: {e}") from None
        for r in reports:
            if "error" in r:
                self.shutdown()
                raise StartupError(r["error"]["kind"], (
                    f"{r['error']['message']}\n(rank {r['rank']} on node {r['ip']})"))

        # vLLM's Ray executor: every node must have a unique IP.
        driver_ip = current_ip
        worker_ips = [r["vllm_host_ip"] for r in reports]
        node_ids = []
        for r in reports:
            if r["node_id"] not in node_ids:
                node_ids.append(r["node_id"])
        all_ips = set(worker_ips + [driver_ip])
        if len(node_ids) != len(all_ips):
            raise StartupError("RuntimeError", (
                f"Every node should have a unique IP address. Got {len(node_ids)} nodes with node ids "
                f"{node_ids} and {len(all_ips)} unique IP addresses {all_ips}. Please check your "
                "network configuration. If you set `VLLM_HOST_IP` environment variable, make sure it "
                "is unique for each node."))
        if current_node_id not in node_ids:
            self.shutdown()
            raise StartupError("RuntimeError", (
                f"driver node id {current_node_id} is not included in a placement group. "
                "You don't have enough GPUs available in a current node. Check `ray status` and "
                "`ray list nodes` to see if you have available GPUs in a node "
                f"`{current_node_id}` before starting an vLLM engine."))
        for node_id in node_ids:
            bundles = sum(1 for r in reports if r["node_id"] == node_id)
            if bundles < args.tensor_parallel_size:
                warning("ray_utils.py:189", (
                    f"tensor_parallel_size={args.tensor_parallel_size} is bigger than a reserved number "
                    f"of GPUs ({bundles} GPUs) in a node {node_id}. Tensor parallel workers can be "
                    "spread out to 2+ nodes which can degrade the performance unless you have fast "
                    "interconnect across nodes, like Infiniband. To resolve this issue, make sure you "
                    f"have more than {args.tensor_parallel_size} GPUs available at each node."))
        self.ranks = reports

    def _wait_pg(self, specs) -> None:
        ray = self.ray
        start = time.time()
        ready_ref = self.pg.ready()
        wait_interval = 10.0
        while time.time() - start < STARTUP_TIMEOUT:
            remaining = STARTUP_TIMEOUT - (time.time() - start)
            ready, _ = ray.wait([ready_ref], timeout=max(0.1, min(wait_interval, remaining)))
            if ready:
                return
            wait_interval *= 2
            info("ray_utils.py:246", (
                f"Waiting for creating a placement group of specs for {int(time.time() - start)} seconds. "
                f"specs={specs}. Check `ray status` and `ray list nodes` to see if you have enough "
                "resources, and make sure the IP addresses used by ray cluster are the same as "
                "VLLM_HOST_IP environment variable specified in each node if you are running on a "
                "multi-node."))
        try:
            ray.get(ready_ref, timeout=0)
            return
        except ray.exceptions.GetTimeoutError:
            pass
        total = sum(spec.get("GPU", 0) for spec in specs)
        self.shutdown()
        if total > 1:
            raise StartupError("ValueError", (
                f"Cannot provide a placement group requiring {total} GPUs "
                f"(placement_group_specs={specs}) within {STARTUP_TIMEOUT:g} seconds.\n"
                "Tensor parallel size may exceed available GPUs in your cluster. Check resources "
                "with `ray status` and `ray list nodes`.\n"
                "If running on K8s with limited GPUs, consider reducing --tensor-parallel-size to "
                "match available GPU resources."))
        raise StartupError("ValueError", (
            f"Cannot provide a placement group of placement_group_specs={specs} within "
            f"{STARTUP_TIMEOUT:g} seconds. See `ray status` and `ray list nodes` to make sure the "
            "cluster has enough resources."))

    def execute(self, request_id: str) -> list:
        try:
            return self.ray.get([a.execute.remote(request_id) for a in self.actors], timeout=30)
        except Exception as e:  # noqa: BLE001 - any rank failure kills the engine
            raise EngineDead(f"{type(e).__name__}: {e}") from None

    def check(self) -> None:
        self.execute("health")

    def shutdown(self) -> None:
        for a in self.actors:
            try:
                self.ray.kill(a)
            except Exception:  # noqa: BLE001
                pass
        self.actors = []
        if self.pg is not None:
            try:
                self._remove_pg(self.pg)
            except Exception:  # noqa: BLE001
                pass
            self.pg = None


class RayWorkerWrapper:
    """One rank, placed by Ray into its bundle (runs in a Ray worker process on some node)."""

    def __init__(self, rank: int, model: str):
        import ray
        self.rank = rank
        self.node_ip = ray.util.get_node_ip_address()
        self.node_id = ray.get_runtime_context().get_node_id()
        try:
            check_weights(model)
            self.facts = rank_report(rank, self.node_ip)
        except StartupError as e:
            print(f"ERROR {time.strftime('%m-%d %H:%M:%S')} [gpu_worker.py:98] {e.kind}: {e}", flush=True)
            self.facts = {"rank": rank, "ip": self.node_ip, "error": {"kind": e.kind, "message": str(e)}}
            return
        for line in self.facts["nccl"]:
            print(line, flush=True)
        print(f"INFO {time.strftime('%m-%d %H:%M:%S')} [gpu_worker.py:104] rank {rank} ready on "
              f"{self.node_ip} (get_ip()={self.facts['vllm_host_ip']}, "
              f"CUDA_VISIBLE_DEVICES={os.environ.get('CUDA_VISIBLE_DEVICES')})", flush=True)

    def report(self) -> dict:
        return dict(self.facts, node_id=self.node_id)

    def execute(self, request_id: str) -> dict:
        return {"rank": self.rank, "ip": self.node_ip}


# ---- mp backend: rank 0 <-> headless ranks over TCP (JSON lines) ---------------------------

def _send(sock: socket.socket, obj: dict) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


class MpEngine:
    """Rank 0 of vLLM's native multi-node (mp): waits for nnodes-1 headless ranks."""

    def __init__(self, args, model: str, world_size: int, local_world_size: int):
        check_local_gpus(local_world_size)
        check_weights(model)
        self.args = args
        self.lock = threading.Lock()
        self.peers = {}  # node_rank -> (socket, reader, reports)
        my_ip = get_ip()
        self.local_ranks = [rank_report(r, my_ip) for r in range(local_world_size)]
        self.ranks = list(self.local_ranks)
        expected = args.nnodes - 1
        self.server = None
        if expected > 0:
            self._rendezvous(expected, world_size, local_world_size)
        for node_rank in sorted(self.peers):
            self.ranks.extend(self.peers[node_rank][2])

    def _rendezvous(self, expected: int, world_size: int, local_world_size: int) -> None:
        args = self.args
        srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            srv.bind(("", args.master_port))
        except OSError as e:
            raise StartupError("torch.distributed.DistNetworkError", (
                f"The server socket has failed to listen on any local network address. port: "
                f"{args.master_port}, useIpv6: false, code: -98, name: EADDRINUSE, message: {e}")) from None
        srv.listen(16)
        srv.settimeout(1.0)
        self.server = srv
        info("multiproc_executor.py:112", (
            f"Waiting for {expected} headless node(s) to join at {args.master_addr}:{args.master_port} "
            f"(nnodes={args.nnodes}, world_size={world_size}, local_world_size={local_world_size})"))
        deadline = time.time() + STARTUP_TIMEOUT
        while len(self.peers) < expected:
            if time.time() > deadline:
                srv.close()
                raise StartupError("torch.distributed.DistStoreError", (
                    f"Timed out after {STARTUP_TIMEOUT:g} seconds waiting for clients. "
                    f"{len(self.peers) + 1}/{args.nnodes} clients joined."))
            try:
                conn, addr = srv.accept()
            except socket.timeout:
                continue
            conn.settimeout(10)
            reader = conn.makefile("r", encoding="utf-8")
            try:
                hello = json.loads(reader.readline() or "{}")
            except (OSError, ValueError):
                conn.close()
                continue
            problem = None
            node_rank = hello.get("node_rank")
            if hello.get("type") != "register":
                problem = "not a vLLM rank"
            elif hello.get("nnodes") != args.nnodes or hello.get("world_size") != world_size:
                problem = (f"mismatched config: nnodes={hello.get('nnodes')} world_size="
                           f"{hello.get('world_size')} (rank 0 has nnodes={args.nnodes} "
                           f"world_size={world_size})")
            elif not isinstance(node_rank, int) or not 1 <= node_rank < args.nnodes:
                problem = f"node_rank {node_rank} out of range [1, {args.nnodes})"
            elif node_rank in self.peers:
                problem = f"node_rank {node_rank} already joined"
            if problem:
                error("multiproc_executor.py:130", f"rejected a rank from {addr[0]}: {problem}")
                try:
                    _send(conn, {"type": "reject", "reason": problem})
                finally:
                    conn.close()
                continue
            conn.settimeout(None)
            reports = hello.get("ranks", [])
            for r in reports:
                r["peer_addr"] = addr[0]
            self.peers[node_rank] = (conn, reader, reports)
            info("multiproc_executor.py:141", (
                f"node_rank {node_rank} joined from {addr[0]}: ranks "
                + ", ".join(f"{r['rank']}@{r['ip']}" for r in reports)))
        for node_rank, (conn, _, _) in self.peers.items():
            _send(conn, {"type": "ready", "world_size": world_size})
        srv.close()
        self.server = None

    def execute(self, request_id: str) -> list:
        results = [{"rank": r["rank"], "ip": r["ip"]} for r in self.local_ranks]
        with self.lock:
            for node_rank in sorted(self.peers):
                conn, reader, _ = self.peers[node_rank]
                try:
                    conn.settimeout(30)
                    _send(conn, {"type": "execute", "id": request_id})
                    answer = json.loads(reader.readline() or "{}")
                    conn.settimeout(None)
                except (OSError, ValueError) as e:
                    raise EngineDead(f"node_rank {node_rank} did not answer: {e}") from None
                if answer.get("type") != "result" or answer.get("id") != request_id:
                    raise EngineDead(f"node_rank {node_rank} went away")
                results.extend(answer.get("ranks", []))
        return sorted(results, key=lambda r: r["rank"])

    def check(self) -> None:
        self.execute(f"health-{uuid.uuid4().hex[:8]}")

    def shutdown(self) -> None:
        for conn, _, _ in self.peers.values():
            try:
                conn.close()
            except OSError:
                pass
        self.peers = {}


def check_local_gpus(local_world_size: int) -> None:
    gpus = local_gpu_count()
    if gpus == 0:
        raise StartupError("RuntimeError", "No CUDA GPUs are available")
    if gpus < local_world_size:
        raise StartupError("torch.AcceleratorError", (
            "CUDA error: invalid device ordinal\n"
            f"(local_world_size={local_world_size} workers on this node, {gpus} GPU(s) visible)"))


def run_headless(args, model: str, world_size: int, local_world_size: int) -> int:
    """A headless rank (--headless --node-rank i): joins rank 0 and answers per request."""
    check_local_gpus(local_world_size)
    check_weights(model)
    my_ip = get_ip()
    first = args.node_rank * local_world_size
    reports = [rank_report(first + i, my_ip) for i in range(local_world_size)]
    for r in reports:
        for line in r["nccl"]:
            print(line, flush=True)
    info("cli/serve.py:210", (
        f"Launching vLLM headless (node_rank={args.node_rank}, nnodes={args.nnodes}, ranks "
        f"{first}..{first + local_world_size - 1}) connecting to {args.master_addr}:{args.master_port}"))
    deadline = time.time() + STARTUP_TIMEOUT
    sock = None
    while sock is None:
        try:
            sock = socket.create_connection((args.master_addr, args.master_port), timeout=5)
        except OSError:
            if time.time() > deadline:
                raise StartupError("torch.distributed.DistNetworkError", (
                    f"The client socket has timed out after {int(STARTUP_TIMEOUT * 1000)}ms while trying "
                    f"to connect to ({args.master_addr}, {args.master_port}).")) from None
            time.sleep(1)
    sock.settimeout(None)
    reader = sock.makefile("r", encoding="utf-8")
    _send(sock, {"type": "register", "node_rank": args.node_rank, "nnodes": args.nnodes,
                 "world_size": world_size, "ranks": reports})
    answer = json.loads(reader.readline() or "{}")
    if answer.get("type") != "ready":
        raise StartupError("RuntimeError", f"rank 0 at {args.master_addr}:{args.master_port} "
                                           f"rejected this node: {answer.get('reason', 'connection closed')}")
    info("cli/serve.py:231", f"headless node_rank {args.node_rank} joined; world_size={world_size}")
    while True:
        line = reader.readline()
        if not line:
            error("core.py:712", "Connection to rank 0 lost: EngineCore died. Shutting down headless node.")
            return 1
        msg = json.loads(line)
        if msg.get("type") == "execute":
            _send(sock, {"type": "result", "id": msg.get("id"),
                         "ranks": [{"rank": r["rank"], "ip": r["ip"]} for r in reports]})


# --------------------------------------------------------------------------------------------
# HTTP: the OpenAI-compatible surface vLLM serves

ROUTES = [
    ("/openapi.json", "GET, HEAD"), ("/docs", "GET, HEAD"), ("/health", "GET"), ("/ping", "GET, POST"),
    ("/version", "GET"), ("/v1/models", "GET"), ("/v1/chat/completions", "POST"),
    ("/v1/completions", "POST"), ("/metrics", "GET"),
]


class Server:
    def __init__(self, args, engine, served_names, model_path_arg, max_model_len):
        self.args = args
        self.engine = engine
        self.names = served_names
        self.root = model_path_arg
        self.max_model_len = max_model_len
        keys = args.api_key or ([os.environ["VLLM_API_KEY"]] if os.environ.get("VLLM_API_KEY") else [])
        self.api_keys = set(keys)
        self.dead = None
        self.requests = 0

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

    def complete(self, body: dict, chat: bool):
        model = body.get("model") or self.names[0]
        if model not in self.names:
            return 404, {"error": {"message": f"The model `{model}` does not exist.", "type": "NotFoundError",
                                   "param": "model", "code": 404}}
        request_id = ("chatcmpl-" if chat else "cmpl-") + uuid.uuid4().hex
        ranks = self.engine.execute(request_id)
        text = "ranks: " + " ".join(f"{r['rank']}@{r['ip']}" for r in ranks)
        if chat:
            prompt = json.dumps(body.get("messages", []))
        else:
            prompt = body.get("prompt", "")
            prompt = prompt if isinstance(prompt, str) else json.dumps(prompt)
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
            sys_version = ""

            def log_message(self, fmt, *a):  # uvicorn's access log line
                pass

            def _access(self, status: int) -> None:
                phrase = {200: "OK", 401: "Unauthorized", 404: "Not Found", 400: "Bad Request",
                          405: "Method Not Allowed", 500: "Internal Server Error"}.get(status, "")
                print(f'({PROC} pid={os.getpid()}) INFO:     {self.client_address[0]}:{self.client_address[1]} - '
                      f'"{self.command} {self.path} HTTP/1.1" {status} {phrase}', flush=True)

            def _send(self, status: int, body=None, content_type="application/json", raw: bytes = None):
                data = raw if raw is not None else (b"" if body is None else json.dumps(body).encode())
                self.send_response(status)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)
                self._access(status)

            def _authorized(self) -> bool:
                if not server.api_keys or not self.path.startswith("/v1"):
                    return True
                auth = self.headers.get("Authorization", "")
                return auth.startswith("Bearer ") and auth[len("Bearer "):] in server.api_keys

            def _route(self, method: str):
                path = self.path.split("?", 1)[0]
                if not self._authorized():
                    return self._send(401, {"error": "Unauthorized"})
                if server.dead is not None and path != "/health":
                    return self._send(500, {"error": {"message": f"EngineCore encountered an issue: {server.dead}",
                                                      "type": "EngineDeadError", "param": None, "code": 500}})
                if path == "/health" and method == "GET":
                    return self._send(200 if server.dead is None else 503, raw=b"")
                if path == "/ping" and method in ("GET", "POST"):
                    return self._send(200, raw=b"")
                if path == "/version" and method == "GET":
                    return self._send(200, {"version": VERSION})
                if path == "/metrics" and method == "GET":
                    text = (f'vllm:num_requests_running{{model_name="{server.names[0]}"}} 0.0\n'
                            f'vllm:request_success_total{{model_name="{server.names[0]}"}} {server.requests}.0\n')
                    return self._send(200, raw=text.encode(), content_type="text/plain; version=0.0.4")
                if path == "/v1/models" and method == "GET":
                    return self._send(200, server.models_body())
                if path in ("/v1/completions", "/v1/chat/completions") and method == "POST":
                    length = int(self.headers.get("content-length") or 0)
                    try:
                        body = json.loads(self.rfile.read(length) or b"{}")
                        if not isinstance(body, dict):
                            raise ValueError("body is not a JSON object")
                    except ValueError as e:
                        return self._send(400, {"error": {"message": f"Invalid JSON: {e}", "type": "BadRequestError",
                                                          "param": None, "code": 400}})
                    try:
                        status, reply = server.complete(body, chat=path.endswith("chat/completions"))
                    except EngineDead as e:
                        server.die(str(e))
                        return self._send(500, {"error": {"message": f"EngineCore encountered an issue: {e}",
                                                          "type": "EngineDeadError", "param": None, "code": 500}})
                    server.requests += 1
                    if status == 200 and body.get("stream"):
                        return self._stream(reply)
                    return self._send(status, reply)
                if any(path == r for r, _ in ROUTES):
                    return self._send(405, {"detail": "Method Not Allowed"})
                return self._send(404, {"detail": "Not Found"})

            def _stream(self, reply: dict):
                chunk = dict(reply, object=("chat.completion.chunk" if reply["object"] == "chat.completion"
                                            else "text_completion"))
                if "message" in reply["choices"][0]:
                    chunk["choices"] = [{"index": 0, "delta": {"role": "assistant",
                                                               "content": reply["choices"][0]["message"]["content"]},
                                         "finish_reason": "stop"}]
                data = f"data: {json.dumps(chunk)}\n\ndata: [DONE]\n\n".encode()
                self._send(200, raw=data, content_type="text/event-stream; charset=utf-8")

            def do_GET(self):  # noqa: N802
                self._route("GET")

            def do_HEAD(self):  # noqa: N802
                self._route("HEAD")

            def do_POST(self):  # noqa: N802
                self._route("POST")

        return Handler

    def die(self, reason: str) -> None:
        if self.dead is None:
            self.dead = reason
            error("core.py:712", f"EngineCore encountered a fatal error: {reason}")
            error("async_llm.py:480", "AsyncLLM output_handler failed. EngineDeadError: EngineCore encountered "
                                      "an issue. See stack trace (above) for the root cause.")
            # Like vLLM: a dead engine takes the API server down.
            threading.Thread(target=lambda: (time.sleep(0.5), os.kill(os.getpid(), signal.SIGUSR1)),
                             daemon=True).start()


# --------------------------------------------------------------------------------------------

def serve(args, parser) -> int:
    model = args.model_tag or args.model
    if args.headless or (args.nnodes > 1 and args.node_rank > 0):
        set_proc("EngineCore")
    if not model:
        raise StartupError("ValueError", "model must be given as the first argument of `vllm serve` or as --model")
    info("api_server.py:1896", f"vLLM API server version {VERSION}")
    info("utils.py:233", f"non-default args: {non_default_args(parser, args)}")
    config = load_model_config(model)

    tp, pp = args.tensor_parallel_size, args.pipeline_parallel_size
    world_size = tp * pp
    backend = args.distributed_executor_backend
    if backend is None and world_size > 1:
        if args.nnodes > 1:
            backend = "mp"
        elif local_gpu_count() < world_size:
            raise StartupError("ValueError", (
                f"World size ({world_size}) is larger than the number of available GPUs "
                f"({local_gpu_count()}) in this node. If this is intentional and you are using:\n"
                "- ray, set '--distributed-executor-backend ray'.\n"
                "- multiprocessing, set '--nnodes' appropriately."))
        else:
            backend = "mp"
    if backend is None:
        backend = "uni"
    if backend not in ("mp", "uni", "external_launcher") and args.nnodes > 1:
        raise StartupError("ValueError", "nnodes > 1 can only be set when distributed executor backend "
                                         "is mp, uni or external_launcher.")
    if args.nnodes < 1 or not 0 <= args.node_rank < args.nnodes:
        raise StartupError("ValueError", f"node_rank ({args.node_rank}) must be in the range [0, {args.nnodes})")
    if backend == "external_launcher":
        raise StartupError("NotImplementedError", "the vllm-fleet stand-in does not simulate external_launcher")

    derived_len = int(config.get("max_position_embeddings")
                      or (config.get("text_config") or {}).get("max_position_embeddings") or 2048)
    max_model_len = args.max_model_len or derived_len
    if max_model_len > derived_len:
        raise StartupError("ValueError", (
            f"User-specified max_model_len ({max_model_len}) is greater than the derived max_model_len "
            f"(max_position_embeddings={derived_len} or model_max_length=None in model's config.json). "
            "To allow overriding this maximum, set the env var VLLM_ALLOW_LONG_MAX_MODEL_LEN=1."))
    info("model.py:547", f"Resolved architecture: {(config.get('architectures') or ['?'])[0]}")
    info("model.py:1510", f"Using max model len {max_model_len}")

    local_world_size = world_size
    if backend == "mp" and args.nnodes > 1:
        if world_size % args.nnodes != 0:
            raise StartupError("AssertionError", (
                f"global world_size ({world_size}) must be divisible by nnodes_within_dp "
                f"({args.nnodes}). "))
        local_world_size = world_size // args.nnodes
        if args.headless or args.node_rank > 0:
            set_proc("EngineCore")
            return run_headless(args, model, world_size, local_world_size)

    if backend == "ray":
        engine = RayEngine(args, model, world_size)
    elif backend == "mp":
        engine = MpEngine(args, model, world_size, local_world_size)
    else:
        engine = UniEngine(args, model)
    for r in engine.ranks:
        for line in r.get("nccl", []) if backend != "ray" else []:
            print(line, flush=True)
    info("core.py:94", f"Initializing a V1 LLM engine (v{VERSION}) with config: model={model!r}, "
                       f"tensor_parallel_size={tp}, pipeline_parallel_size={pp}, "
                       f"distributed_executor_backend={backend}, max_model_len={max_model_len}")
    info("core.py:120", "ranks: " + ", ".join(f"{r['rank']}@{r['ip']}" for r in engine.ranks))
    kv_tokens = 643232 // max(1, world_size) * world_size
    info("kv_cache_utils.py:775", f"GPU KV cache size: {kv_tokens:,} tokens")
    info("kv_cache_utils.py:779", f"Maximum concurrency for {max_model_len:,} tokens per request: "
                                  f"{kv_tokens / max_model_len:.2f}x")

    served = args.served_model_name or [model]
    server = Server(args, engine, served, model, max_model_len)
    host = args.host or "0.0.0.0"
    if args.headless:
        info("cli/serve.py:190", "headless rank 0: not serving HTTP")
        httpd = None
    else:
        try:
            httpd = ThreadingHTTPServer((host, args.port), server.handler())
        except OSError as e:
            engine.shutdown()
            raise StartupError("OSError", f"[Errno {e.errno}] {e.strerror}: ('{host}', {args.port})") from None
        httpd.daemon_threads = True
        info("api_server.py:1971", f"Starting vLLM server on http://{host}:{args.port}")
        info("launcher.py:37", "Available routes are:")
        for route, methods in ROUTES:
            info("launcher.py:46", f"Route: {route}, Methods: {methods}")
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        print(f"({PROC} pid={os.getpid()}) INFO:     Started server process [{os.getpid()}]", flush=True)
        print(f"({PROC} pid={os.getpid()}) INFO:     Waiting for application startup.", flush=True)
        print(f"({PROC} pid={os.getpid()}) INFO:     Application startup complete.", flush=True)

    stop = threading.Event()
    exit_code = [0]

    def on_signal(signum, _frame):
        if signum == signal.SIGUSR1:
            exit_code[0] = 1
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGUSR1, on_signal)
    while not stop.wait(HEALTH_INTERVAL):
        try:
            engine.check()
        except EngineDead as e:
            server.die(str(e))
    if httpd is not None:
        print(f"({PROC} pid={os.getpid()}) INFO:     Shutting down", flush=True)
        httpd.shutdown()
    engine.shutdown()
    return exit_code[0]


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(normalize_argv(sys.argv[1:] if argv is None else argv))
    try:
        return serve(args, parser)
    except StartupError as e:
        for line in str(e).splitlines():
            error("core.py:708", line)
        print(f"{e.kind}: {e}", file=sys.stderr, flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
