#!/usr/bin/env bash
# Self-test of the proving ground, driven by hand (docker exec + real SSH, no Pulumi):
# brings up simulated Sparks, runs real Ray and the vLLM stand-in on them the way a launcher
# would, proves the fabric-pinned path works, reproduces the seeds' bug (Ray head on the
# management address), the GPU-shortage failure of TP=2 on one node, and vLLM's native mp
# multi-node. Always tears down. Ends with the line "N passed, M failed".
set -euo pipefail

SELF_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
readonly SELF_DIR
readonly SIM="$SELF_DIR/sim.sh"
readonly CLUSTER="${SIM_SELFTEST_CLUSTER:-simtest}"
readonly STATE="${SIM_STATE_DIR:-$SELF_DIR/.state}/$CLUSTER"
readonly FIXTURES="$SELF_DIR/../fixtures"
readonly START_TIMEOUT=120  # seconds for a server/cluster to become ready
# Bounded waits of the vLLM stand-in (real vLLM waits 1800 s for a placement group).
readonly PG_TIMEOUT=20

passed=0
failed=0
finished=0
started_at=$SECONDS

pass() {
  passed=$((passed + 1))
  echo "PASS: $1"
}
fail() {
  failed=$((failed + 1))
  echo "FAIL: $1"
  if [[ -n "${2:-}" ]]; then printf '%s\n' "$2" | tail -n 25 | sed 's/^/    | /'; fi
}
note() { echo "----- $*"; }

finish() {
  local rc=$?
  set +e
  if ((finished == 0)); then
    fail "selftest aborted (exit $rc) before all checks ran"
  fi
  note "teardown"
  local out
  if out="$("$SIM" down -c "$CLUSTER" 2>&1)" && [[ ! -d "$STATE" ]]; then
    printf '%s\n' "$out" | sed 's/^/    /'
    pass "sim down leaves no container, network, volume or state of $CLUSTER"
  else
    fail "sim down leaves no container, network, volume or state of $CLUSTER" "$out"
  fi
  echo "selftest took $((SECONDS - started_at)) s"
  echo "$passed passed, $failed failed"
  if ((failed > 0)); then exit 1; fi
  exit 0
}
trap finish EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------------------------------------
# helpers

node() { printf '%s-spark%s' "$CLUSTER" "$1"; }
on() { # index cmd... : run in simulated Spark <index> (as root, like a session on the host)
  local i="$1"
  shift
  docker exec "$(node "$i")" "$@"
}
json_get() { # file jq-less path: python3 one-liner over cluster.json
  python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval(sys.argv[2], {"d": d}))' "$@"
}
ssh_on() { # index cmd... : real SSH as spark with the pinned host key
  local i="$1"
  shift
  ssh -i "$STATE/id_ed25519" -o BatchMode=yes -o ConnectTimeout=5 -o StrictHostKeyChecking=yes \
    -o UserKnownHostsFile="$STATE/known_hosts" "spark@$(mgmt_ip "$i")" "$@"
}
mgmt_ip() { json_get "$STATE/cluster.json" "d['nodes'][$1]['mgmtIp']"; }
fabric_ip() { json_get "$STATE/cluster.json" "d['nodes'][$1]['fabricIp']"; }

# docker run in node <index> with what a launcher gives a Ray/vLLM container.
run_workload() { # index name [docker-run args...] -- [container args...]
  local i="$1" name="$2"
  shift 2
  local -a run_args=()
  while (($# > 0)) && [[ "$1" != "--" ]]; do run_args+=("$1"); shift; done
  shift || true
  on "$i" docker run -d --name "$name" --network host --ipc host --gpus all --shm-size 1g \
    -v /home/spark/models:/models:ro \
    -e RAY_memory_monitor_refresh_ms=0 -e RAY_enable_metrics_collection=0 \
    "${run_args[@]}" "$WORKLOAD" "$@" >/dev/null
}

pinned_env() { # index -> -e flags pinning everything to the node's fabric
  local ip iface=enp1s0f1np1
  ip="$(fabric_ip "$1")"
  printf '%s\n' -e "VLLM_HOST_IP=$ip" -e "RAY_OVERRIDE_NODE_IP_ADDRESS=$ip" \
    -e "NCCL_SOCKET_IFNAME=$iface" -e "GLOO_SOCKET_IFNAME=$iface" -e "TP_SOCKET_IFNAME=$iface" \
    -e "UCX_NET_DEVICES=$iface" -e "NCCL_IB_HCA=rocep1s0f1" -e NCCL_DEBUG=INFO
}

ray_start_head() { # index pinned(1|0)
  local i="$1" pinned="$2" ip
  local -a env=() cmd=(ray start --head --block --port 6379 --include-dashboard=false
    --disable-usage-stats --object-store-memory 100000000)
  if ((pinned)); then
    mapfile -t env < <(pinned_env "$i")
    ip="$(fabric_ip "$i")"
    cmd+=(--node-ip-address "$ip")
  fi
  run_workload "$i" ray-head "${env[@]}" --entrypoint ray -- "${cmd[@]:1}"
}

ray_start_worker() { # index head-address pinned(1|0)
  local i="$1" head="$2" pinned="$3" ip
  local -a env=() cmd=(ray start --block --address "$head:6379" --disable-usage-stats
    --object-store-memory 100000000)
  if ((pinned)); then
    mapfile -t env < <(pinned_env "$i")
    ip="$(fabric_ip "$i")"
    cmd+=(--node-ip-address "$ip")
  fi
  run_workload "$i" ray-worker "${env[@]}" --entrypoint ray -- "${cmd[@]:1}"
}

# Addresses the Ray cluster registered, sorted, one per line ("ip gpus").
ray_node_ips() {
  on 0 docker exec ray-head python3 -c '
import ray
ray.init(address="auto", logging_level="ERROR")
for n in sorted(ray.nodes(), key=lambda n: n["NodeManagerAddress"]):
    if n["Alive"]:
        print(n["NodeManagerAddress"], n["Resources"].get("GPU", 0))
' 2>/dev/null
}

wait_ray_nodes() { # count
  local deadline=$((SECONDS + START_TIMEOUT))
  until [[ "$(ray_node_ips | wc -l)" -ge "$1" ]]; do
    ((SECONDS < deadline)) || return 1
    sleep 2
  done
}

remove_containers() { # index names...
  local i="$1"
  shift
  on "$i" docker rm -f "$@" >/dev/null 2>&1 || true
}

# Poll GET /v1/models on node 0 until it lists the model; the container must stay up.
wait_models() { # container port model
  local deadline=$((SECONDS + START_TIMEOUT))
  until on 0 curl -sf "http://127.0.0.1:$2/v1/models" -H "Authorization: Bearer ${API_KEY:-none}" 2>/dev/null |
    grep -q "\"id\": \"$3\""; do
    if [[ "$(on 0 docker inspect -f '{{.State.Running}}' "$1" 2>/dev/null)" != "true" ]]; then return 1; fi
    ((SECONDS < deadline)) || return 1
    sleep 1
  done
}

completion() { # port model
  on 0 curl -sf "http://127.0.0.1:$1/v1/completions" -H "Authorization: Bearer ${API_KEY:-none}" \
    -H 'Content-Type: application/json' -d "{\"model\": \"$2\", \"prompt\": \"hello\", \"max_tokens\": 4}"
}

# The completion names exactly these addresses (and only these) in its machine-readable field.
completion_names() { # json expected-ips...
  local json="$1"
  shift
  local got want
  got="$(python3 -c 'import json,sys; print(" ".join(sorted({r["ip"] for r in json.loads(sys.argv[1])["vllm_fleet_ranks"]})))' "$json")"
  want="$(printf '%s\n' "$@" | sort -u | tr '\n' ' ' | sed 's/ $//')"
  [[ "$got" == "$want" ]]
}

make_model() { # index : a tiny model directory, written over SSH like a launcher would
  ssh_on "$1" 'mkdir -p ~/models/tiny && cd ~/models/tiny &&
    printf "%s\n" "{\"architectures\": [\"LlamaForCausalLM\"], \"model_type\": \"llama\", \"max_position_embeddings\": 4096}" > config.json &&
    head -c 1024 /dev/zero > model.safetensors'
}

# ---------------------------------------------------------------------------------------------
# checks

note "argument validation"
out="$("$SIM" up -n 9 -c "$CLUSTER" 2>&1)" && rc=0 || rc=$?
if ((rc != 0)) && grep -q -- "-n must be a whole number from 1 to 8" <<<"$out"; then
  pass "up -n 9 is refused with a clear error"
else
  fail "up -n 9 is refused with a clear error" "$out"
fi

note "bring up 2 simulated Sparks ($CLUSTER)"
t0=$SECONDS
if out="$("$SIM" up -n 2 -c "$CLUSTER" 2>&1)" && [[ -f "$STATE/cluster.json" ]] &&
  [[ "$(json_get "$STATE/cluster.json" "len(d['nodes'])")" == 2 ]]; then
  pass "sim up -n 2 ($((SECONDS - t0)) s)"
else
  fail "sim up -n 2" "$out"
  exit 1
fi
WORKLOAD="$(json_get "$STATE/cluster.json" "d['workloadImage']")"
M0="$(mgmt_ip 0)"
F0="$(fabric_ip 0)"
F1="$(fabric_ip 1)"
MGMT_GW="$(json_get "$STATE/cluster.json" "d['mgmtGateway']")"

t0=$SECONDS
if out="$("$SIM" up -n 2 -c "$CLUSTER" 2>&1)" && grep -q "reusing its 2 running nodes" <<<"$out"; then
  pass "sim up again reuses the running cluster ($((SECONDS - t0)) s)"
else
  fail "sim up again reuses the running cluster" "$out"
fi

note "SSH, Docker and hardware stand-ins on the nodes"
if out="$(ssh_on 0 'id -nG; docker info --format "{{.ServerVersion}} {{.Driver}}"' 2>&1)" &&
  grep -qw docker <<<"$out" && grep -q overlay2 <<<"$out"; then
  pass "ssh spark@node0 (pinned host key) runs docker without sudo"
else
  fail "ssh spark@node0 (pinned host key) runs docker without sudo" "$out"
fi
want_csv="$(grep -v '^#' "$FIXTURES/nvidia-smi-query-gb10.csv")"
if out="$(ssh_on 1 nvidia-smi --query-gpu=index,name,memory.total,memory.used,memory.free --format=csv,noheader,nounits 2>&1)" &&
  [[ "$out" == "$want_csv" ]]; then
  pass "nvidia-smi --query-gpu prints the GB10 fixture line"
else
  fail "nvidia-smi --query-gpu prints the GB10 fixture line" "$out"
fi
if out="$(ssh_on 1 nvidia-smi 2>&1)" &&
  grep -qF "$(grep -F 'Driver Version' "$FIXTURES/nvidia-smi-gb10.txt")" <<<"$out" &&
  grep -qF "$(grep -F 'NVIDIA GB10' "$FIXTURES/nvidia-smi-gb10.txt")" <<<"$out" &&
  grep -qF "Not Supported" <<<"$out"; then
  pass "nvidia-smi table matches the GB10 fixture lines"
else
  fail "nvidia-smi table matches the GB10 fixture lines" "$out"
fi
if out="$(ssh_on 1 'ibdev2netdev; ip -4 -o addr show enp1s0f1np1; ip route show default' 2>&1)" &&
  grep -qx "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" <<<"$out" &&
  [[ "$(grep -c '(Down)' <<<"$out")" == 3 ]] &&
  grep -q "inet $F1/24" <<<"$out" && grep -q "default via $MGMT_GW dev enP7s7" <<<"$out"; then
  pass "ibdev2netdev, fabric address on enp1s0f1np1, default route via management"
else
  fail "ibdev2netdev, fabric address on enp1s0f1np1, default route via management" "$out"
fi
if out="$(on 0 docker run --rm --gpus all --entrypoint true "$WORKLOAD" 2>&1)" &&
  out="$(on 0 docker run --rm --gpus all "$WORKLOAD" --help 2>&1)" && grep -q "usage: vllm serve" <<<"$out" &&
  out2="$(on 0 docker run --rm --gpus all --entrypoint nvidia-smi "$WORKLOAD" -L 2>&1)" &&
  grep -q "GPU 0: NVIDIA GB10" <<<"$out2" &&
  ! on 0 docker run --rm --entrypoint nvidia-smi "$WORKLOAD" >/dev/null 2>&1; then
  pass "docker run --gpus all in a node (entrypoint 'vllm serve'; no GPU without --gpus)"
else
  fail "docker run --gpus all in a node" "$out ${out2:-}"
fi
if out="$(on 0 docker run --rm --gpus all "$WORKLOAD" /models/x --no-such-flag 2>&1)"; then rc=0; else rc=$?; fi
if ((rc == 2)) && grep -q "unrecognized arguments: --no-such-flag" <<<"$out"; then
  pass "vllm serve rejects an unknown flag (exit 2, argparse message)"
else
  fail "vllm serve rejects an unknown flag (exit 2, argparse message; got $rc)" "$out"
fi
make_model 0
make_model 1

note "Ray pinned to the fabric + vllm serve (ray backend, TP=2)"
ray_start_head 0 1
ray_start_worker 1 "$F0" 1
# The autoscaler's status lags node registration ("No cluster status..."): ask a few times.
ray_status_shows() {
  local _
  for _ in $(seq 1 20); do
    out="$(on 0 docker exec ray-head ray status 2>&1)" || true
    grep -q "0.0/$1.0 GPU" <<<"$out" && [[ "$(grep -c '^ 1 node_' <<<"$out")" == "$1" ]] && return 0
    sleep 2
  done
  return 1
}
if wait_ray_nodes 2 && ray_status_shows 2; then
  pass "ray status: 2 nodes, 2.0 GPU"
else
  fail "ray status: 2 nodes, 2.0 GPU" "${out:-}"
fi
ips="$(ray_node_ips)"
if [[ "$(printf '%s\n' "$ips" | cut -d' ' -f1 | sort | tr '\n' ' ')" == "$(printf '%s\n' "$F0" "$F1" | sort | tr '\n' ' ')" ]]; then
  pass "every Ray node registered its fabric address ($(tr '\n' ',' <<<"$ips"))"
else
  fail "every Ray node registered its fabric address" "$ips"
fi
API_KEY="sk-selftest"
t0=$SECONDS
on 0 docker exec -d ray-head sh -c "exec vllm serve /models/tiny --served-model-name tiny \
  --tensor-parallel-size 2 --distributed-executor-backend ray --port 8000 --api-key $API_KEY \
  --gpu-memory-utilization 0.85 --max-model-len 4096 >/tmp/vllm.log 2>&1"
if wait_models ray-head 8000 tiny; then
  pass "vllm serve (ray, TP=2) lists the model on /v1/models ($((SECONDS - t0)) s)"
else
  fail "vllm serve (ray, TP=2) lists the model on /v1/models" "$(on 0 docker exec ray-head cat /tmp/vllm.log 2>&1)"
fi
if out="$(completion 8000 tiny 2>&1)" && completion_names "$out" "$F0" "$F1" &&
  grep -q "$F0" <<<"$out" && grep -q "$F1" <<<"$out" && ! grep -q "10\.230\." <<<"$out"; then
  pass "completion answered by both ranks on fabric addresses ($(python3 -c 'import json,sys; print(json.loads(sys.argv[1])["choices"][0]["text"])' "$out"))"
else
  fail "completion answered by both ranks on fabric addresses" "$out"
fi
# /v1/models has the shape of a real vLLM answer (fixtures/vllm-v1-models.json).
if out="$(on 0 curl -sf http://127.0.0.1:8000/v1/models -H "Authorization: Bearer $API_KEY" 2>&1)" &&
  python3 - "$out" "$FIXTURES/vllm-v1-models.json" <<'PY'
import json, sys
got, want = json.loads(sys.argv[1]), json.load(open(sys.argv[2]))
assert got["object"] == want["object"] == "list"
entry, ref = got["data"][0], want["data"][0]
assert set(ref) <= set(entry), set(ref) - set(entry)
assert (entry["id"], entry["object"], entry["owned_by"], entry["root"], entry["parent"], entry["max_model_len"]) == \
    ("tiny", "model", "vllm", "/models/tiny", None, 4096), entry
PY
then
  pass "/v1/models has vLLM's shape (fixture keys; id = served name, root = model path)"
else
  fail "/v1/models has vLLM's shape" "$out"
fi
code="$(on 0 curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/v1/models)"
if [[ "$code" == 401 ]] && [[ "$(on 0 curl -s -o /dev/null -w '%{http_code}' http://127.0.0.1:8000/health)" == 200 ]]; then
  pass "--api-key: /v1/models without a key is 401, /health is 200"
else
  fail "--api-key: /v1/models without a key is 401, /health is 200" "got $code"
fi
unset API_KEY
remove_containers 0 ray-head
remove_containers 1 ray-worker

note "vLLM native multi-node (mp backend): rank 0 + headless rank 1"
mapfile -t env0 < <(pinned_env 0)
mapfile -t env1 < <(pinned_env 1)
mp_args=(/models/tiny --served-model-name tiny -tp 2 --distributed-executor-backend mp --nnodes 2
  --master-addr "$F0" --master-port 29501)
t0=$SECONDS
run_workload 0 vllm-rank0 "${env0[@]}" -e "VLLM_SIM_STARTUP_TIMEOUT=$START_TIMEOUT" -- \
  "${mp_args[@]}" --node-rank 0 --port 8001
run_workload 1 vllm-rank1 "${env1[@]}" -e "VLLM_SIM_STARTUP_TIMEOUT=$START_TIMEOUT" -- \
  "${mp_args[@]}" --node-rank 1 --headless
if wait_models vllm-rank0 8001 tiny && out="$(completion 8001 tiny 2>&1)" &&
  completion_names "$out" "$F0" "$F1" && ! grep -q "10\.230\." <<<"$out"; then
  pass "mp: completion answered by rank 0@$F0 and headless rank 1@$F1 ($((SECONDS - t0)) s)"
else
  fail "mp: completion answered by rank 0 and headless rank 1" \
    "${out:-} $(on 0 docker logs vllm-rank0 2>&1 | tail -n 10) $(on 1 docker logs vllm-rank1 2>&1 | tail -n 10)"
fi
if out="$(on 1 docker logs vllm-rank1 2>&1)" && grep -q "NET/IB : Using \[0\]rocep1s0f1:1/RoCE" <<<"$out"; then
  pass "mp: headless rank logs NCCL NET/IB on the pinned HCA"
else
  fail "mp: headless rank logs NCCL NET/IB on the pinned HCA" "$out"
fi
remove_containers 0 vllm-rank0
remove_containers 1 vllm-rank1

note "the seeds' bug: Ray head started without --node-ip-address"
ray_start_head 0 0
ray_start_worker 1 "$F0" 0
if wait_ray_nodes 2; then
  ips="$(ray_node_ips)"
  if grep -q "^$M0 " <<<"$ips" && grep -q "^$F1 " <<<"$ips"; then
    pass "unpinned head registers its MANAGEMENT address $M0 (worker: $F1) - bug reproduced"
  else
    fail "unpinned head registers its management address" "$ips"
  fi
else
  fail "unpinned Ray cluster came up with 2 nodes" "$(ray_node_ips)"
fi
remove_containers 0 ray-head
remove_containers 1 ray-worker

note "one simulated Spark: TP=2 cannot be placed"
t0=$SECONDS
if out="$("$SIM" up -n 1 -c "$CLUSTER" 2>&1)" && [[ "$(json_get "$STATE/cluster.json" "len(d['nodes'])")" == 1 ]] &&
  ! docker inspect "$(node 1)" >/dev/null 2>&1; then
  pass "sim up -n 1 recreates the cluster with one node ($((SECONDS - t0)) s)"
else
  fail "sim up -n 1 recreates the cluster with one node" "$out"
fi
WORKLOAD="$(json_get "$STATE/cluster.json" "d['workloadImage']")"
make_model 0
ray_start_head 0 1
if wait_ray_nodes 1; then
  t0=$SECONDS
  if out="$(on 0 docker exec -e "VLLM_SIM_STARTUP_TIMEOUT=$PG_TIMEOUT" ray-head timeout 120 \
    vllm serve /models/tiny -tp 2 --distributed-executor-backend ray 2>&1)"; then rc=0; else rc=$?; fi
  took=$((SECONDS - t0))
  if ((rc != 0 && rc != 124 && took < 100)) &&
    grep -q "Cannot provide a placement group requiring 2.0 GPUs" <<<"$out" &&
    grep -q "node:$(fabric_ip 0)" <<<"$out"; then
    pass "TP=2 on one GPU fails with vLLM's placement-group error, exit $rc after ${took} s"
  else
    fail "TP=2 on one GPU fails with vLLM's placement-group error (exit $rc after ${took} s)" "$out"
  fi
else
  fail "one-node Ray cluster came up" "$(ray_node_ips)"
fi

finished=1
