# shellcheck shell=bash
# Offline-safe environment for the Pulumi CLI, sourced by the project's scripts:
# file:// backend, a passphrase for the simulated stacks, no update check, no automatic plugin
# download, and the toolchain that test/toolchain/pulumi.sh builds on PATH.
_fleet_here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
_fleet_repo="$(cd "$_fleet_here/../.." && pwd)"
# shellcheck source=test/toolchain/pins.env
source "$_fleet_here/pins.env"

export FLEET_CACHE_DIR="${FLEET_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/vllm-fleet}"
export FLEET_TOOLCHAIN_DIR="$FLEET_CACHE_DIR/pulumi-v$PULUMI_VERSION"
export FLEET_PATH_BEFORE="${FLEET_PATH_BEFORE:-$PATH}"
# Node.js programs run their dynamic resources through pulumi-resource-pulumi-nodejs, a launcher
# that ships inside @pulumi/pulumi: this checkout's own, not whichever checkout set up the cache.
export PATH="$FLEET_TOOLCHAIN_DIR/bin:$_fleet_repo/node_modules/@pulumi/pulumi:$FLEET_PATH_BEFORE"

export PULUMI_SKIP_UPDATE_CHECK=true
export PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION=true
export PULUMI_HOME="${PULUMI_HOME:-$FLEET_CACHE_DIR/pulumi-home}"
export PULUMI_BACKEND_URL="${PULUMI_BACKEND_URL:-file://$_fleet_repo/.pulumi-state}"
# Protects only the secrets of local (simulated) stacks; set your own for real hosts.
export PULUMI_CONFIG_PASSPHRASE="${PULUMI_CONFIG_PASSPHRASE-vllm-fleet-sim}"
mkdir -p "$PULUMI_HOME" "$_fleet_repo/.pulumi-state"
unset _fleet_here _fleet_repo
