#!/bin/sh
# The lifecycle of vLLM's server inside the Ray head container (`ray` executor): its stop, its start
# and its restart, for every program that stops or starts it. vllm-stop.sh (vllm-serve's delete),
# vllm-start.sh (vllm-serve's create and update) and the watchdog (watchdog.py, through the Docker
# Engine API) each run this text in one exec of the container:
#
#   sh -c "$LIFECYCLE" vllm-lifecycle stop [STOP_TIMEOUT]
#   sh -c "$LIFECYCLE" vllm-lifecycle start LOG_FILE ARGS_JSON ARGS_FILE TOKEN CONFIG_ROOT NON_CARRY_OVER [STOP_TIMEOUT]
#   sh -c "$LIFECYCLE" vllm-lifecycle restart LOG_FILE ARGS_FILE [STOP_TIMEOUT]
#
# stop     SIGTERM, a look every 0.1 s until the server is gone, SIGKILL after STOP_TIMEOUT seconds
#          (default 30; fractions allowed). Prints one line: "the server stopped", "the server was
#          not running" or "the server was killed (30 s after SIGTERM)". Fails only when the server
#          outlives SIGKILL.
# start    The stack's start (vllm-start.sh): the server that runs is stopped (the stop's line is
#          printed); then, beside the server, the variables each node sets for itself, which vLLM's
#          Ray executor must not copy from this driver to the workers on other nodes (NON_CARRY_OVER,
#          a JSON list of names, into CONFIG_ROOT/ray_non_carry_over_env_vars.json, which
#          vllm/ray/ray_env.py reads when the server starts), the arguments of `vllm` (ARGS_JSON, a
#          JSON list, into ARGS_FILE) and the start's TOKEN (into /tmp/vllm-fleet-serve.token, where
#          the next read of the node finds it: live.sh); then the server, started from ARGS_FILE.
# restart  The watchdog's: ARGS_FILE, the arguments the stack's last start left, is read and checked
#          FIRST, so that a server that could not be started again is left running; then the stop
#          and the start from that file. The token stays: it names the stack's start, not this one.
#
# The server starts in a session of its own (os.setsid), so it outlives the exec, with its output in
# LOG_FILE; this returns once its process is there (so the readiness gate never looks too early),
# else it fails with the log's tail. A failure says why on the first line of stderr (the log's tail
# follows it); exit 2: the operation or its arguments are wrong.
#
# What holds, and why:
# - This text is the command line of the shell that runs it (`sh -c TEXT`), which every pgrep and
#   pkill of the container reads. The stop finds the server with the pattern "vllm [s]erve" (that
#   regular expression matches the server's own command line, `vllm` followed by its subcommand,
#   but not itself), so no word of this text, comments included, may be the server's name followed
#   by its subcommand: the stop would stop the shell that runs it, and the watchdog would take this
#   shell for the server. The text speaks of "the server".
# - The arguments reach `vllm` only as a JSON list, read from ARGS_FILE by Python and handed to
#   execvp: never spliced into a shell line, so no value can become shell syntax.
# - The API key reaches the server only through the environment of the exec (VLLM_API_KEY), never
#   a command line, which every user of the node can read.
# - POSIX sh, not bash: the image may lack bash. Hence no pipefail below.
# - One run at a time (flock, where the image has it): the watchdog's restart and the stack's start
#   run in the container, not in their callers, so pausing the watchdog does not stop a restart it
#   began; the second run waits for the first, then stops what it started.
set -eu

PATTERN="vllm [s]erve"
TOKEN_FILE=/tmp/vllm-fleet-serve.token
LOCK_FILE=/tmp/vllm-fleet-serve.lock

# Starts the server: a new session, the log as its output, then execvp of `vllm` with the list in
# the arguments file (argv[1]). The log is opened first, so a file that is no list says so there.
LAUNCHER='
import json, os, sys
os.setsid()
log = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.dup2(log, 1)
os.dup2(log, 2)
try:
    args = json.load(open(sys.argv[1]))
except ValueError:
    args = None
if not isinstance(args, list) or not args or not all(isinstance(arg, str) for arg in args):
    sys.exit(sys.argv[1] + " is not a JSON list of strings")
os.execvp("vllm", ["vllm"] + args)
'

# Exit 0: the arguments file holds a list of strings; 2: it cannot be read; 3: it holds something else.
CHECK='
import json, sys
try:
    args = json.load(open(sys.argv[1]))
except OSError:
    sys.exit(2)
except ValueError:
    sys.exit(3)
sys.exit(0 if isinstance(args, list) and args and all(isinstance(arg, str) for arg in args) else 3)
'

usage() {
  echo "vllm-lifecycle: $1 (operations: stop [STOP_TIMEOUT]; start LOG_FILE ARGS_JSON ARGS_FILE TOKEN CONFIG_ROOT NON_CARRY_OVER [STOP_TIMEOUT]; restart LOG_FILE ARGS_FILE [STOP_TIMEOUT])" >&2
  exit 2
}

# The stop timeout, checked before anything is done: a number of seconds, fractions allowed (the
# watchdog's WATCHDOG_STOP_TIMEOUT may be one).
check_timeout() {
  case "$1" in
    '' | . | *[!0-9.]* | *.*.*) usage "the stop timeout must be a number of seconds, not '$1'" ;;
  esac
}

stop_server() {
  timeout="$1"
  # In looks of 0.1 s, rounded up (sh has no fractions).
  looks="$(awk -v seconds="$timeout" 'BEGIN { n = seconds * 10; whole = int(n); if (n > whole) whole++; print whole }')"
  pkill -f "$PATTERN" || {
    echo "the server was not running"
    return 0
  }
  i=0
  while [ "$i" -lt "$looks" ]; do
    pgrep -f "$PATTERN" >/dev/null || {
      echo "the server stopped"
      return 0
    }
    sleep 0.1
    i=$((i + 1))
  done
  pkill -9 -f "$PATTERN" || true
  i=0
  while [ "$i" -lt 50 ]; do
    pgrep -f "$PATTERN" >/dev/null || {
      echo "the server was killed ($timeout s after SIGTERM)"
      return 0
    }
    sleep 0.1
    i=$((i + 1))
  done
  echo "the server still runs after SIGKILL" >&2
  return 1
}

check_args() {
  status=0
  python3 -c "$CHECK" "$1" || status=$?
  case "$status" in
    0) ;;
    2)
      echo "$1 (the serve arguments vllm-start.sh writes) is missing" >&2
      return 1
      ;;
    *)
      echo "$1 (the serve arguments vllm-start.sh writes) is not a JSON list of strings" >&2
      return 1
      ;;
  esac
}

# LOG_FILE ARGS_FILE. The launcher gets neither this shell's output (the exec would wait for the
# server to close it) nor the lock (the server would hold it for as long as it runs).
launch() {
  python3 -c "$LAUNCHER" "$2" "$1" </dev/null >/dev/null 2>&1 9>&- &
  launcher=$!
  i=0
  while [ "$i" -lt 500 ]; do
    if pgrep -f "$PATTERN" >/dev/null; then
      return 0
    fi
    kill -0 "$launcher" 2>/dev/null || break
    sleep 0.01
    i=$((i + 1))
  done
  echo "the server did not start; its log ends with:" >&2
  if [ -f "$1" ]; then tail -n 20 "$1" >&2; else echo "(no log at $1)" >&2; fi
  return 1
}

one_at_a_time() {
  if command -v flock >/dev/null 2>&1; then
    exec 9>>"$LOCK_FILE"
    flock 9
  fi
}

[ $# -ge 1 ] || usage "no operation"
operation="$1"
shift
case "$operation" in
  stop)
    [ $# -le 1 ] || usage "stop takes at most a stop timeout"
    check_timeout "${1:-30}"
    one_at_a_time
    stop_server "${1:-30}"
    ;;
  start)
    case $# in 6 | 7) ;; *) usage "start takes six arguments and a stop timeout" ;; esac
    log_file="$1" args_json="$2" args_file="$3" token="$4" config_root="$5" non_carry_over="$6"
    check_timeout "${7:-30}"
    one_at_a_time
    stop_server "${7:-30}"
    mkdir -p "$config_root"
    printf '%s\n' "$non_carry_over" >"$config_root/ray_non_carry_over_env_vars.json"
    printf '%s\n' "$args_json" >"$args_file"
    printf '%s\n' "$token" >"$TOKEN_FILE"
    launch "$log_file" "$args_file"
    ;;
  restart)
    case $# in 2 | 3) ;; *) usage "restart takes a log file, an arguments file and a stop timeout" ;; esac
    check_timeout "${3:-30}"
    one_at_a_time
    check_args "$2"
    stop_server "${3:-30}"
    launch "$1" "$2"
    ;;
  *) usage "unknown operation '$operation'" ;;
esac
