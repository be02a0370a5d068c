#!/usr/bin/env bash
# Self-test of the proving ground, driven by hand (docker exec + real SSH, no Pulumi):
# brings up two simulated Sparks that differ like a real pair can (node 1's fabric port is
# enP2p1s0f1np1 and it lacks its RDMA device nodes), runs real Ray and the vLLM stand-in on them
# the way a launcher would, checks the stand-in's `vllm` CLI against vLLM 0.17.1's behaviour,
# proves the fabric-pinned path works (and that vLLM's Ray env carry-over breaks it unless the
# node-local variables are in ray_non_carry_over_env_vars.json), NCCL's NET/IB vs NET/Socket
# choice, reproduces the seeds' bug (Ray head on the management address), the GPU-shortage
# failure of TP=2 on one node, and vLLM's native mp multi-node. Always tears down. Ends with the
# line "N passed, M failed".
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
fabric_iface() { json_get "$STATE/cluster.json" "d['nodes'][$1]['fabricIface']"; }
# The RoCE HCA of the node's fabric port: the Up line of ibdev2netdev (what a launcher reads).
fabric_hca() { on "$1" ibdev2netdev | awk '/\(Up\)$/ {print $1; exit}'; }

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

pinned_env() { # index -> docker run flags pinning everything to the node's fabric (and its RoCE)
  local ip iface hca dev
  ip="$(fabric_ip "$1")"
  iface="$(fabric_iface "$1")"
  hca="$(fabric_hca "$1")"
  printf '%s\n' -e "VLLM_HOST_IP=$ip" -e "RAY_OVERRIDE_NODE_IP_ADDRESS=$ip" \
    -e "NCCL_SOCKET_IFNAME=$iface" -e "GLOO_SOCKET_IFNAME=$iface" -e "TP_SOCKET_IFNAME=$iface" \
    -e "UCX_NET_DEVICES=$iface" -e "NCCL_IB_HCA=$hca" -e NCCL_DEBUG=INFO -e NCCL_DEBUG_SUBSYS=INIT,NET
  # The node's RDMA device nodes, if it has them, and the right to pin memory for RoCE.
  for dev in $(on "$1" sh -c 'ls /dev/infiniband 2>/dev/null' || true); do
    printf '%s\n' "--device=/dev/infiniband/$dev"
  done
  printf '%s\n' --cap-add=IPC_LOCK --ulimit "memlock=$MEMLOCK:$MEMLOCK"
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

# The Ray worker logs of a node's Ray container: all of them, or (nccl) the newest one with NCCL's
# "Using network" line, i.e. the newest rank started there.
ray_worker_logs() { # index container all|nccl
  if [[ "$3" == all ]]; then
    on "$1" docker exec "$2" sh -c 'cat /tmp/ray/session_latest/logs/worker-*.out' 2>&1 || true
  else
    on "$1" docker exec "$2" sh -c 'f="$(ls -t /tmp/ray/session_latest/logs/worker-*.out | xargs grep -l "NCCL INFO Using network" | head -n 1)"; [ -n "$f" ] && cat "$f"' 2>&1 || true
  fi
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

out="$("$SIM" up -n 2 -c "$CLUSTER" --fabric-ifaces enp1s0f1np1 2>&1)" && rc=0 || rc=$?
out2="$("$SIM" up -n 2 -c "$CLUSTER" --no-rdma 2 2>&1)" && rc2=0 || rc2=$?
out3="$("$SIM" up -n 2 -c "$CLUSTER" --fabric-ifaces enp1s0f1np1,this-name-is-too-long 2>&1)" && rc3=0 || rc3=$?
if ((rc != 0 && rc2 != 0 && rc3 != 0)) && grep -q -- "--fabric-ifaces needs one name per node (2)" <<<"$out" &&
  grep -q -- "--no-rdma takes node indexes from 0 to 1" <<<"$out2" &&
  grep -q "invalid interface name 'this-name-is-too-long'" <<<"$out3"; then
  pass "up refuses a wrong --fabric-ifaces count, a --no-rdma index out of range, a name over 15 chars"
else
  fail "up refuses bad --fabric-ifaces / --no-rdma" "$out $out2 $out3"
fi

out="$("$SIM" up -n 2 -c "$CLUSTER" --stores classic 2>&1)" && rc=0 || rc=$?
out2="$("$SIM" up -n 2 -c "$CLUSTER" --stores classic,zfs 2>&1)" && rc2=0 || rc2=$?
if ((rc != 0 && rc2 != 0)) && grep -q -- "--stores needs one image store per node (2)" <<<"$out" &&
  grep -q -- "--stores: node 1's image store must be classic or containerd (got 'zfs')" <<<"$out2"; then
  pass "up refuses a wrong --stores count and an unknown store"
else
  fail "up refuses bad --stores" "$out $out2"
fi

# Node 1 differs from node 0 as a real pair can: its fabric port is the Spark's second one, its
# RDMA device nodes are missing and its Docker keeps images in the containerd image store.
UP_ARGS=(-n 2 -c "$CLUSTER" --fabric-ifaces enp1s0f1np1,enP2p1s0f1np1 --no-rdma 1 --stores classic,containerd)
note "bring up 2 simulated Sparks ($CLUSTER: node 1 on enP2p1s0f1np1, without RDMA devices, containerd image store)"
t0=$SECONDS
if out="$("$SIM" up "${UP_ARGS[@]}" 2>&1)" && [[ -f "$STATE/cluster.json" ]] &&
  [[ "$(json_get "$STATE/cluster.json" "len(d['nodes'])")" == 2 ]]; then
  pass "sim up -n 2 ($((SECONDS - t0)) s)"
else
  fail "sim up -n 2" "$out"
  exit 1
fi
if out="$(json_get "$STATE/cluster.json" "[(n['fabricIface'], n['rdma']) for n in d['nodes']] + [d['fabricIface']]")" &&
  [[ "$out" == "[('enp1s0f1np1', True), ('enP2p1s0f1np1', False), 'enp1s0f1np1']" ]]; then
  pass "cluster.json: per-node fabricIface and rdma ($out)"
else
  fail "cluster.json: per-node fabricIface and rdma" "$out"
fi
WORKLOAD="$(json_get "$STATE/cluster.json" "d['workloadImage']")"
M0="$(mgmt_ip 0)"
F0="$(fabric_ip 0)"
F1="$(fabric_ip 1)"
MGMT_GW="$(json_get "$STATE/cluster.json" "d['mgmtGateway']")"
# The memlock limit a container can get: unlimited (-1, what a launcher asks for RoCE) where the
# node's hard limit allows it, else that limit (raising it needs CAP_SYS_RESOURCE, which the nodes
# lack where the kernel's bounding set does; test/sim/README.md, machine notes).
MEMLOCK_KB="$(on 0 sh -c 'ulimit -H -l')"
if [[ "$MEMLOCK_KB" == unlimited ]]; then MEMLOCK=-1; else MEMLOCK=$((MEMLOCK_KB * 1024)); fi

t0=$SECONDS
if out="$("$SIM" up "${UP_ARGS[@]}" 2>&1)" && grep -q "reusing its 2 running nodes" <<<"$out"; then
  pass "sim up again reuses the running cluster ($((SECONDS - t0)) s)"
else
  fail "sim up again reuses the running cluster" "$out"
fi

note "SSH, Docker and hardware stand-ins on the nodes"
store_of() { ssh_on "$1" 'docker info --format "{{.ServerVersion}} {{.Driver}} {{range .DriverStatus}}{{index . 0}}={{index . 1}} {{end}}"'; }
identity_of() { ssh_on "$1" "$(cat "$SELF_DIR/../../components/scripts/image-identity.sh"); image_identity $(json_get "$STATE/cluster.json" "d['workloadImage']")"; }
want_identity="$(json_get "$STATE/cluster.json" "d['workloadImageIdentity']")"
if out0="$(store_of 0 2>&1)" && out1="$(store_of 1 2>&1)" &&
  [[ "$out0" == 26.1.* && "$out0" == *" overlay2 "* && "$out0" != *io.containerd.snapshotter* ]] &&
  [[ "$out1" == 26.1.* && "$out1" == *" overlayfs "*"driver-type=io.containerd.snapshotter.v1"* ]] &&
  [[ "$(identity_of 0)" == "$want_identity" && "$(identity_of 1)" == "$want_identity" ]]; then
  pass "Docker 26.1 on both nodes: node 0 on the classic image store, node 1 on the containerd one, the same workload image on both (content identity)"
else
  fail "Docker 26.1 and the image stores chosen by --stores" "$out0 | $out1 | $(identity_of 0 2>&1) $(identity_of 1 2>&1) want $want_identity"
fi
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
if out="$(ssh_on 1 'ibdev2netdev; ip -4 -o addr show enP2p1s0f1np1; ip route show default' 2>&1)" &&
  grep -qx "roceP2p1s0f1 port 1 ==> enP2p1s0f1np1 (Up)" <<<"$out" &&
  [[ "$(grep -c '(Down)' <<<"$out")" == 3 ]] &&
  grep -q "inet $F1/24" <<<"$out" && grep -q "default via $MGMT_GW dev enP7s7" <<<"$out" &&
  out0="$(ssh_on 0 ibdev2netdev 2>&1)" && grep -qx "rocep1s0f1 port 1 ==> enp1s0f1np1 (Up)" <<<"$out0"; then
  pass "ibdev2netdev maps each node's fabric HCA to its own port (node 1: enP2p1s0f1np1), default route via management"
else
  fail "ibdev2netdev, fabric address on the node's port, default route via management" "$out ${out0:-}"
fi
# RDMA device nodes: node 0 has them (char 231:192..195 and 10:58), node 1 (--no-rdma) has none.
want_devs="character special file 10:58 /dev/infiniband/rdma_cm
character special file 231:192 /dev/infiniband/uverbs0
character special file 231:193 /dev/infiniband/uverbs1
character special file 231:194 /dev/infiniband/uverbs2
character special file 231:195 /dev/infiniband/uverbs3"
if out="$(on 0 sh -c 'for f in /dev/infiniband/*; do echo "$(stat -c %F "$f") $((0x$(stat -c %t "$f"))):$((0x$(stat -c %T "$f"))) $f"; done' 2>&1)" &&
  [[ "$out" == "$want_devs" ]] && ! on 1 test -e /dev/infiniband; then
  pass "RDMA device nodes on node 0 (uverbs0..3 231:192..195, rdma_cm 10:58), none on the --no-rdma node"
else
  fail "RDMA device nodes on node 0, none on the --no-rdma node" "$out"
fi
# A container gets them as a launcher passes them (DinD: the node's device cgroup allows them).
rdma_run=(--device=/dev/infiniband/uverbs0 --device=/dev/infiniband/uverbs1 --device=/dev/infiniband/uverbs2
  --device=/dev/infiniband/uverbs3 --device=/dev/infiniband/rdma_cm --cap-add=IPC_LOCK --ulimit "memlock=$MEMLOCK:$MEMLOCK")
if out="$(on 0 docker run --rm "${rdma_run[@]}" --entrypoint sh "$WORKLOAD" -c \
  'ls /dev/infiniband | tr "\n" " "; ulimit -l; grep CapEff /proc/self/status' 2>&1)" &&
  grep -q "rdma_cm uverbs0 uverbs1 uverbs2 uverbs3 $MEMLOCK_KB" <<<"$out" &&
  (($(printf '%d' "0x$(awk '/CapEff/ {print $2}' <<<"$out")") & (1 << 14))) &&
  ! out1="$(on 1 docker run --rm --device=/dev/infiniband/uverbs0 --entrypoint true "$WORKLOAD" 2>&1)"; then
  pass "docker run --device=/dev/infiniband/... --cap-add=IPC_LOCK --ulimit memlock=$MEMLOCK:$MEMLOCK in node 0; refused on node 1"
else
  fail "docker run with the RDMA devices in node 0 (and refused on node 1)" "$out ${out1:-}"
fi
# NCCL's choice in one rank: IB needs the devices, CAP_IPC_LOCK and IB not disabled.
nccl_rank() { # docker-run args... : NCCL's "NET/" and "Using network" lines of one rank on node 0
  on 0 docker run --rm --network host -e NCCL_DEBUG=INFO -e NCCL_SOCKET_IFNAME=enp1s0f1np1 "$@" \
    --entrypoint python3 "$WORKLOAD" -c 'from vllm.distributed.device_communicators.pynccl_wrapper import comm_init_rank; comm_init_rank(0)' 2>&1 |
    grep -o "NCCL INFO \(NET/.*\|Using network .*\)" | tr '\n' '|'
}
ib_on="$(nccl_rank "${rdma_run[@]}" -e NCCL_IB_HCA=rocep1s0f1)"
no_cap="$(nccl_rank "${rdma_run[@]:0:5}" -e NCCL_IB_HCA=rocep1s0f1)"
ib_off="$(nccl_rank "${rdma_run[@]}" -e NCCL_IB_HCA=rocep1s0f1 -e NCCL_IB_DISABLE=1)"
other_hca="$(nccl_rank "${rdma_run[@]}" -e NCCL_IB_HCA=roceP2p1s0f1)"
socket_line="NCCL INFO NET/Socket : Using [0]enp1s0f1np1:$F0<0>|NCCL INFO Using network Socket|"
if [[ "$ib_on" == "NCCL INFO NET/IB : Using [0]rocep1s0f1:1/RoCE [RO]; OOB enp1s0f1np1:$F0<0>|NCCL INFO Using network IB|" ]] &&
  [[ "$no_cap" == "NCCL INFO NET/IB : No device found.|NCCL INFO NET/IB : Using [RO]; OOB enp1s0f1np1:$F0<0>|$socket_line" ]] &&
  [[ "$ib_off" == "$socket_line" ]] && [[ "$other_hca" == "$no_cap" ]]; then
  pass "NCCL stand-in: IB with devices + IPC_LOCK; without IPC_LOCK, with NCCL_IB_DISABLE=1 or another port's HCA: Socket"
else
  fail "NCCL stand-in: IB only with devices, IPC_LOCK and an active HCA" "ib_on: $ib_on
no_cap: $no_cap
ib_off: $ib_off
other_hca: $other_hca"
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

note "the vllm CLI, as vLLM 0.17.1's (parse and validate)"
if out="$(on 0 docker run --rm --network none --gpus all "$WORKLOAD" /models/x --no-such-flag 2>&1)"; then rc=0; else rc=$?; fi
if ((rc == 2)) && [[ "$out" == "usage: vllm [-h] [-v] {chat,complete,serve,bench,collect-env,run-batch} ...
vllm: error: unrecognized arguments: --no-such-flag" ]]; then
  pass "vllm serve refuses an unknown flag: exit 2, FlexibleArgumentParser's two lines"
else
  fail "vllm serve refuses an unknown flag (exit 2, argparse message; got $rc)" "$out"
fi
# The check a launcher runs: real vLLM's module layout, `serve`'s command replaced before main()
# builds its parser, so it parses and validates only.
check_py='
import sys
from vllm.entrypoints.cli.serve import ServeSubcommand
ServeSubcommand.cmd = staticmethod(lambda args: print("accepted", args.tensor_parallel_size, args.reasoning_parser, args.tool_call_parser))
from vllm.entrypoints.cli.main import main
sys.argv = ["vllm", "serve"] + sys.argv[1:]
main()
'
serve_check() { on 0 docker run --rm --network none --gpus all --entrypoint python3 "$WORKLOAD" -c "$check_py" "$@"; }
if out="$(serve_check /models/tiny --served-model-name tiny --host 0.0.0.0 --port 8000 --tensor-parallel-size 2 \
  --pipeline-parallel-size 1 --distributed-executor-backend ray --gpu-memory-utilization 0.85 --max-model-len 4096 \
  --reasoning-parser qwen3 --tool-call-parser hermes --enable-auto-tool-choice --trust-remote-code --swap-space 4 \
  --nnodes 2 --node-rank 1 --master-addr 192.168.0.1 --master-port 29501 --headless --enable_prefix_caching 2>&1)" &&
  [[ "$out" == "accepted 2 qwen3 hermes" ]]; then
  pass "patched ServeSubcommand.cmd: the program's flags (snake_case too) parse and validate, nothing starts"
else
  fail "patched ServeSubcommand.cmd: parse and validate only" "$out"
fi
if out="$(serve_check /models/tiny --enable-auto-tool-choice 2>&1)"; then rc=0; else rc=$?; fi
out2="$(serve_check /models/tiny --disable-log-requests 2>&1)" && rc2=0 || rc2=$?
if ((rc == 1 && rc2 == 2)) && [[ "$(tail -n 1 <<<"$out")" == "TypeError: Error: --enable-auto-tool-choice requires --tool-call-parser" ]] &&
  grep -q "^vllm: error: unrecognized arguments: --disable-log-requests$" <<<"$out2"; then
  pass "--enable-auto-tool-choice without --tool-call-parser: vLLM's TypeError; --disable-log-requests unknown in 0.17.1"
else
  fail "--enable-auto-tool-choice without a parser / --disable-log-requests (got $rc, $rc2)" "$out $out2"
fi
# Parser names are not checked by parse-and-validate (vLLM 0.17.1 neither); the registries say.
if out="$(serve_check /models/tiny --reasoning-parser nope --tool-call-parser nope2 2>&1)" &&
  [[ "$out" == "accepted 1 nope nope2" ]] &&
  out2="$(on 0 docker run --rm --network none --entrypoint python3 "$WORKLOAD" -c '
from vllm.reasoning import ReasoningParserManager
from vllm.tool_parsers import ToolParserManager
for get, name in ((ReasoningParserManager.get_reasoning_parser, "nope"), (ToolParserManager.get_tool_parser, "nope2")):
    try:
        get(name)
    except KeyError as e:
        print(e)
print("qwen3" in ReasoningParserManager.list_registered(), "qwen3_coder" in ToolParserManager.list_registered())
' 2>&1)" && grep -q "^\"Reasoning parser 'nope' not found. Available parsers: deepseek_r1, deepseek_v3, " <<<"$out2" &&
  grep -q "^\"Tool parser 'nope2' not found.\"$" <<<"$out2" && grep -q "^True True$" <<<"$out2"; then
  pass "unknown parser names pass parse-and-validate, as in vLLM 0.17.1; its registries refuse them"
else
  fail "unknown parser names: accepted by the check, refused by the registries" "$out ${out2:-}"
fi
make_model 0
make_model 1
# At start, vLLM 0.17.1 refuses an unknown tool parser (with --enable-auto-tool-choice) before the
# engine, and an unknown reasoning parser once the engine is up.
if out="$(on 0 docker run --rm --network none --gpus all -v /home/spark/models:/models:ro "$WORKLOAD" /models/tiny \
  --enable-auto-tool-choice --tool-call-parser nope 2>&1)"; then rc=0; else rc=$?; fi
out2="$(on 0 docker run --rm --network none --gpus all -v /home/spark/models:/models:ro "$WORKLOAD" /models/tiny \
  --reasoning-parser nope 2>&1)" && rc2=0 || rc2=$?
if ((rc == 1 && rc2 == 1)) && grep -q "KeyError: 'invalid tool call parser: nope (chose from { deepseek_v3,deepseek_v31,.*,xlam })'$" <<<"$out" &&
  grep -q "KeyError: \"Reasoning parser 'nope' not found. Available parsers: " <<<"$out2" &&
  grep -q "RuntimeError: Engine core initialization failed. See root cause above. Failed core proc(s): {}" <<<"$out2"; then
  pass "vllm serve: unknown tool parser -> KeyError at setup, unknown reasoning parser -> engine core fails (exit 1)"
else
  fail "vllm serve with unknown parsers (got $rc, $rc2)" "$out
$out2"
fi

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
# vLLM's Ray executor gives every worker the driver's NCCL_*, UCX_* and VLLM_* variables (0.17.1:
# vllm/ray/ray_env.py): node 1's rank gets node 0's NCCL_SOCKET_IFNAME, an interface it lacks.
t0=$SECONDS
if out="$(on 0 docker exec -e "VLLM_SIM_STARTUP_TIMEOUT=$PG_TIMEOUT" ray-head timeout 120 vllm serve /models/tiny \
  --served-model-name tiny -tp 2 --distributed-executor-backend ray --port 8000 2>&1)"; then rc=0; else rc=$?; fi
w1="$(ray_worker_logs 1 ray-worker all)"
if ((rc == 1)) && grep -q "Copying the following environment variables to workers: \[.*'NCCL_SOCKET_IFNAME'" <<<"$out" &&
  grep -q "RuntimeError: NCCL error: invalid usage (run with NCCL_DEBUG=WARN for details)$" <<<"$out" &&
  grep -q "Overwriting environment variable NCCL_SOCKET_IFNAME from 'enP2p1s0f1np1' to 'enp1s0f1np1'" <<<"$w1" &&
  grep -q "NCCL WARN Bootstrap : no socket interface found" <<<"$w1" &&
  ! grep -q "Overwriting environment variable GLOO_SOCKET_IFNAME" <<<"$w1"; then
  pass "ray: the head's NCCL_SOCKET_IFNAME carried over to node 1 fails its NCCL bootstrap (exit 1 after $((SECONDS - t0)) s; GLOO_* not copied)"
else
  fail "ray: the head's NCCL_SOCKET_IFNAME carried over to node 1 fails its NCCL bootstrap (exit $rc)" "$out
--- node 1 worker logs:
$w1"
fi
# Listed in $VLLM_CONFIG_ROOT/ray_non_carry_over_env_vars.json (default ~/.config/vllm), each node
# keeps its own.
on 0 docker exec ray-head sh -c 'mkdir -p /root/.config/vllm && printf "%s\n" "[\"NCCL_SOCKET_IFNAME\", \"NCCL_IB_HCA\", \"UCX_NET_DEVICES\"]" >/root/.config/vllm/ray_non_carry_over_env_vars.json'
API_KEY="sk-selftest"
t0=$SECONDS
on 0 docker exec -d ray-head sh -c "exec vllm serve /models/tiny --served-model-name tiny \
  --tensor-parallel-size 2 --distributed-executor-backend ray --port 8000 --api-key $API_KEY \
  --gpu-memory-utilization 0.85 --max-model-len 4096 >/tmp/vllm.log 2>&1"
if wait_models ray-head 8000 tiny; then
  pass "vllm serve (ray, TP=2, node-local NCCL_* not carried over) lists the model on /v1/models ($((SECONDS - t0)) s)"
else
  fail "vllm serve (ray, TP=2) lists the model on /v1/models" "$(on 0 docker exec ray-head cat /tmp/vllm.log 2>&1)"
fi
out="$(on 0 docker exec ray-head cat /tmp/vllm.log 2>&1)"
if grep -q "RAY_NON_CARRY_OVER_ENV_VARS from config: {" <<<"$out" &&
  grep -q "To exclude env vars from copying, add them to /root/.config/vllm/ray_non_carry_over_env_vars.json" <<<"$out" &&
  grep "Copying the following environment variables to workers" <<<"$out" | grep -qv "NCCL_SOCKET_IFNAME"; then
  pass "ray: vLLM's carry-over log lines name the file and leave NCCL_SOCKET_IFNAME out"
else
  fail "ray: vLLM's carry-over log lines" "$out"
fi
# True when node 0's rank log ($1) shows NCCL on RoCE (its HCA, OOB on its fabric address) and
# node 1's ($2) the fall-back to TCP sockets (the --no-rdma node).
nccl_ib_then_socket() {
  grep -q "NCCL INFO NET/IB : Using \[0\]rocep1s0f1:1/RoCE \[RO\]; OOB enp1s0f1np1:$F0<0>$" <<<"$1" &&
    grep -q "NCCL INFO Using network IB$" <<<"$1" &&
    grep -q "NCCL INFO NET/IB : No device found.$" <<<"$2" &&
    grep -q "NCCL INFO NET/Socket : Using \[0\]enP2p1s0f1np1:$F1<0>$" <<<"$2" &&
    grep -q "NCCL INFO Using network Socket$" <<<"$2"
}
# NCCL in each rank's Ray worker log on its node: RoCE where the container has the RDMA devices
# and CAP_IPC_LOCK (node 0), TCP sockets where the node has none (node 1).
w0="$(ray_worker_logs 0 ray-head nccl)"
w1="$(ray_worker_logs 1 ray-worker nccl)"
if nccl_ib_then_socket "$w0" "$w1"; then
  pass "ray: NCCL uses IB on node 0 (devices + IPC_LOCK), Socket on node 1 (no devices), in each node's worker log"
else
  fail "ray: NCCL NET/IB on node 0, NET/Socket on node 1" "$w0
---
$w1"
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
out0="$(on 0 docker logs vllm-rank0 2>&1)"
out1="$(on 1 docker logs vllm-rank1 2>&1)"
if nccl_ib_then_socket "$out0" "$out1"; then
  pass "mp: rank 0 logs NCCL NET/IB on its HCA, the headless rank on the --no-rdma node NET/Socket"
else
  fail "mp: rank 0 logs NCCL NET/IB, the headless rank on the --no-rdma node NET/Socket" "$out0
---
$out1"
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
