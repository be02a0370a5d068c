# STAND-IN: NCCL (libnccl.so.2, 2.27.5, the version torch 2.10 ships with vLLM 0.17.1) as vLLM's
# pynccl_wrapper sees it, for the vllm-fleet proving ground. No GPU, no RDMA, nothing is sent.
#
# What a rank does when vLLM creates its NCCL communicator (ncclGetUniqueId / ncclCommInitRank),
# with NCCL's own NCCL_DEBUG output, written straight to the process's fd 1 as NCCL's C stdio
# does (so no Python-side log prefix), each line "<host>:<pid>:<tid> [<cudaDev>] NCCL INFO ...":
#  1. bootstrap (src/bootstrap.cc bootstrapNetInit): the interface from NCCL_SOCKET_IFNAME
#     (prefix match, "=" exact, "^" exclude; unset: "ib*", else anything but docker*/lo). None:
#     "bootstrap.cc:115 NCCL WARN Bootstrap : no socket interface found" and ncclInvalidUsage,
#     which vLLM raises as "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN
#     for details)". Else "Bootstrap: Using <if>:<ip><0>".
#  2. "NCCL version 2.27.5+cuda12.9".
#  3. the IB plugin (src/transport/net_ib.cc), unless NCCL_IB_DISABLE=1: "NCCL_IB_HCA set to X";
#     the RoCE devices it can use; none: "NET/IB : No device found." Then, as real NCCL does in
#     both cases, "NET/IB : Using<devices> [RO]; OOB <if>:<ip><0>" (with no device the list is
#     empty: "NET/IB : Using [RO]; OOB ..."; only "Using network ..." tells which one won).
#     With a device: "Initialized NET plugin IB", "Assigned NET plugin IB to comm".
#  4. else the socket plugin (src/transport/net_socket.cc): "NET/Socket : Using [0]<if>:<ip><0> ..."
#     (every matching interface), "Initialized NET plugin Socket", "Assigned NET plugin Socket to comm".
#  5. "Using network IB" or "Using network Socket" (src/init.cc).
# NCCL_DEBUG (VERSION/WARN/INFO/TRACE) and NCCL_DEBUG_SUBSYS (INIT,NET,ENV,BOOTSTRAP,...; "^"
# inverts; default INIT,BOOTSTRAP,ENV) select the lines as in NCCL's debug.cc.
#
# A RoCE device counts as usable, as real NCCL needs it (rdma-core finds /dev/infiniband/uverbsN,
# the HCA's port is ACTIVE, it matches NCCL_IB_HCA), when:
#  - /dev/infiniband/uverbs<N> exists in this container (the HCAs of a Spark in PCI order:
#    rocep1s0f0=0, rocep1s0f1=1, roceP2p1s0f0=2, roceP2p1s0f1=3; `docker run --device`);
#  - its port is up: the node's fabric interface carries the HCA's name as its interface alias
#    (/sys/class/net/<if>/ifalias, set by the node's boot script; host-network containers see
#    it) and is up. This stands in for /sys/class/infiniband/<hca>/ports/1/state;
#  - NCCL_IB_HCA, if set, selects it ("=" exact, "^" exclude, else prefix; ":<port>" allowed);
#    unset, every usable HCA is used, as real NCCL does;
#  - CAP_IPC_LOCK is in the process's effective capabilities (/proc/self/status CapEff bit 14;
#    --privileged has it). Simpler than real: real NCCL finds the device without it and fails
#    later registering memory (ibv_reg_mr) unless the memlock limit is unlimited; here the
#    device is simply not usable, so the rank falls back to sockets as if it had none.
import glob
import os
import socket
import sys
import threading

import fcntl
import struct

NCCL_VERSION = "2.27.5+cuda12.9"
SPARK_HCAS = ("rocep1s0f0", "rocep1s0f1", "roceP2p1s0f0", "roceP2p1s0f1")  # PCI order: uverbs0..3
CAP_IPC_LOCK = 14

_LEVELS = {"VERSION": 1, "WARN": 2, "INFO": 3, "ABORT": 4, "TRACE": 5}
_SUBSYS = {"INIT": 0x1, "COLL": 0x2, "P2P": 0x4, "SHM": 0x8, "NET": 0x10, "GRAPH": 0x20, "TUNING": 0x40,
           "ENV": 0x80, "ALLOC": 0x100, "CALL": 0x200, "PROXY": 0x400, "NVLS": 0x800, "BOOTSTRAP": 0x1000,
           "REG": 0x2000, "PROFILE": 0x4000, "RAS": 0x8000, "ALL": ~0}
INIT, NET, ENV, BOOTSTRAP, ALL = 0x1, 0x10, 0x80, 0x1000, ~0


class NcclError(RuntimeError):
    """What vLLM's NCCLLibrary.NCCL_CHECK raises: RuntimeError("NCCL error: <ncclGetErrorString>")."""


class _Debug:
    """NCCL's debug.cc: level, subsystem mask, and the line format."""

    def __init__(self, cuda_dev: int):
        self.level = _LEVELS.get(os.environ.get("NCCL_DEBUG", "").upper(), 0)
        self.mask = INIT | BOOTSTRAP | ENV
        spec = os.environ.get("NCCL_DEBUG_SUBSYS")
        if spec is not None:
            invert = spec.startswith("^")
            mask = ~0 if invert else 0
            for name in spec.lstrip("^").split(","):
                bit = _SUBSYS.get(name.strip().upper(), 0)
                mask = (mask & ~bit) if invert else (mask | bit)
            self.mask = mask
        self.host = socket.gethostname().split(".")[0]
        self.cuda_dev = cuda_dev

    def _write(self, text: str) -> None:
        sys.stdout.flush()
        os.write(1, text.encode())

    def info(self, flags: int, message: str) -> None:
        if self.level >= _LEVELS["INFO"] and (flags & self.mask):
            self._write(f"{self.host}:{os.getpid()}:{threading.get_native_id()} [{self.cuda_dev}] NCCL INFO {message}\n")

    def warn(self, where: str, message: str) -> None:
        if self.level >= _LEVELS["WARN"]:
            self._write(f"{self.host}:{os.getpid()}:{threading.get_native_id()} [{self.cuda_dev}] {where} NCCL WARN {message}\n")


def iface_ipv4(name: str):
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            packed = fcntl.ioctl(s.fileno(), 0x8915, struct.pack("256s", name[:15].encode()))  # SIOCGIFADDR
            return socket.inet_ntoa(packed[20:24])
    except OSError:
        return None


def _parse_list(spec: str):
    """NCCL's parseStringList: ("=" exact, "^" exclude, [(prefix, port)])."""
    exclude = spec.startswith("^")
    spec = spec[1:] if exclude else spec
    exact = spec.startswith("=")
    spec = spec[1:] if exact else spec
    items = []
    for part in spec.split(","):
        part = part.strip()
        if part:
            name, _, port = part.partition(":")
            items.append((name, int(port) if port.isdigit() else -1))
    return exact, exclude, items


def _match(name: str, port: int, items, exact: bool) -> bool:
    for prefix, want_port in items:
        if want_port not in (-1, port):
            continue
        if (name == prefix) if exact else name.startswith(prefix):
            return True
    return False


def _find(spec: str, max_ifs: int):
    exact, exclude, items = _parse_list(spec)
    found = []
    for _, name in socket.if_nameindex():
        if len(found) >= max_ifs:
            break
        if _match(name, -1, items, exact) == exclude:
            continue
        ip = iface_ipv4(name)
        if ip:
            found.append((name, ip))
    return found


def find_interfaces(debug: _Debug, max_ifs: int):
    """NCCL's ncclFindInterfaces (src/misc/socket.cc), IPv4 only."""
    env = os.environ.get("NCCL_SOCKET_IFNAME")
    if env and len(env) > 1:
        debug.info(ENV, f"NCCL_SOCKET_IFNAME set by environment to {env}")
        return _find(env, max_ifs)
    for spec in ("ib", "^docker,lo", "docker", "lo"):
        found = _find(spec, max_ifs)
        if found:
            return found
    return []


def _cap_ipc_lock() -> bool:
    try:
        with open("/proc/self/status", encoding="utf-8") as f:
            for line in f:
                if line.startswith("CapEff:"):
                    return bool(int(line.split()[1], 16) & (1 << CAP_IPC_LOCK))
    except (OSError, ValueError, IndexError):
        pass
    return False


def _active_hcas():
    """HCAs whose port is ACTIVE: a node interface that is up carries the HCA's name as alias."""
    active = []
    for path in sorted(glob.glob("/sys/class/net/*/ifalias")):
        iface = path.split("/")[-2]
        try:
            with open(path, encoding="utf-8") as f:
                alias = f.read().strip()
            with open(f"/sys/class/net/{iface}/operstate", encoding="utf-8") as f:
                up = f.read().strip() == "up"
        except OSError:
            continue
        if alias and up:
            active.append(alias)
    return active


def usable_ib_devices():
    """The RoCE devices a rank's NCCL can use here, in NCCL's order (see the header)."""
    if not _cap_ipc_lock():
        return []
    hca_env = os.environ.get("NCCL_IB_HCA")
    exact, exclude, items = _parse_list(hca_env) if hca_env else (False, False, [])
    devices = []
    for hca in _active_hcas():
        index = SPARK_HCAS.index(hca) if hca in SPARK_HCAS else 0
        if not os.path.exists(f"/dev/infiniband/uverbs{index}"):
            continue
        if items and _match(hca, 1, items, exact) == exclude:
            continue
        devices.append(hca)
    return sorted(devices, key=lambda h: SPARK_HCAS.index(h) if h in SPARK_HCAS else len(SPARK_HCAS))


def _ib_disabled() -> bool:
    try:
        return int(os.environ.get("NCCL_IB_DISABLE", "0") or "0") != 0
    except ValueError:
        return False


def comm_init_rank(cuda_dev: int) -> str:
    """One rank's communicator init; returns the network NCCL chose ("IB" or "Socket")."""
    debug = _Debug(cuda_dev)
    boot = find_interfaces(debug, 1)
    if not boot:
        debug.warn("bootstrap.cc:115", "Bootstrap : no socket interface found")
        raise NcclError("NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)")
    debug.info(BOOTSTRAP, f"Bootstrap: Using {boot[0][0]}:{boot[0][1]}<0>")
    debug.info(ALL, f"NCCL version {NCCL_VERSION}")

    chosen = []

    def net_init() -> None:  # NCCL runs it on its init thread (another tid), as here
        if not _ib_disabled():
            oob = find_interfaces(debug, 1)
            hca_env = os.environ.get("NCCL_IB_HCA")
            if hca_env is not None:
                debug.info(NET | ENV, f"NCCL_IB_HCA set to {hca_env}")
            devices = usable_ib_devices()
            if not devices:
                debug.info(INIT | NET, "NET/IB : No device found.")
            line = "".join(f" [{i}]{hca}:1/RoCE" for i, hca in enumerate(devices))
            debug.info(INIT | NET, f"NET/IB : Using{line} [RO]; OOB {oob[0][0]}:{oob[0][1]}<0>")
            if devices:
                debug.info(INIT | NET, "Initialized NET plugin IB")
                debug.info(INIT | NET, "Assigned NET plugin IB to comm")
                chosen.append("IB")
                return
        ifs = find_interfaces(debug, 16)
        debug.info(INIT | NET, "NET/Socket : Using" + "".join(f" [{i}]{n}:{ip}<0>" for i, (n, ip) in enumerate(ifs)))
        debug.info(INIT | NET, "Initialized NET plugin Socket")
        debug.info(INIT | NET, "Assigned NET plugin Socket to comm")
        chosen.append("Socket")

    worker = threading.Thread(target=net_init, name="NCCL init")
    worker.start()
    worker.join()
    debug.info(INIT, f"Using network {chosen[0]}")
    return chosen[0]
