# STAND-IN: vllm/logger.py (+ decorate_logs of vllm/utils/system_utils.py) of vLLM 0.17.1, for
# the vllm-fleet proving ground.
#
# Real vLLM logs with Python logging to stdout, format
#   "%(levelname)s %(asctime)s [%(fileinfo)s:%(lineno)d] %(message)s" (date "%m-%d %H:%M:%S"),
# each line of a multi-line message carrying the header again (NewLineFormatter), and its API
# server process prefixes every line it writes with "(APIServer pid=N) " (decorate_logs).
# Simpler here: the call site's line number is given by the caller (`line=`), as the line of the
# matching call in real vLLM 0.17.1 where one exists; no colors; the engine core runs inside the
# API server process (real: its own process, prefixed "(EngineCore_DP0 pid=N) ").
import os
import sys
import time

_LEVELS = {"DEBUG": 10, "INFO": 20, "WARNING": 30, "ERROR": 40, "CRITICAL": 50}


class _PrefixedStream:
    """A text stream that starts every line with a prefix (vllm.utils.system_utils._add_prefix)."""

    def __init__(self, stream, prefix: str):
        self._stream = stream
        self._prefix = prefix
        self._start_of_line = True

    def write(self, s: str) -> int:
        if not s:
            return 0
        out = []
        for piece in s.splitlines(keepends=True):
            if self._start_of_line:
                out.append(self._prefix)
            out.append(piece)
            self._start_of_line = piece.endswith("\n")
        self._stream.write("".join(out))
        return len(s)

    def __getattr__(self, name):
        return getattr(self._stream, name)


def decorate_logs(process_name: str) -> None:
    """Prefix stdout/stderr with "(<process_name> pid=<pid>) ", unless VLLM_CONFIGURE_LOGGING=0."""
    if os.getenv("VLLM_CONFIGURE_LOGGING", "1") == "0":
        return
    for name in ("stdout", "stderr"):
        stream = getattr(sys, name)
        if isinstance(stream, _PrefixedStream):
            stream = stream._stream  # noqa: SLF001 - re-decorating replaces the prefix
        setattr(sys, name, _PrefixedStream(stream, f"({process_name} pid={os.getpid()}) "))


class Logger:
    """The part of logging.Logger the stand-in uses; `line` is the real call site's line."""

    def __init__(self, name: str):
        self.name = name
        self.file = name.rsplit(".", 1)[-1] + ".py"
        self._once = set()

    def _emit(self, level: str, msg: str, args, line: int) -> None:
        threshold = _LEVELS.get(os.getenv("VLLM_LOGGING_LEVEL", "INFO").upper(), 20)
        if _LEVELS[level] < threshold:
            return
        text = (msg % args) if args else msg
        header = f"{os.getenv('VLLM_LOGGING_PREFIX', '')}{level} {time.strftime('%m-%d %H:%M:%S')} [{self.file}:{line}] "
        sys.stdout.write("".join(header + part + "\n" for part in text.split("\n")))
        sys.stdout.flush()

    def debug(self, msg: str, *args, line: int = 0) -> None:
        self._emit("DEBUG", msg, args, line)

    def info(self, msg: str, *args, line: int = 0) -> None:
        self._emit("INFO", msg, args, line)

    def warning(self, msg: str, *args, line: int = 0) -> None:
        self._emit("WARNING", msg, args, line)

    def warning_once(self, msg: str, *args, line: int = 0) -> None:
        if (msg, args) not in self._once:
            self._once.add((msg, args))
            self._emit("WARNING", msg, args, line)

    def error(self, msg: str, *args, line: int = 0) -> None:
        self._emit("ERROR", msg, args, line)


def init_logger(name: str) -> Logger:
    return Logger(name)
