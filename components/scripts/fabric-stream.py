#!/usr/bin/env python3
"""
A byte stream from one node to another over the fabric, nothing through the operator's machine
(the image copy of image.source copy: `docker save` on one node into `docker load` on another).
This file travels whole to a node (its text is the program a node runs), so it is one file.

  receive BIND_IP PORT SENDER_IP [--have] [--note FILE] -- COMMAND...
      Listens on BIND_IP:PORT (the node's fabric address) for one sender, from SENDER_IP only,
      authenticated both ways with FLEET_SECRET (HMAC over fresh nonces; the secret never travels),
      and writes the stream into COMMAND's standard input. A stream that ends without its end mark
      (the sender died, the link broke) kills COMMAND instead of closing its input, so it takes in
      nothing half-sent. With --have it tells the sender it has the data already and receives
      nothing; with --note it hands the sender FILE's bytes (at most 8 MiB) with its answer, once
      the sender proved the secret (the image copy: which layers this node has). Waits at most
      FLEET_WAIT_SECONDS (120) for the sender, and stops waiting when its own controller is gone
      (its standard output closed). Exit: COMMAND's status, or 3 when the stream broke, 4 when no
      sender came.
  send TARGET_IP PORT [--size BYTES] [--note-out FILE] -- COMMAND...
      Connects to the receiver (retrying for FLEET_WAIT_SECONDS while it starts), authenticates,
      writes the receiver's note into FILE (empty when it gave none), runs COMMAND and streams its
      standard output in frames, then an end mark, and waits for the receiver's verdict (its
      COMMAND's status). Exit 0 only when the receiver's COMMAND succeeded
      or it had the data already.

  receive-files BIND_IP PORT SENDER_IP DIR
      Files into DIR over one or more connections from SENDER_IP (each authenticated as above):
      for each file the sender names (relative, inside DIR), its size and modification time, the
      receiver answers the offset it has already (a partial file of that very size and time, left by
      a broken transfer), takes the rest into DIR/.NAME.SIZE-MTIME.fleet-part and, when whole, gives
      it the sender's mode and time and renames it to NAME. Ends when every connection the sender
      announced has said END (exit 0; then no part is of use any more, and any left from earlier
      transfers is removed), or when no connection was open for FLEET_WAIT_SECONDS
      (exit 3 after a broken one, 4 when no sender came).
  send-files TARGET_IP PORT DIR [--streams K]
      Of the files of DIR named on standard input (one relative path a line; a link stands for the
      file it points to; a name that is not a regular file here is left out, saying so), asks the receiver which it lacks or has with
      another size or time (rsync's quick check), and sends those over K connections
      at once (default 4; at most one per file), each file whole on one connection, the largest
      first to the connection with the fewest bytes so far; the bytes go from the page cache to the
      socket (sendfile). Exit 0 when every file arrived whole.

All print a progress line every FLEET_PROGRESS_SECONDS (2) and a last line
`stream-sent|stream-received bytes=N millis=M` (`files-sent|files-received files=F bytes=N
millis=M`; or `stream-skipped`). No state on disk but the files received and their partial parts.
Standard library only (python3 is on every DGX OS and simulated node). Simpler than rsync: a file
is checked by its size and time only (rsync's quick check), and a partial part is continued, not
compared; TCP's checksum is the only one on the bytes.
"""
import hashlib
import hmac
import json
import os
import re
import select
import socket
import stat
import struct
import subprocess
import sys
import threading
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
        self.lock = threading.Lock()

    def add(self, count):
        with self.lock:
            self.bytes += count
            now = time.monotonic()
            if now < self.next:
                return
            self.next = now + env_seconds("FLEET_PROGRESS_SECONDS", 2)
            rate = self.bytes / max(now - self.start, 1e-6) / 2**20
            share = f" of {self.size / 2**20:.0f} MiB ({100 * self.bytes / self.size:.0f}%)" if self.size else ""
            say(f"progress {self.verb} {self.bytes / 2**20:.0f} MiB{share}, {rate:.0f} MiB/s")

    def summary(self):
        millis = self.millis()
        return f"bytes={self.bytes} millis={millis} MiBps={self.bytes / max(millis, 1) * 1000 / 2**20:.1f}"

    def millis(self):
        return int((time.monotonic() - self.start) * 1000)


def controller_gone():
    """True when our standard output (the SSH session) has no reader any more."""
    poller = select.poll()
    poller.register(1, select.POLLERR | select.POLLHUP)
    return any(event & (select.POLLERR | select.POLLHUP) for _, event in poller.poll(0))


def greet_sender(conn, address, sender_ip, secret, have, note=b""):
    """The handshake of the receiving side; the connection, or None when refused (said why)."""
    if address != sender_ip:
        sys.stderr.write(f"refused a connection from {address} (only {sender_ip} may send)\n")
        conn.close()
        return None
    conn.settimeout(30)
    try:
        nonce = os.urandom(16).hex().encode()
        conn.sendall(MAGIC + b" " + nonce + b"\n")
        their_nonce, _, proof = read_line(conn).partition(b" ")
        if not hmac.compare_digest(proof, mac(secret, b"sender", nonce)) or len(their_nonce) != 32:
            raise ConnectionError("the sender does not know the secret")
        answer = b" HAVE\n" if have else (b" SEND %d\n" % len(note) + note if note else b" SEND\n")
        conn.sendall(mac(secret, b"receiver", their_nonce) + answer)
        return conn
    except (ConnectionError, OSError) as error:
        sys.stderr.write(f"refused a sender from {address}: {error}\n")
        conn.close()
        return None


def accept_greeted(server, timeout, sender_ip, secret, have, note=b""):
    """The next connection within `timeout` seconds, when it passes the handshake; else None."""
    server.settimeout(timeout)
    try:
        conn, (address, _) = server.accept()
    except socket.timeout:
        return None
    return greet_sender(conn, address, sender_ip, secret, have, note)


def accept_sender(server, sender_ip, secret, have, note, deadline):
    """The first connection from sender_ip that proves the secret; others are refused and waited past."""
    while True:
        if time.monotonic() > deadline:
            fail(4, f"no sender from {sender_ip} within {env_seconds('FLEET_WAIT_SECONDS', 120):.0f} s")
        if controller_gone():
            fail(4, "the controlling session ended before a sender came")
        conn = accept_greeted(server, 1.0, sender_ip, secret, have, note)
        if conn is not None:
            return conn


def receive(args):
    bind_ip, port, sender_ip = args[0], int(args[1]), args[2]
    have = "--have" in args[3:]
    options = args[3 : args.index("--")] if "--" in args else args[3:]
    note = b""
    if "--note" in options:
        with open(options[options.index("--note") + 1], "rb") as source:
            note = source.read(MAX_FRAME + 1)
        if len(note) > MAX_FRAME:
            fail(2, f"a note of more than {MAX_FRAME} bytes")
    command = args[args.index("--") + 1 :] if "--" in args else []
    secret = os.environ["FLEET_SECRET"].encode()
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((bind_ip, port))
    server.listen(4)
    say(f"receiving on {bind_ip}:{port} from {sender_ip}")
    conn = accept_sender(server, sender_ip, secret, have, note, time.monotonic() + env_seconds("FLEET_WAIT_SECONDS", 120))
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
    say(f"stream-received {progress.summary()}")
    return status


def connect(target_ip, port, deadline):
    while True:
        try:
            return socket.create_connection((target_ip, port), timeout=10)
        except OSError as error:
            if time.monotonic() > deadline:
                fail(4, f"cannot reach the receiver on {target_ip}:{port}: {error}")
            time.sleep(0.2)


def greet_receiver(target_ip, port):
    """Connects and does the sending side's handshake: the connection, the receiver's verdict
    (SEND or HAVE) and the note it gave with it (b"" when none)."""
    secret = os.environ["FLEET_SECRET"].encode()
    conn = connect(target_ip, port, time.monotonic() + env_seconds("FLEET_WAIT_SECONDS", 120))
    conn.settimeout(30)
    try:
        magic, _, nonce = read_line(conn).partition(b" ")
        if magic != MAGIC or len(nonce) != 32:
            raise ConnectionError("not a fleet receiver")
        mine = os.urandom(16).hex().encode()
        conn.sendall(mine + b" " + mac(secret, b"sender", nonce) + b"\n")
        proof, _, answer = read_line(conn).partition(b" ")
        if not hmac.compare_digest(proof, mac(secret, b"receiver", mine)):
            raise ConnectionError("the receiver does not know the secret")
        verdict, _, length = answer.partition(b" ")
        if length and not (length.isdigit() and int(length) <= MAX_FRAME):
            raise ConnectionError(f"a note of {length[:20]!r} bytes")
        note = read_exact(conn, int(length)) if length else b""
    except (ConnectionError, OSError) as error:
        fail(5, f"handshake with {target_ip}:{port} failed: {error}")
    return conn, verdict, note


def send(args):
    target_ip, port = args[0], int(args[1])
    options = args[2 : args.index("--")]
    size = int(options[options.index("--size") + 1]) if "--size" in options else None
    command = args[args.index("--") + 1 :]
    conn, verdict, note = greet_receiver(target_ip, port)
    if verdict == b"HAVE":
        say(f"stream-skipped ({target_ip} has it already)")
        return 0
    if "--note-out" in options:
        with open(options[options.index("--note-out") + 1], "wb") as sink:
            sink.write(note)
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


# --- files: the weight sync's bulk transfer ---------------------------------------------------

PART = ".fleet-part"
SENDFILE_SLICE = 64 << 20


def inside(root, name):
    """root/name for a relative name that stays inside root (no absolute path, '..', '.', NUL or
    empty component, no symbolic link leading out), or None."""
    if not name or name.startswith("/") or "\0" in name:
        return None
    if any(part in ("", ".", "..") for part in name.split("/")):
        return None
    path = os.path.join(root, name)
    parent = os.path.realpath(os.path.dirname(path))
    if parent != root and not parent.startswith(root + os.sep):
        return None
    return path


def part_of(path, size, mtime_ns):
    directory, base = os.path.split(path)
    return os.path.join(directory, f".{base}.{size}-{mtime_ns}{PART}")


def drop_stale_parts(path, keep):
    """Removes the partial parts of path left for another size or time of the file."""
    directory, base = os.path.split(path)
    pattern = re.compile(r"\." + re.escape(base) + r"\.\d+-\d+" + re.escape(PART) + "$")
    for other in os.listdir(directory):
        if pattern.match(other) and os.path.join(directory, other) != keep:
            os.unlink(os.path.join(directory, other))


def read_exact(conn, length):
    data = bytearray(length)
    if recv_exact(conn, memoryview(data)) != length:
        raise ConnectionError("the connection ended inside a message")
    return bytes(data)


def answer_check(conn, root, length):
    """The quick check (rsync's): of the files the sender lists with their size and time (JSON,
    `length` bytes), the indexes of those this directory lacks or has with another size or time."""
    if length > MAX_FRAME:
        raise ConnectionError(f"a file list of {length} bytes")
    need = []
    for index, (name, size, mtime_ns) in enumerate(json.loads(read_exact(conn, length))):
        path = inside(root, name)
        try:
            status = os.stat(path, follow_symlinks=False) if path else None
        except OSError:
            status = None
        if status is None or not stat.S_ISREG(status.st_mode) or status.st_size != size or status.st_mtime_ns != mtime_ns:
            need.append(index)
    reply = json.dumps(need).encode()
    return f"NEED {len(reply)}\n".encode() + reply


def remove_parts(root):
    """After a whole transfer, a partial part left in root is of a file that changed or went since."""
    removed = 0
    for directory, _, names in os.walk(root):
        for name in names:
            if name.startswith(".") and name.endswith(PART):
                os.unlink(os.path.join(directory, name))
                removed += 1
    return removed


def take_files(conn, root, progress, tally):
    """Serves one sending connection until its END; returns the number of connections announced."""
    buffer = bytearray(4 * CHUNK)
    view = memoryview(buffer)
    # The bytes go from the socket into the page cache through a pipe (splice: one copy, not two).
    pipe = os.pipe() if hasattr(os, "splice") else None
    if pipe:
        widen_pipe(pipe[1])
    while True:
        line = read_line(conn, 8192).decode()
        verb, *fields = line.split(" ")
        if verb == "END" and len(fields) == 1:
            conn.sendall(b"BYE\n")
            return int(fields[0])
        if verb == "CHECK" and len(fields) == 1:
            conn.sendall(answer_check(conn, root, int(fields[0])))
            continue
        if verb != "FILE" or len(fields) != 4:
            raise ConnectionError(f"unexpected line {line[:80]!r}")
        size, mtime_ns, mode = int(fields[0]), int(fields[1]), int(fields[2], 8)
        name = bytes.fromhex(fields[3]).decode("utf-8", "surrogateescape")
        path = inside(root, name)
        if path is None:
            conn.sendall(b"REFUSED\n")
            raise ConnectionError(f"refused the name {name!r}: not a path inside {root}")
        os.makedirs(os.path.dirname(path), exist_ok=True)
        part = part_of(path, size, mtime_ns)
        drop_stale_parts(path, part)
        fd = os.open(part, os.O_WRONLY | os.O_CREAT | os.O_NOFOLLOW, 0o600)

        def move(most):
            """Up to `most` bytes from the connection into the file; 0 when the connection ended."""
            if pipe is None:
                count = conn.recv_into(view[: min(most, len(buffer))])
                written = 0
                while written < count:
                    written += os.write(fd, view[written:count])
                return count
            while True:
                try:
                    count = os.splice(conn.fileno(), pipe[1], min(most, CHUNK))
                    break
                except BlockingIOError:
                    if not select.select([conn], [], [], conn.gettimeout())[0]:
                        raise socket.timeout(f"nothing came for {conn.gettimeout():.0f} s")
            written = 0
            while written < count:
                written += os.splice(pipe[0], fd, count - written)
            return count

        try:
            offset = os.fstat(fd).st_size
            if offset > size:
                os.ftruncate(fd, 0)
                offset = 0
            os.lseek(fd, offset, os.SEEK_SET)
            conn.sendall(f"FROM {offset}\n".encode())
            left = size - offset
            while left:
                count = move(left)
                if count == 0:
                    raise ConnectionError(f"the connection ended inside {name} at {size - left} of {size} bytes (the part is kept for the next run)")
                left -= count
                progress.add(count)
            os.fchmod(fd, mode & 0o7777)
        finally:
            os.close(fd)
        os.utime(part, ns=(mtime_ns, mtime_ns))
        os.replace(part, path)
        conn.sendall(b"OK\n")
        with progress.lock:
            tally["files"] += 1


def receive_files(args):
    bind_ip, port, sender_ip, root = args[0], int(args[1]), args[2], os.path.realpath(args[3])
    secret = os.environ["FLEET_SECRET"].encode()
    wait = env_seconds("FLEET_WAIT_SECONDS", 120)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((bind_ip, port))
    server.listen(16)
    say(f"receiving files into {root} on {bind_ip}:{port} from {sender_ip}")
    progress = Progress("received")
    tally = {"files": 0, "announced": None, "ended": 0, "active": 0, "broken": None, "idle_since": time.monotonic()}

    def serve(conn):
        try:
            conn.settimeout(env_seconds("FLEET_IDLE_SECONDS", 120))
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
            announced = take_files(conn, root, progress, tally)
            with progress.lock:
                tally["announced"] = announced
                tally["ended"] += 1
        except (ConnectionError, OSError, ValueError) as error:
            sys.stderr.write(f"a sending connection broke: {error}\n")
            with progress.lock:
                tally["broken"] = str(error)
        finally:
            conn.close()
            with progress.lock:
                tally["active"] -= 1
                tally["idle_since"] = time.monotonic()

    while True:
        with progress.lock:
            if tally["announced"] is not None and tally["ended"] >= tally["announced"]:
                break
            if tally["active"] == 0 and time.monotonic() - tally["idle_since"] > wait:
                if tally["broken"]:
                    fail(3, f"files broken: {tally['broken']}; no sender came back within {wait:.0f} s")
                fail(4, f"no sender from {sender_ip} within {wait:.0f} s")
        conn = accept_greeted(server, 0.1, sender_ip, secret, False)
        if conn is None:
            continue
        with progress.lock:
            if tally["active"] == 0 and tally["ended"] == 0 and tally["broken"] is None:
                progress.start = time.monotonic()  # timed from the first sender, not from listening
            tally["active"] += 1
        threading.Thread(target=serve, args=(conn,), daemon=True).start()
    server.close()
    stale = remove_parts(root)
    say(f"files-received files={tally['files']} {progress.summary()}" + (f" stale-parts-removed={stale}" if stale else ""))
    return 0


def send_files(args):
    target_ip, port, root = args[0], int(args[1]), args[2]
    streams = int(args[args.index("--streams") + 1]) if "--streams" in args[3:] else 4
    listed = []
    for raw in sys.stdin.buffer.read().split(b"\n"):
        if not raw.strip():
            continue
        name = raw.decode("utf-8", "surrogateescape")
        try:
            status = os.stat(os.path.join(root, name))  # a link: the file it points to
        except OSError as error:
            status = error
        if isinstance(status, OSError) or not stat.S_ISREG(status.st_mode):
            say(f"left for later: {name} ({status if isinstance(status, OSError) else 'not a regular file'})")
            continue
        listed.append((name, status))
    # The quick check on the first connection, which then carries files too.
    first, _, _ = greet_receiver(target_ip, port)
    idle = env_seconds("FLEET_IDLE_SECONDS", 120)
    try:
        first.settimeout(idle)
        names = json.dumps([[name.encode("utf-8", "surrogateescape").decode("utf-8", "replace"), status.st_size, status.st_mtime_ns] for name, status in listed]).encode()
        first.sendall(f"CHECK {len(names)}\n".encode() + names)
        verb, _, length = read_line(first).decode().partition(" ")
        if verb != "NEED":
            raise ConnectionError("the receiver did not answer the file list")
        files = [listed[index] for index in json.loads(read_exact(first, int(length)))]
    except (ConnectionError, OSError, ValueError) as error:
        first.close()
        fail(3, f"the quick check with {target_ip}:{port} failed: {error}")
    say(f"{len(files)} of {len(listed)} files differ on {target_ip}")
    files.sort(key=lambda entry: -entry[1].st_size)
    count = max(1, min(streams, len(files)))
    sets = [[] for _ in range(count)]
    loads = [0] * count
    for entry in files:
        best = loads.index(min(loads))
        sets[best].append(entry)
        loads[best] += entry[1].st_size
    progress = Progress("sent", sum(loads) or None)
    errors = [None] * count

    def stream(index):
        if index == 0:
            conn = first
        else:
            try:
                conn, _, _ = greet_receiver(target_ip, port)
            except SystemExit:
                errors[index] = "no handshake"
                return
        try:
            conn.settimeout(idle)
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
            for name, status in sets[index]:
                size = status.st_size
                encoded = name.encode("utf-8", "surrogateescape").hex()
                conn.sendall(f"FILE {size} {status.st_mtime_ns} {stat.S_IMODE(status.st_mode):o} {encoded}\n".encode())
                verb, _, value = read_line(conn).decode().partition(" ")
                if verb != "FROM":
                    raise ConnectionError(f"the receiver refused {name}")
                offset = int(value)
                with open(os.path.join(root, name), "rb") as source:
                    while offset < size:
                        sent = conn.sendfile(source, offset, min(SENDFILE_SLICE, size - offset))
                        if sent == 0:
                            raise ConnectionError(f"{name} shrank while it was sent")
                        offset += sent
                        progress.add(sent)
                if read_line(conn) != b"OK":
                    raise ConnectionError(f"the receiver did not take {name}")
            conn.sendall(f"END {count}\n".encode())
            if read_line(conn) != b"BYE":
                raise ConnectionError("the receiver did not end the connection")
        except (ConnectionError, OSError, ValueError) as error:
            errors[index] = str(error)
        finally:
            conn.close()

    threads = [threading.Thread(target=stream, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    failed = [error for error in errors if error]
    if failed:
        fail(3, f"files to {target_ip}:{port} broken after {progress.bytes} bytes: {'; '.join(failed)} (the parts received are continued by the next run)")
    say(f"files-sent files={len(files)} same={len(listed) - len(files)} streams={count} {progress.summary()}")
    return 0


MODES = {"receive": receive, "send": send, "receive-files": receive_files, "send-files": send_files}
USAGE = (
    "usage: fabric-stream.py receive BIND_IP PORT SENDER_IP [--have] [--note FILE] -- COMMAND..."
    " | send TARGET_IP PORT [--size BYTES] [--note-out FILE] -- COMMAND..."
    " | receive-files BIND_IP PORT SENDER_IP DIR | send-files TARGET_IP PORT DIR [--streams K] < NAMES"
)


def main(argv):
    if len(argv) < 3 or argv[0] not in MODES:
        fail(2, USAGE)
    return MODES[argv[0]](argv[1:])

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
