#!/usr/bin/env bash
# Installs the Debian packages the tests use on this machine, when missing: tmux (npm run top is
# tested in a real terminal). Idempotent: with every command there it does nothing.
set -euo pipefail

log() { printf '[packages] %s\n' "$*" >&2; }

missing=()
command -v tmux >/dev/null 2>&1 || missing+=(tmux)
if [ "${#missing[@]}" -eq 0 ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  log "missing ${missing[*]} and this user cannot install packages; install them (apt-get install ${missing[*]}) and retry"
  exit 1
fi
log "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
