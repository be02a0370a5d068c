#!/usr/bin/env bash
# Brings up the Pulumi toolchain on a machine that cannot download Pulumi's release binaries.
#
# Where `pulumi` is already on PATH (a user's machine), it is used as it is and nothing is built.
# Otherwise the Pulumi CLI is built from the Go module proxy, pinned by ./pulumi/go.mod + go.sum to
# the release that matches the @pulumi/pulumi in package-lock.json, and cached outside the repo so a
# second run takes seconds. The command provider and the Node.js language host are built the same
# way when the module proxy serves them (see pins.env); the script says plainly when it does not.
#
# Usage: test/toolchain/pulumi.sh            build if needed, print versions
#        source test/toolchain/env.sh        (sets PATH and the offline-safe environment)
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
# shellcheck source=test/toolchain/env.sh
source "$here/env.sh"
# shellcheck source=test/toolchain/pins.env
source "$here/pins.env"

log() { printf '[pulumi] %s\n' "$*" >&2; }

lock_sdk_version() {
  node -e 'const l=require(process.argv[1]); const p=l.packages["node_modules/@pulumi/pulumi"]; if(!p) process.exit(1); console.log(p.version)' \
    "$repo/package-lock.json"
}

command_provider_version() {
  node -e 'console.log(require(process.argv[1]).pulumi.version)' "$repo/node_modules/@pulumi/command/package.json"
}

# version_ge A B: true when semver A >= B (numeric x.y.z only).
version_ge() {
  [ "$(printf '%s\n%s\n' "$1" "$2" | sort -V | head -n 1)" = "$2" ]
}

# The CLI's release must not be older than the SDK the program runs with.
sdk_version="$(lock_sdk_version)"
if ! version_ge "$PULUMI_VERSION" "$sdk_version"; then
  log "pins.env pins Pulumi $PULUMI_VERSION, older than @pulumi/pulumi $sdk_version in package-lock.json; raise PULUMI_VERSION and ./pulumi/go.mod together"
  exit 1
fi
if ! grep -q "github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION\$" "$here/pulumi/go.mod"; then
  log "./pulumi/go.mod does not require github.com/pulumi/pulumi/pkg/v3 v$PULUMI_VERSION (pins.env); keep them in step"
  exit 1
fi

external_pulumi() {
  # A pulumi on PATH that is not the one this script builds.
  local found
  found="$(PATH="$FLEET_PATH_BEFORE" command -v pulumi 2>/dev/null || true)"
  [ -n "$found" ] && printf '%s\n' "$found"
}

go_env() {
  # CGO off: static binaries that run on any node-kind machine; GOFLAGS keeps go.sum authoritative.
  env CGO_ENABLED=0 GOFLAGS=-mod=readonly GOTOOLCHAIN=local "$@"
}

build_cli() {
  local stamp_want stamp_file="$FLEET_TOOLCHAIN_DIR/cli.stamp"
  stamp_want="$(cat "$here/pulumi/go.mod" "$here/pulumi/go.sum" "$here/pulumi/tools.go" | sha256sum | cut -c1-16)"
  if [ -x "$FLEET_TOOLCHAIN_DIR/bin/pulumi" ] && [ "$(cat "$stamp_file" 2>/dev/null)" = "$stamp_want" ]; then
    return 0
  fi
  command -v go >/dev/null 2>&1 || { log "Go is needed to build the Pulumi CLI and is not on PATH"; exit 1; }
  log "building the Pulumi CLI v$PULUMI_VERSION from the Go module proxy (cold: several minutes)"
  mkdir -p "$FLEET_TOOLCHAIN_DIR/bin"
  (cd "$here/pulumi" && go_env go build -trimpath \
    -ldflags "-s -w -X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
    -o "$FLEET_TOOLCHAIN_DIR/bin/pulumi.tmp" github.com/pulumi/pulumi/pkg/v3/cmd/pulumi)
  mv "$FLEET_TOOLCHAIN_DIR/bin/pulumi.tmp" "$FLEET_TOOLCHAIN_DIR/bin/pulumi"
  printf '%s\n' "$stamp_want" >"$stamp_file"
}

# build_from_proxy NAME MODULE@VERSION PACKAGE LDFLAGS OUT: builds a main package of a module that the
# wrapper module does not pin (the language host, the command provider). Returns 1, with the proxy's
# own words, when the module proxy does not serve that module version.
build_from_proxy() {
  local name="$1" modver="$2" pkg="$3" ldflags="$4" out="$5" work
  [ -x "$out" ] && return 0
  work="$FLEET_TOOLCHAIN_DIR/build-$name"
  rm -rf "$work" && mkdir -p "$work"
  printf 'module vllmfleet.local/%s\n\ngo 1.26\n' "$name" >"$work/go.mod"
  if ! (cd "$work" && env GOFLAGS=-mod=mod GOTOOLCHAIN=local go get "$modver" >"$work/get.log" 2>&1); then
    log "$name: the Go module proxy does not serve $modver:"
    sed 's/^/[pulumi]   /' "$work/get.log" | tail -n 4 >&2
    return 1
  fi
  (cd "$work" && go_env GOFLAGS=-mod=mod go build -trimpath -ldflags "-s -w $ldflags" -o "$out" "$pkg")
}

plugin_installed() { pulumi plugin ls 2>/dev/null | awk -v n="$1" -v v="$2" '$1==n && $3==v {f=1} END {exit !f}'; }

if ext="$(external_pulumi)"; then
  log "using the installed Pulumi CLI at $ext; nothing to build"
else
  build_cli
  if [ -n "${LANGUAGE_HOST_VERSION:-}" ]; then
    build_from_proxy language-nodejs \
      "github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3@$LANGUAGE_HOST_VERSION" \
      github.com/pulumi/pulumi/sdk/nodejs/cmd/pulumi-language-nodejs/v3 \
      "-X github.com/pulumi/pulumi/sdk/v3/go/common/version.Version=v$PULUMI_VERSION" \
      "$FLEET_TOOLCHAIN_DIR/bin/pulumi-language-nodejs" || true
  fi
  cmd_version="$(command_provider_version)"
  if ! plugin_installed command "$cmd_version"; then
    provider_bin="$FLEET_TOOLCHAIN_DIR/bin/pulumi-resource-command-$cmd_version"
    if build_from_proxy command-provider \
      "${COMMAND_PROVIDER_MODULE}@${COMMAND_PROVIDER_REF:-v$cmd_version}" \
      "${COMMAND_PROVIDER_MODULE}/cmd/pulumi-resource-command" \
      "-X ${COMMAND_PROVIDER_MODULE}/pkg/version.Version=$cmd_version" \
      "$provider_bin"; then
      pulumi plugin install resource command "$cmd_version" --file "$provider_bin" >/dev/null
    fi
  fi
fi

# The dynamic-resource launcher comes from this checkout's node_modules (env.sh puts it on PATH); a
# link that older versions of this script left in the shared cache would point at another checkout.
rm -f "$FLEET_TOOLCHAIN_DIR/bin/pulumi-resource-pulumi-nodejs"
command -v pulumi-resource-pulumi-nodejs >/dev/null 2>&1 ||
  { log "pulumi-resource-pulumi-nodejs is not in $repo/node_modules/@pulumi/pulumi: run npm ci"; exit 1; }

log "pulumi $(pulumi version) at $(command -v pulumi)"
if command -v pulumi-language-nodejs >/dev/null 2>&1; then
  log "language host: $(command -v pulumi-language-nodejs)"
else
  log "language host: pulumi-language-nodejs is not available here; programs run through the Automation API's in-process language runtime (test/automation.ts)"
fi
log "plugins (pulumi plugin ls):"
pulumi plugin ls 2>&1 | sed 's/^/[pulumi]   /' >&2
