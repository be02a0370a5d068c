#!/usr/bin/env bash
# Smoke test of the real-vLLM image (test/sim/real/README.md) on this machine's Docker engine:
# two containers on two --internal networks (management + fabric, like the simulated Sparks),
# rank 0 and a headless rank 1 of one model with tensor parallel 2 over vLLM's mp executor, every
# rank-to-rank address pinned to the fabric (VLLM_HOST_IP, GLOO_SOCKET_IFNAME, --master-addr).
# Waits for a completion, prints timings, then shows over 20 completions that the fabric
# interfaces carry the ranks' traffic and the management ones do not.
#
#   smoke.sh [--model tiny-llama|tiny-qwen3-moe] [--single] [--cache VOLUME] [--keep]
#   smoke.sh down
#
#   --single        one container, no tensor parallel (rank 0 alone)
#   --cache VOLUME  mount this Docker volume as vLLM's cache (VLLM_CACHE_ROOT: compiled graphs);
#                   created if missing and left in place (remove it with docker volume rm)
#   --keep          leave the containers running (for fault experiments); `smoke.sh down` removes
#                   them. Without it they and the networks are removed at exit, also on failure.
#
# Environment: VFREAL_IMAGE (default: test/sim/sim.sh real-image builds or reuses it),
# VFREAL_TIMEOUT (seconds to the first completion, default 600).
set -euo pipefail

readonly PREFIX="vfreal"
readonly MGMT_NET="$PREFIX-mgmt" FABRIC_NET="$PREFIX-fabric"
readonly MGMT_SUBNET="10.231.1" FABRIC_SUBNET="10.231.2"
readonly PORT=8000 MASTER_PORT=29500
readonly TIMEOUT="${VFREAL_TIMEOUT:-600}"
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly HERE

log() { printf 'smoke: %s\n' "$*" >&2; }
die() {
  printf 'smoke: error: %s\n' "$*" >&2
  exit 1
}
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

down() {
  local c n
  for c in "$PREFIX-rank0" "$PREFIX-rank1"; do
    docker rm -f "$c" >/dev/null 2>&1 || true
  done
  for n in "$MGMT_NET" "$FABRIC_NET"; do
    docker network rm "$n" >/dev/null 2>&1 || true
  done
}

# Rank container: created on the management network, connected to the fabric, then started, so
# both addresses are fixed before vLLM starts. The entrypoint finds the interface that holds the
# fabric address (its name depends on attach order) for gloo, then execs vllm serve: vLLM is the
# container's main process, as in the product's containers.
start_rank() { # index args...
  local index="$1" name="$PREFIX-rank$1" fabric_ip="$FABRIC_SUBNET.$((10 + $1))"
  shift
  local -a cache=()
  [[ -z "$CACHE" ]] || cache=(-v "$CACHE:/root/.cache/vllm" -e VLLM_CACHE_ROOT=/root/.cache/vllm)
  docker create --name "$name" --hostname "$name" --network "$MGMT_NET" \
    --ip "$MGMT_SUBNET.$((10 + index))" --shm-size 1g "${cache[@]}" \
    -e VLLM_HOST_IP="$fabric_ip" -e VLLM_LOGGING_LEVEL=INFO \
    --entrypoint sh "$IMAGE" -c '
      GLOO_SOCKET_IFNAME="$(ip -o -4 addr show | awk -v ip="$VLLM_HOST_IP" "index(\$4, ip \"/\") == 1 { print \$2 }")"
      [ -n "$GLOO_SOCKET_IFNAME" ] || { echo "no interface holds $VLLM_HOST_IP" >&2; exit 1; }
      export GLOO_SOCKET_IFNAME
      echo "rank: GLOO_SOCKET_IFNAME=$GLOO_SOCKET_IFNAME VLLM_HOST_IP=$VLLM_HOST_IP" >&2
      exec vllm serve "$@"' sh "$@" >/dev/null
  docker network connect --ip "$fabric_ip" "$FABRIC_NET" "$name"
  docker start "$name" >/dev/null
}

complete_once() { # -> 0 when rank 0 answers a completion
  docker exec "$PREFIX-rank0" curl -sf -m 30 "localhost:$PORT/v1/completions" \
    -H 'content-type: application/json' \
    -d "{\"model\":\"$MODEL\",\"prompt\":\"Two DGX Spark boxes\",\"max_tokens\":8}" 2>/dev/null
}

iface_of() { # container ip
  docker exec "$1" ip -o -4 addr show | awk -v ip="$2" 'index($4, ip "/") == 1 { print $2 }'
}

# "container net rx tx" for both interfaces of every rank.
counters() {
  local c i ip net iface
  for ((i = 0; i < RANKS; i++)); do
    c="$PREFIX-rank$i"
    for net in mgmt fabric; do
      if [[ "$net" == mgmt ]]; then ip="$MGMT_SUBNET.$((10 + i))"; else ip="$FABRIC_SUBNET.$((10 + i))"; fi
      iface="$(iface_of "$c" "$ip")"
      printf '%s %s %s %s %s\n' "$c" "$net" "$iface" \
        "$(docker exec "$c" cat "/sys/class/net/$iface/statistics/rx_bytes")" \
        "$(docker exec "$c" cat "/sys/class/net/$iface/statistics/tx_bytes")"
    done
  done
}

MODEL="tiny-llama"
RANKS=2
CACHE=""
KEEP=0
while (($#)); do
  case "$1" in
    down) down; exit 0 ;;
    --model) MODEL="$2"; shift 2 ;;
    --single) RANKS=1; shift ;;
    --cache) CACHE="$2"; shift 2 ;;
    --keep) KEEP=1; shift ;;
    -h | --help) sed -n '2,/^set -euo/{/^set -euo/d;s/^# \{0,1\}//;p}' "${BASH_SOURCE[0]}"; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
done
[[ "$MODEL" =~ ^tiny-(llama|qwen3-moe)$ ]] || die "unknown model '$MODEL'"
IMAGE="${VFREAL_IMAGE:-$("$HERE/../sim.sh" real-image | tail -n 1)}"
[[ -n "$IMAGE" ]] || die "no real-vLLM image"

down
if ((!KEEP)); then trap down EXIT; fi
trap 'exit 130' INT TERM
docker network create --internal --subnet "$MGMT_SUBNET.0/24" "$MGMT_NET" >/dev/null ||
  die "cannot create $MGMT_NET ($MGMT_SUBNET.0/24 in use?)"
docker network create --internal --subnet "$FABRIC_SUBNET.0/24" "$FABRIC_NET" >/dev/null ||
  die "cannot create $FABRIC_NET ($FABRIC_SUBNET.0/24 in use?)"
[[ -z "$CACHE" ]] || docker volume create "$CACHE" >/dev/null

serve=("/models/$MODEL" --served-model-name "$MODEL" --max-model-len 256 --dtype bfloat16
  --gpu-memory-utilization 0.1 --host 0.0.0.0 --port "$PORT")
tp=()
if ((RANKS == 2)); then
  tp=(--tensor-parallel-size 2 --nnodes 2 --master-addr "$FABRIC_SUBNET.10" --master-port "$MASTER_PORT")
fi
log "image $IMAGE, model $MODEL, ranks $RANKS${CACHE:+, cache volume $CACHE}"
t0="$(now)"
start_rank 0 "${serve[@]}" "${tp[@]}" ${tp:+--node-rank 0}
((RANKS == 1)) || start_rank 1 "${serve[@]}" "${tp[@]}" --node-rank 1 --headless

health=""
first=""
while :; do
  for ((i = 0; i < RANKS; i++)); do
    [[ "$(docker inspect -f '{{.State.Running}}' "$PREFIX-rank$i")" == true ]] || {
      docker logs --tail 40 "$PREFIX-rank$i" >&2
      die "$PREFIX-rank$i exited (log above)"
    }
  done
  if [[ -z "$health" ]] && docker exec "$PREFIX-rank0" curl -sf -m 5 "localhost:$PORT/health" >/dev/null 2>&1; then
    health="$(since "$t0")"
  fi
  if out="$(complete_once)" && [[ "$out" == *text_completion* ]]; then
    health="${health:-$(since "$t0")}"
    first="$(since "$t0")"
    break
  fi
  (($(awk -v s="$(since "$t0")" -v t="$TIMEOUT" 'BEGIN { print (s > t) }') == 0)) ||
    die "no completion after ${TIMEOUT}s"
  sleep 2
done
log "first /health 200 after ${health:-?} s, first completion after $first s"
log "completion: $out"

if ((RANKS == 2)); then
  before="$(counters)"
  t1="$(now)"
  for ((i = 0; i < 20; i++)); do
    complete_once >/dev/null || die "completion $((i + 1)) of 20 failed"
  done
  log "20 completions in $(since "$t1") s"
  after="$(counters)"
  printf '%-14s %-7s %-6s %14s %14s\n' container network iface rx-delta tx-delta
  fabric_grew=1 mgmt_quiet=1
  while read -r c net iface rx0 tx0 && read -r _ _ _ rx1 tx1 <&3; do
    printf '%-14s %-7s %-6s %14d %14d\n' "$c" "$net" "$iface" $((rx1 - rx0)) $((tx1 - tx0))
    if [[ "$net" == fabric ]] && ((rx1 - rx0 < 10000 || tx1 - tx0 < 10000)); then fabric_grew=0; fi
    # A few hundred bytes are IPv6/ARP chatter of the bridge, not vLLM.
    if [[ "$net" == mgmt ]] && ((rx1 - rx0 > 4096 || tx1 - tx0 > 4096)); then mgmt_quiet=0; fi
  done < <(printf '%s\n' "$before") 3< <(printf '%s\n' "$after")
  ((fabric_grew)) || die "the fabric interfaces did not carry the ranks' traffic"
  ((mgmt_quiet)) || die "the management interfaces carried more than chatter"
  log "fabric bytes grew on both ranks; management bytes did not"
fi
((KEEP)) && log "left running (--keep): $PREFIX-rank0${tp:+ $PREFIX-rank1}; remove with: $0 down"
log "PASS"
