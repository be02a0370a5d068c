# STAND-IN: vLLM 0.17.1's native multi-node executor (vllm/v1/executor/multiproc_executor.py,
# `--nnodes N --node-rank i --master-addr A --master-port P [--headless]`), for the vllm-fleet
# proving ground. Rank 0's node serves the API and waits for the headless nodes' ranks at
# master-addr:master-port; every node runs its local ranks (GPUs per node = world size / nnodes;
# a node with fewer GPUs fails with CUDA's "invalid device ordinal"). Each rank initializes its
# NCCL communicator on its own node (NCCL's lines on the container's stdout). Simpler than real:
# the rendezvous is JSON lines over one TCP connection per node instead of torch's TCPStore and
# process groups, and all local ranks live in one process (real: one process per GPU).
import json
import socket
import threading
import time

from vllm.logger import init_logger
from vllm.utils.network_utils import get_ip
from vllm.v1.engine.core import STARTUP_TIMEOUT, EngineDead, StartupError, check_local_gpus
from vllm.v1.worker.gpu_worker import init_device, load_model

logger = init_logger(__name__)


def _send(sock: socket.socket, obj: dict) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


def start_local_ranks(config, first_rank: int) -> list:
    """This node's ranks: GPUs, then each rank's device (Gloo, NCCL) and weights."""
    check_local_gpus(config.local_world_size)
    my_ip = get_ip()
    reports = [init_device(first_rank + i, i, my_ip) for i in range(config.local_world_size)]
    load_model(config.model, first_rank)
    return reports


class MultiprocExecutor:
    """Rank 0's node: its local ranks, then the headless nodes' ranks join."""

    def __init__(self, args, config):
        self.args = args
        self.lock = threading.Lock()
        self.peers = {}  # node_rank -> (socket, reader, reports)
        self.local_ranks = start_local_ranks(config, 0)
        self.ranks = list(self.local_ranks)
        self.server = None
        if config.nnodes > 1:
            self._rendezvous(config.nnodes - 1, config.world_size, config.local_world_size)
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
        logger.info("Waiting for %d headless node(s) to join at %s:%d (nnodes=%d, world_size=%d, "
                    "local_world_size=%d)", expected, args.master_addr, args.master_port, args.nnodes,
                    world_size, local_world_size, line=112)
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
                logger.error("rejected a rank from %s: %s", addr[0], problem, line=130)
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
            logger.info("node_rank %d joined from %s: ranks %s", node_rank, addr[0],
                        ", ".join(f"{r['rank']}@{r['ip']}" for r in reports), line=141)
        for conn, _, _ in self.peers.values():
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
        # Real vLLM (0.32, CPU build, measured): /health asks whether the engine core lives, not its
        # ranks; a rank that is gone shows on the next request (500), which ends the server (exit 0).
        pass

    def shutdown(self) -> None:
        for conn, _, _ in self.peers.values():
            try:
                conn.close()
            except OSError:
                pass
        self.peers = {}


def run_headless(args, config) -> int:
    """A headless node (--headless --node-rank i): its ranks join rank 0 and answer per request."""
    from vllm.version import __version__

    first = args.node_rank * config.local_world_size
    logger.info("Launching vLLM (v%s) headless multiproc executor, with head node address %s:%d for "
                "torch.distributed process group.", __version__, args.master_addr, args.master_port, line=173)
    reports = start_local_ranks(config, first)
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
                 "world_size": config.world_size, "ranks": reports})
    answer = json.loads(reader.readline() or "{}")
    if answer.get("type") != "ready":
        raise StartupError("RuntimeError", f"rank 0 at {args.master_addr}:{args.master_port} "
                                           f"rejected this node: {answer.get('reason', 'connection closed')}")
    logger.info("headless node_rank %d joined (ranks %d..%d); world_size=%d", args.node_rank, first,
                first + config.local_world_size - 1, config.world_size, line=231)
    while True:
        line = reader.readline()
        if not line:
            # Real vLLM (0.32, CPU build, measured): a headless rank whose rank 0 went away stays up,
            # silent, for minutes (it waits on rank 0's message queue); it never joins a new rank 0.
            threading.Event().wait()
        msg = json.loads(line)
        if msg.get("type") == "execute":
            _send(sock, {"type": "result", "id": msg.get("id"),
                         "ranks": [{"rank": r["rank"], "ip": r["ip"]} for r in reports]})
