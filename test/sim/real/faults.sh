#!/usr/bin/env bash
# One fault in a running tensor-parallel-2 pair of the real-vLLM smoke (`smoke.sh --keep`), then
# once a second: what rank 0's /health and a completion return, and which vLLM processes of each
# rank are left, until both containers have exited or LIMIT seconds have passed.
# (test/sim/real/README.md has the figures.)
#
#   faults.sh worker-kill|rank1-stop|api-kill|rank0-stop [LIMIT]
#
#   worker-kill  SIGKILL the headless rank's worker process (VLLM::Worker_TP1, found with ps)
#   rank1-stop   docker stop the headless rank's container
#   api-kill     SIGKILL rank 0's API server (the container's main process, vllm serve; killed
#                from the host: a container's init ignores SIGKILL sent from inside it)
#   rank0-stop   docker stop rank 0's container
#
# Environment: HEALTH_ONLY=S: for the first S seconds after the fault only /health is asked (an
# idle server: what a supervisor polling /health alone sees), completions after that.
set -euo pipefail

readonly R0="vfreal-rank0" R1="vfreal-rank1" PORT=8000
fault="${1:?fault: worker-kill|rank1-stop|api-kill|rank0-stop}"
limit="${2:-120}"
health_only="${HEALTH_ONLY:-0}"

running() { [[ "$(docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" == true ]]; }
procs() { # container -> "pid:title,..." of vLLM's processes
  running "$1" || { printf 'exited(%s)' "$(docker inspect -f '{{.State.ExitCode}}' "$1")"; return; }
  docker exec "$1" ps -eo pid=,args= 2>/dev/null |
    awk '/VLLM::|vllm serve/ { t = ($2 ~ /^VLLM::/) ? $2 : "serve"; printf "%s%s:%s", s, $1, t; s = "," }'
}
probe() { # [health-only] -> what rank 0 answers: /health code and a completion's code (or curl's failure)
  if ! running "$R0"; then printf 'health=- completion=-'; return; fi
  local h c
  h="$(docker exec "$R0" curl -s -o /dev/null -m 3 -w '%{http_code}' "localhost:$PORT/health" 2>/dev/null)" || h="${h:-fail}"
  if [[ -n "${1:-}" ]]; then printf 'health=%s' "$h"; return; fi
  c="$(docker exec "$R0" curl -s -o /tmp/completion -m 8 -w '%{http_code}' "localhost:$PORT/v1/completions" \
    -H 'content-type: application/json' -d '{"model":"tiny-llama","prompt":"Hello","max_tokens":4}' 2>/dev/null)" || c="${c:-fail}"
  printf 'health=%s completion=%s' "$h" "$c"
  if [[ "$c" != 200 && "$c" != fail && "$c" != 000 ]]; then
    printf ' (%s)' "$(docker exec "$R0" head -c 200 /tmp/completion 2>/dev/null | tr -d '\n')"
  fi
}

running "$R0" && running "$R1" || { echo "the pair is not running (smoke.sh --keep first)" >&2; exit 1; }
printf 't=before %s | rank0 %s | rank1 %s\n' "$(probe)" "$(procs "$R0")" "$(procs "$R1")"
t0="$(date +%s.%N)"
case "$fault" in
  worker-kill)
    pid="$(docker exec "$R1" ps -eo pid=,args= | awk '$2 == "VLLM::Worker_TP1" { print $1 }')"
    [[ -n "$pid" ]] || { echo "no VLLM::Worker_TP1 in $R1" >&2; exit 1; }
    docker exec "$R1" kill -KILL "$pid"
    ;;
  rank1-stop) docker stop "$R1" >/dev/null & ;;
  api-kill) kill -KILL "$(docker inspect -f '{{.State.Pid}}' "$R0")" ;;
  rank0-stop) docker stop "$R0" >/dev/null & ;;
  *) echo "unknown fault '$fault'" >&2; exit 1 ;;
esac
while :; do
  t="$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')"
  only=""
  (($(awk -v t="$t" -v h="$health_only" 'BEGIN { print (t < h) }') == 0)) || only=1
  printf 't=%s %s | rank0 %s | rank1 %s\n' "$t" "$(probe $only)" "$(procs "$R0")" "$(procs "$R1")"
  if ! running "$R0" && ! running "$R1"; then break; fi
  (($(awk -v t="$t" -v l="$limit" 'BEGIN { print (t >= l) }') == 0)) || break
  sleep 1
done
wait
for c in "$R0" "$R1"; do
  printf '%s: running=%s exit=%s finished=%s\n' "$c" "$(docker inspect -f '{{.State.Running}}' "$c")" \
    "$(docker inspect -f '{{.State.ExitCode}}' "$c")" "$(docker inspect -f '{{.State.FinishedAt}}' "$c")"
done
