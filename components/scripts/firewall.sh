#!/usr/bin/env bash
# The optional host firewall of one node (security.firewall): an iptables chain, jumped to first in
# INPUT, that lets everything from the loopback, from the fabric subnet and of established
# connections through, keeps SSH open to everyone, lets the ports that face clients (the gateway's,
# the services' APIs) through from the networks of security.clients only, and resets new TCP
# connections from anywhere else to those and to the ports Ray and vLLM use between the nodes: Ray's GCS port, its client server
# and worker range (10001-19999), its dashboard agent (52365), vLLM's mp rendezvous port, and the
# kernel's ephemeral range (read here), where the raylets, NCCL, Gloo and vLLM's message queues bind
# their random ports. IPv4 only: nothing of Ray's or vLLM's listens on IPv6.
# Rules need root: the SSH user is root, or may run `sudo` without a password (`sudo -n`); the
# rules program goes to the root shell on its standard input. It leaves a marker in /dev/shm (gone
# after a reboot, like the rules), which the read of every run looks for (live.sh), so that the
# next `up` puts the rules back.
# Inputs: ACTION (apply|remove), CHAIN, FABRIC_SUBNET, OPEN_PORTS (array), CLIENT_PORTS (array),
#         CLIENTS (array of CIDRs; 0.0.0.0/0 is everyone), CLOSED_PORTS (array of ports or first:last
#         ranges), MARKER (file), REVISION.
set -euo pipefail

fw_apply() {
  if ! command -v iptables >/dev/null 2>&1; then
    echo "security.firewall: iptables is not installed on this node" >&2
    exit 1
  fi
  local low high port
  read -r low high < /proc/sys/net/ipv4/ip_local_port_range
  iptables -w -N "$CHAIN" 2>/dev/null || iptables -w -F "$CHAIN"
  iptables -w -A "$CHAIN" -i lo -j RETURN
  iptables -w -A "$CHAIN" -s "$FABRIC_SUBNET" -j RETURN
  iptables -w -A "$CHAIN" -m conntrack --ctstate ESTABLISHED,RELATED -j RETURN
  for port in "${OPEN_PORTS[@]}"; do
    iptables -w -A "$CHAIN" -p tcp --dport "$port" -j RETURN
  done
  local everyone=no cidr
  for cidr in "${CLIENTS[@]}"; do
    [ "${cidr#*/}" != 0 ] || everyone=yes
  done
  for port in "${CLIENT_PORTS[@]}"; do
    if [ "$everyone" = yes ]; then
      iptables -w -A "$CHAIN" -p tcp --dport "$port" -j RETURN
      continue
    fi
    for cidr in "${CLIENTS[@]}"; do
      iptables -w -A "$CHAIN" -p tcp --dport "$port" -s "$cidr" -j RETURN
    done
    iptables -w -A "$CHAIN" -p tcp --dport "$port" -j REJECT --reject-with tcp-reset
  done
  for port in "${CLOSED_PORTS[@]}" "$low:$high"; do
    iptables -w -A "$CHAIN" -p tcp --dport "$port" -j REJECT --reject-with tcp-reset
  done
  iptables -w -C INPUT -j "$CHAIN" 2>/dev/null || iptables -w -I INPUT 1 -j "$CHAIN"
  printf '%s\n' "$REVISION" > "$MARKER"
  chmod 0644 "$MARKER"
  local clients="everyone"
  [ "$everyone" = yes ] || clients="${CLIENTS[*]}"
  echo "firewall $CHAIN: open to all: ${OPEN_PORTS[*]}; to clients ($clients): ${CLIENT_PORTS[*]:-none}; from $FABRIC_SUBNET only: ${CLOSED_PORTS[*]} $low:$high"
}

fw_remove() {
  while iptables -w -D INPUT -j "$CHAIN" 2>/dev/null; do :; done
  iptables -w -F "$CHAIN" 2>/dev/null || true
  iptables -w -X "$CHAIN" 2>/dev/null || true
  rm -f "$MARKER"
  echo "firewall $CHAIN: removed"
}

program="$(echo "set -euo pipefail"; declare -p CHAIN FABRIC_SUBNET OPEN_PORTS CLIENT_PORTS CLIENTS CLOSED_PORTS MARKER REVISION; declare -f fw_apply fw_remove; echo "fw_$ACTION")"
if [ "$(id -u)" = 0 ]; then
  printf '%s\n' "$program" | bash -s
elif sudo -n true 2>/dev/null; then
  printf '%s\n' "$program" | sudo -n bash -s
else
  echo "security.firewall needs root for iptables: $(id -un) is not root and may not use sudo without a password here (allow it, e.g. a line \"$(id -un) ALL=(root) NOPASSWD: ALL\" in /etc/sudoers.d/, or leave security.firewall off and keep the ports to the fabric with rules of your own: docs/security.md)" >&2
  exit 1
fi
