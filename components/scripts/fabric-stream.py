#!/usr/bin/env python3
"""
A byte stream from one node to another over the fabric, nothing through the operator's machine
(the image copy of image.source copy: `docker save` on one node into `docker load` on another).

  receive BIND_IP PORT SENDER_IP [--have] -- COMMAND...
      Listens on BIND_IP:PORT (the node's fabric address) for one sender, from SENDER_IP only,
      authenticated both ways with FLEET_SECRET (HMAC over fresh nonces; the secret never travels),
      and writes the stream into COMMAND's standard input. A stream that ends without its end mark
      (the sender died, the link broke) kills COMMAND instead of closing its input, so it takes in
      nothing half-sent. With --have it tells the sender it has the data already and receives
      nothing. Waits at most FLEET_WAIT_SECONDS (120) for the sender, and stops waiting when its
      own controller is gone (its standard output closed). Exit: COMMAND's status, or 3 when the
      stream broke, 4 when no sender came.
  send TARGET_IP PORT [--size BYTES] -- COMMAND...
      Connects to the receiver (retrying for FLEET_WAIT_SECONDS while it starts), authenticates,
      runs COMMAND and streams its standard output in frames, then an end mark, and waits for the
      receiver's verdict (its COMMAND's status). Exit 0 only when the receiver's COMMAND succeeded
      or it had the data already.

Both print a progress line every FLEET_PROGRESS_SECONDS (2) and a last line
`stream-sent|stream-received bytes=N millis=M` (or `stream-skipped`). No state on disk.
Standard library only (python3 is on every DGX OS and simulated node).
"""
import hashlib
import hmac
import os
import select
import socket
import struct
import subprocess
import sys
import time

CHUNK = 1 << 20
MAX_FRAME = 8 << 20
HEADER = struct.Struct(">I")
MAGIC = b"FLEET-STREAM-1"
F_SETPIPE_SZ = 1031


def say(text):
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


def fail(code, text):
    sys.stderr.write(text + "\n")
    sys.stderr.flush()
    sys.exit(code)


def env_seconds(name, default):
    try:
        return float(os.environ.get(name, default))
    except ValueError:
        return float(default)


def mac(secret, role, nonce):
    return hmac.new(secret, role + b" " + nonce, hashlib.sha256).hexdigest().encode()


def read_line(sock, limit=512):
    line = bytearray()
    while not line.endswith(b"\n"):
        byte = sock.recv(1)
        if not byte:
            raise ConnectionError("connection closed during the handshake")
        line += byte
        if len(line) > limit:
            raise ConnectionError("handshake line too long")
    return bytes(line[:-1])


def recv_exact(sock, view):
    got = 0
    while got < len(view):
        count = sock.recv_into(view[got:])
        if count == 0:
            return got
        got += count
    return got


def widen_pipe(fd):
    try:
        import fcntl

        fcntl.fcntl(fd, F_SETPIPE_SZ, CHUNK)
    except (OSError, ImportError):
        pass


class Progress:
    def __init__(self, verb, size=None):
        self.verb = verb
        self.size = size
        self.start = time.monotonic()
        self.next = self.start + env_seconds("FLEET_PROGRESS_SECONDS", 2)
        self.bytes = 0

    def add(self, count):
        self.bytes += count
        now = time.monotonic()
        if now >= self.next:
            self.next = now + env_seconds("FLEET_PROGRESS_SECONDS", 2)
            rate = self.bytes / max(now - self.start, 1e-6) / 2**20
            share = f" of {self.size / 2**20:.0f} MiB ({100 * self.bytes / self.size:.0f}%)" if self.size else ""
            say(f"progress {self.verb} {self.bytes / 2**20:.0f} MiB{share}, {rate:.0f} MiB/s")

    def millis(self):
        return int((time.monotonic() - self.start) * 1000)


def controller_gone():
    """True when our standard output (the SSH session) has no reader any more."""
    poller = select.poll()
    poller.register(1, select.POLLERR | select.POLLHUP)
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def accept_sender(server, sender_ip, secret, have, deadline):
    """The first connection from sender_ip that proves the secret; others are refused and waited past."""
    while True:
        if time.monotonic() > deadline:
            fail(4, f"no sender from {sender_ip} within {env_seconds('FLEET_WAIT_SECONDS', 120):.0f} s")
        if controller_gone():
            fail(4, "the controlling session ended before a sender came")
        server.settimeout(1.0)
        try:
            conn, (address, _) = server.accept()
        except socket.timeout:
            continue
        if address != sender_ip:
            sys.stderr.write(f"refused a connection from {address} (only {sender_ip} may send)\n")
            conn.close()
            continue
        conn.settimeout(30)
        try:
            nonce = os.urandom(16).hex().encode()
            conn.sendall(MAGIC + b" " + nonce + b"\n")
            their_nonce, _, proof = read_line(conn).partition(b" ")
            if not hmac.compare_digest(proof, mac(secret, b"sender", nonce)) or len(their_nonce) != 32:
                raise ConnectionError("the sender does not know the secret")
            conn.sendall(mac(secret, b"receiver", their_nonce) + (b" HAVE\n" if have else b" SEND\n"))
            return conn
        except (ConnectionError, OSError) as error:
            sys.stderr.write(f"refused a sender from {address}: {error}\n")
            conn.close()


def receive(args):
    bind_ip, port, sender_ip = args[0], int(args[1]), args[2]
    have = "--have" in args[3:]
    command = args[args.index("--") + 1 :] if "--" in args else []
    secret = os.environ["FLEET_SECRET"].encode()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((bind_ip, port))
    server.listen(4)
    say(f"receiving on {bind_ip}:{port} from {sender_ip}")
    conn = accept_sender(server, sender_ip, secret, have, time.monotonic() + env_seconds("FLEET_WAIT_SECONDS", 120))
    server.close()
    if have:
        conn.close()
        say("stream-skipped (already here)")
        return 0
    conn.settimeout(env_seconds("FLEET_IDLE_SECONDS", 120))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
    consumer = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=sys.stderr)
    widen_pipe(consumer.stdin.fileno())
    into = consumer.stdin.fileno()
    buffer = bytearray(MAX_FRAME)
    view = memoryview(buffer)
    header = bytearray(HEADER.size)
    progress = Progress("received")
    complete = False
    broken = None
    try:
        while True:
            if recv_exact(conn, memoryview(header)) != HEADER.size:
                broken = f"the stream ended after {progress.bytes} bytes without its end mark"
                break
            (length,) = HEADER.unpack(header)
            if length == 0:
                complete = True
                break
            if length > MAX_FRAME:
                broken = f"a frame of {length} bytes"
                break
            if recv_exact(conn, view[:length]) != length:
                broken = f"the stream ended inside a frame after {progress.bytes} bytes"
                break
            written = 0
            while written < length:
                written += os.write(into, view[written:length])
            progress.add(length)
    except (OSError, socket.timeout) as error:
        broken = f"{error} after {progress.bytes} bytes"
    if not complete:
        # Nothing half-sent reaches the command: it is killed, not given an end of input.
        consumer.kill()
        consumer.wait()
        try:
            conn.close()
        except OSError:
            pass
        fail(3, f"stream broken: {broken}; {' '.join(command)} was stopped")
    consumer.stdin.close()
    status = consumer.wait()
    try:
        conn.sendall(f"DONE {status}\n".encode())
    except OSError:
        pass
    conn.close()
    millis = progress.millis()
    say(f"stream-received bytes={progress.bytes} millis={millis} MiBps={progress.bytes / max(millis, 1) * 1000 / 2**20:.1f}")
    return status


def connect(target_ip, port, deadline):
    while True:
        try:
            return socket.create_connection((target_ip, port), timeout=10)
        except OSError as error:
            if time.monotonic() > deadline:
                fail(4, f"cannot reach the receiver on {target_ip}:{port}: {error}")
            time.sleep(0.2)


def send(args):
    target_ip, port = args[0], int(args[1])
    size = int(args[args.index("--size") + 1]) if "--size" in args[2:] else None
    command = args[args.index("--") + 1 :]
    secret = os.environ["FLEET_SECRET"].encode()
    conn = connect(target_ip, port, time.monotonic() + env_seconds("FLEET_WAIT_SECONDS", 120))
    conn.settimeout(30)
    try:
        magic, _, nonce = read_line(conn).partition(b" ")
        if magic != MAGIC or len(nonce) != 32:
            raise ConnectionError("not a fleet receiver")
        mine = os.urandom(16).hex().encode()
        conn.sendall(mine + b" " + mac(secret, b"sender", nonce) + b"\n")
        proof, _, verdict = read_line(conn).partition(b" ")
        if not hmac.compare_digest(proof, mac(secret, b"receiver", mine)):
            raise ConnectionError("the receiver does not know the secret")
    except (ConnectionError, OSError) as error:
        fail(5, f"handshake with {target_ip}:{port} failed: {error}")
    if verdict == b"HAVE":
        say(f"stream-skipped ({target_ip} has it already)")
        return 0
    conn.settimeout(env_seconds("FLEET_IDLE_SECONDS", 120))
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    producer = subprocess.Popen(command, stdout=subprocess.PIPE, bufsize=0)
    widen_pipe(producer.stdout.fileno())
    source = producer.stdout
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    progress = Progress("sent", size)
    try:
        while True:
            filled = 0
            while filled < CHUNK:
                count = source.readinto(view[filled:])
                if not count:
                    break
                filled += count
            if filled == 0:
                break
            conn.sendall(HEADER.pack(filled))
            conn.sendall(view[:filled])
            progress.add(filled)
        status = producer.wait()
        if status != 0:
            # No end mark: the receiver discards what it got.
            conn.close()
            fail(status, f"{' '.join(command)} exited {status} after {progress.bytes} bytes; the receiver discards them")
        conn.sendall(HEADER.pack(0))
        conn.shutdown(socket.SHUT_WR)
        millis = progress.millis()
        verdict = read_line(conn)
    except (ConnectionError, OSError) as error:
        producer.kill()
        fail(3, f"stream to {target_ip}:{port} broken after {progress.bytes} bytes: {error}")
    conn.close()
    if verdict != b"DONE 0":
        fail(6, f"the receiver on {target_ip} failed: {verdict.decode(errors='replace')}")
    say(f"stream-sent bytes={progress.bytes} millis={millis} MiBps={progress.bytes / max(millis, 1) * 1000 / 2**20:.1f}")
    return 0


def main(argv):
    if len(argv) < 3 or argv[0] not in ("receive", "send"):
        fail(2, "usage: fabric-stream.py receive BIND_IP PORT SENDER_IP [--have] -- COMMAND... | send TARGET_IP PORT [--size BYTES] -- COMMAND...")
    return receive(argv[1:]) if argv[0] == "receive" else send(argv[1:])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
