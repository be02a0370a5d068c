#!/usr/bin/env bash
# Readiness gate of the Ray cluster, run on the head node: every expected node alive under its
# fabric address, every GPU counted, and no other node (a management address is the seeds' bug).
# Inputs: CONTAINER, ADDRESS (head ip:port), EXPECTED_IPS (array), EXPECTED_GPUS, TIMEOUT (seconds).
# Prints `ray-node <ip> <gpus>` lines and the cluster's resources (`ray-resources CPU=8.0 GPU=4.0 ...`),
# all from one Ray driver; on failure names the missing and unexpected nodes.
set -euo pipefail

deadline=$((SECONDS + TIMEOUT))
while true; do
  report="$(docker exec -i "$CONTAINER" python3 - "$ADDRESS" 2>&1 <<'PY' || true
import sys
import ray
ray.init(address=sys.argv[1], logging_level="ERROR", log_to_driver=False)
for n in ray.nodes():
    if n["Alive"]:
        print("ray-node", n["NodeManagerAddress"], int(n["Resources"].get("GPU", 0)))
resources = ray.cluster_resources()
print("ray-resources", " ".join(f"{k}={resources[k]}" for k in ("CPU", "GPU", "memory", "object_store_memory") if k in resources))
PY
)"
  alive="$(printf '%s\n' "$report" | awk '$1 == "ray-node" {print $2}' | sort)"
  gpus="$(printf '%s\n' "$report" | awk '$1 == "ray-node" {sum += $3} END {print sum + 0}')"
  missing=()
  for ip in "${EXPECTED_IPS[@]}"; do
    grep -qxF "$ip" <<<"$alive" || missing+=("$ip")
  done
  unexpected=()
  while read -r ip; do
    [ -z "$ip" ] && continue
    printf '%s\n' "${EXPECTED_IPS[@]}" | grep -qxF "$ip" || unexpected+=("$ip")
  done <<<"$alive"
  if [ "${#missing[@]}" -eq 0 ] && [ "${#unexpected[@]}" -eq 0 ] && [ "$gpus" -ge "$EXPECTED_GPUS" ]; then
    printf '%s\n' "$report" | grep -E '^ray-(node|resources) '
    exit 0
  fi
  if [ "$SECONDS" -ge "$deadline" ]; then
    {
      echo "Ray cluster not ready within ${TIMEOUT}s:"
      [ "${#missing[@]}" -gt 0 ] && echo "  missing nodes (fabric addresses): ${missing[*]}"
      [ "${#unexpected[@]}" -gt 0 ] && echo "  unexpected nodes (not a fabric address of the stack): ${unexpected[*]}"
      echo "  GPUs: $gpus of $EXPECTED_GPUS"
      echo "  last answer: $report"
      echo "head container log tail:"
      docker logs --tail 30 "$CONTAINER" 2>&1 || true
    } >&2
    exit 1
  fi
  sleep 1
done
