"""vllm-fleet's keeper of a vLLM rank (mp executor): the main process of each rank's container.

It runs `vllm serve ...` (its arguments: the program and its arguments) as its child and turns what
real vLLM does when its group breaks into what Docker's restart policy (on-failure, bounded by
supervision.restartRetries) acts on:

- vLLM ends itself with status 0 when a rank of its group dies: rank 0's API server answers the
  next request with 500 and exits 0, and a headless rank whose worker died exits 0 as well. Docker
  takes status 0 for a finished job and restarts neither. The keeper exits 1 then (and says why),
  so both come back and rendezvous again.
- A headless rank stays up, silent, for minutes when rank 0 goes away (its API server killed, its
  container restarted by Docker or by the watchdog): it never joins the new rank 0, which then waits
  for it. The keeper of a headless rank (VLLM_FLEET_RANK0_ADDRESS set: rank 0's fabric address)
  looks every VLLM_FLEET_RANK0_INTERVAL seconds (default 5) at two things and ends its rank (exit 1),
  so Docker starts it again to join the next rank 0:
  - vLLM's TCP connections to rank 0's address (its rendezvous store, gloo): none established for
    VLLM_FLEET_RANK0_FAILURES looks in a row (default 3), once vLLM has held one (it joined the
    group) or while one lingers in CLOSE-WAIT (rank 0 closed it and vLLM never did: a group that
    broke between two looks), means rank 0's processes are gone;
  - rank 0's /health (VLLM_FLEET_RANK0_HEALTH), once it has answered 200: its port refusing
    connections for VLLM_FLEET_RANK0_FAILURES looks in a row means rank 0 is gone (its API opens
    only once the whole group serves), also when its node restarted and its kernel never closed the
    connections; no answer at all for VLLM_FLEET_RANK0_SILENCE seconds (default 60) means rank 0's
    node is gone (powered off, unplugged), or too busy to answer for that long.
  Neither acts while the group is still starting: before vLLM has joined, and before rank 0 has
  served, a closed port is no news (rank 0 opens its API only once every rank has joined).
- SIGTERM and SIGINT go to vLLM, which shuts down and exits 0: a stop asked for is not restarted.
  A status vLLM chose is kept; a signal that killed it gives 128 + the signal.

As the container's first process it also reaps the processes vLLM leaves behind, and when it exits,
the kernel ends every process of the container: no engine or worker outlives its API server.

Only Python 3's standard library: it runs in the vLLM image. Lines on stderr start
`vllm-fleet rank:`, between vLLM's own.
"""

import os
import signal
import socket
import sys
import time
import urllib.error
import urllib.request


def log(text):
    sys.stderr.write(f"vllm-fleet rank: {text}\n")
    sys.stderr.flush()


def env_number(name, default, minimum):
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        value = float(raw)
    except ValueError:
        value = None
    if value is None or value < minimum:
        log(f"{name}={raw!r}: expected a number of at least {minimum:g}")
        sys.exit(2)
    return value


def rank0_health(url, timeout):
    """`ok` (200), `refused` (nothing listens on its port) or `silent` (no answer, or another)."""
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return "ok" if response.status == 200 else "silent"
    except urllib.error.URLError as err:
        return "refused" if isinstance(err.reason, ConnectionRefusedError) else "silent"
    except ConnectionRefusedError:
        return "refused"
    except (OSError, ValueError):
        return "silent"


def tcp_address_keys(address):
    """How /proc/net/tcp and tcp6 write an IPv4 address (remote column, without the port)."""
    packed = socket.inet_pton(socket.AF_INET, address)  # OSError for what is not IPv4
    little = "".join(f"{byte:02X}" for byte in reversed(packed))
    return {little, "0000000000000000FFFF0000" + little}


def vllm_sockets(session):
    """The socket inodes vLLM's processes hold: those of its session (the keeper's own probes left out)."""
    inodes = set()
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                # pid (comm) state ppid pgrp session ...: comm may hold spaces and parentheses.
                if int(f.read().rsplit(")", 1)[1].split()[3]) != session:
                    continue
            for fd in os.listdir(f"/proc/{pid}/fd"):
                target = os.readlink(f"/proc/{pid}/fd/{fd}")
                if target.startswith("socket:["):
                    inodes.add(target[8:-1])
        except OSError:
            continue
    return inodes


def connections_to(keys, session):
    """How many of vLLM's TCP connections to the address (its keys) are established, and how many
    linger in CLOSE-WAIT (the peer closed them, vLLM did not)."""
    inodes = vllm_sockets(session)
    established = closed_by_peer = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                next(f, None)
                for line in f:
                    fields = line.split()
                    # sl local remote st ... inode: state 01 is ESTABLISHED, 08 CLOSE-WAIT.
                    if len(fields) > 9 and fields[2].rsplit(":", 1)[0] in keys and fields[9] in inodes:
                        established += fields[3] == "01"
                        closed_by_peer += fields[3] == "08"
        except OSError:
            continue
    return established, closed_by_peer


def exit_status(status):
    """A wait status as a shell reports it: the exit code, or 128 + the signal."""
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 1


def main(argv):
    if not argv:
        log("usage: vllm-rank.py vllm serve ARGS...")
        return 2
    rank0 = os.environ.get("VLLM_FLEET_RANK0_ADDRESS", "")
    health = os.environ.get("VLLM_FLEET_RANK0_HEALTH", "")
    interval = env_number("VLLM_FLEET_RANK0_INTERVAL", 5.0, 0.1)
    failures_allowed = int(env_number("VLLM_FLEET_RANK0_FAILURES", 3, 1))
    silence_allowed = env_number("VLLM_FLEET_RANK0_SILENCE", 60.0, 0.1)
    try:
        rank0_keys = tcp_address_keys(rank0) if rank0 else set()
    except OSError:
        log(f"VLLM_FLEET_RANK0_ADDRESS={rank0!r}: expected an IPv4 address")
        return 2

    asked_to_stop = []

    child = os.fork()
    if child == 0:
        try:
            os.setsid()  # its own group: the keeper can end vLLM with every process it started
            os.execvp(argv[0], argv)
        except OSError as err:
            log(f"cannot run {argv[0]}: {err}")
            os._exit(127)

    def forward(signum, frame):
        asked_to_stop.append(signum)
        try:
            os.kill(child, signum)
        except ProcessLookupError:
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)

    joined = False  # vLLM has held an established connection to rank 0
    lost = 0  # looks in a row that found none since
    served_at = None  # when rank 0's /health last answered 200
    refused = 0  # looks in a row whose /health found its port closed, since it answered 200
    next_look = time.monotonic() + interval
    while True:
        # Reap every process that ended (vLLM's own, and what it left to the container's first process).
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                pid, status = 0, 0
            except InterruptedError:
                continue
            if pid == 0:
                break
            if pid == child:
                code = exit_status(status)
                if asked_to_stop:
                    return code
                if code == 0:
                    log("vLLM exited 0 by itself (it does when a rank of its group dies): exiting 1, so Docker's restart policy starts this rank again")
                    return 1
                log(f"vLLM exited {code}")
                return code
        if rank0 and not asked_to_stop and time.monotonic() >= next_look:
            now = next_look = time.monotonic()
            next_look += interval
            why = None
            established, closed_by_peer = connections_to(rank0_keys, child)
            if established > 0:
                if not joined:
                    log(f"joined rank 0 at {rank0}")
                joined, lost = True, 0
            elif joined or closed_by_peer > 0:
                lost += 1
                if lost >= failures_allowed:
                    why = f"vLLM holds no connection to rank 0 at {rank0} any more ({lost} looks in a row): rank 0 is gone"
            else:
                lost = 0
            if health and why is None:
                answer = rank0_health(health, min(5.0, interval * 2))
                if answer == "ok":
                    if served_at is None:
                        log(f"rank 0 serves ({health})")
                    served_at, refused = now, 0
                elif served_at is not None:
                    refused = refused + 1 if answer == "refused" else 0
                    if refused >= failures_allowed:
                        why = f"rank 0's API refuses connections ({health}: {refused} looks in a row): rank 0 is gone"
                    elif now - served_at >= silence_allowed:
                        why = f"rank 0 has not answered {health} for {now - served_at:.0f} s"
            if why:
                log(f"{why}: ending this rank, so Docker's restart policy starts it again to join the next rank 0")
                try:
                    os.killpg(child, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                return 1
        time.sleep(0.2)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
