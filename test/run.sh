#!/usr/bin/env bash
# The project's entry points (package.json scripts; the README's two commands):
#   npm test        set up everything on this machine, then run every test
#   npm run demo    set up everything, bring up the simulated Sparks and run the deployment on them
#   npm run cli     set up everything, then run the CLI-path suite (test/cli; skipped, saying why,
#                   without pulumi-language-nodejs and the command and docker provider plugins)
# Setup is idempotent and cached: node modules, the Docker engine, the Pulumi toolchain, the images.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo"
mode="${1:-test}"

say() { printf '\n== %s\n' "$*"; }
elapsed() { printf '%ss' "$(($(date +%s) - $1))"; }

setup() {
  local t0
  t0=$(date +%s)
  say "node modules"
  # npm writes node_modules/.package-lock.json on install; older than the lock file means stale.
  if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
    npm ci --no-audit --no-fund --loglevel=error
  fi
  say "Docker engine"
  bash test/toolchain/docker.sh
  say "Debian packages the tests use"
  bash test/toolchain/packages.sh
  say "Pulumi toolchain"
  local t1
  t1=$(date +%s)
  bash test/toolchain/pulumi.sh
  echo "toolchain ready in $(elapsed "$t1")"
  # shellcheck source=test/toolchain/env.sh
  source test/toolchain/env.sh
  echo "setup done in $(elapsed "$t0")"
}

passed=0
failed=0
skipped=0
# count_vitest FILE: adds the counts of a vitest JSON report to the totals.
count_vitest() {
  local counts p f s
  counts=$(node -e 'const r=require(process.argv[1]);console.log(r.numPassedTests, r.numFailedTests + (r.numRuntimeErrors||0), (r.numPendingTests||0) + (r.numTodoTests||0))' "$1" 2>/dev/null || echo "0 1 0")
  read -r p f s <<<"$counts"
  passed=$((passed + p))
  failed=$((failed + f))
  skipped=$((skipped + s))
}
# count_plain LOG: adds the counts of a closing line "N passed, M failed".
count_plain() {
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed$' "$1" | tail -n 1 || true)
  if [ -z "$line" ]; then
    failed=$((failed + 1))
    return
  fi
  passed=$((passed + $(echo "$line" | cut -d' ' -f1)))
  failed=$((failed + $(echo "$line" | cut -d' ' -f3)))
}

run_tests() {
  local reports status=0
  reports="$(mktemp -d)"
  say "typecheck"
  if npx tsc --noEmit -p tsconfig.json; then passed=$((passed + 1)); else failed=$((failed + 1)); status=1; fi

  say "unit tests"
  npx vitest run --config test/vitest.config.ts --reporter=default --reporter=json --outputFile.json="$reports/unit.json" || status=1
  count_vitest "$reports/unit.json"

  say "simulated cluster self-test"
  bash test/sim/selftest.sh 2>&1 | tee "$reports/sim.log" || status=1
  count_plain "$reports/sim.log"

  say "end-to-end through the Pulumi engine"
  npx vitest run --config test/vitest.e2e.config.ts --reporter=default --reporter=json --outputFile.json="$reports/e2e.json" || status=1
  count_vitest "$reports/e2e.json"

  say "CLI path (pulumi CLI, language host, command and docker providers)"
  npx vitest run --config test/vitest.cli.config.ts --reporter=default --reporter=json --outputFile.json="$reports/cli.json" 2>&1 | tee "$reports/cli.log" || status=1
  count_vitest "$reports/cli.json"
  local cli_skipped
  cli_skipped=$(grep -m 1 -o 'CLI suite skipped: .*' "$reports/cli.log" || true)

  rm -rf "$reports"
  say "summary"
  if [ "$skipped" -gt 0 ]; then echo "$skipped skipped"; fi
  if [ -n "$cli_skipped" ]; then echo "$cli_skipped"; fi
  echo "$passed passed, $failed failed"
  [ "$status" = 0 ] && [ "$failed" = 0 ]
}

case "$mode" in
  test)
    setup
    run_tests
    ;;
  demo)
    setup
    bash test/demo.sh "${@:2}"
    ;;
  e2e)
    setup
    npx vitest run --config test/vitest.e2e.config.ts
    ;;
  cli)
    setup
    npx vitest run --config test/vitest.cli.config.ts
    ;;
  bench)
    setup
    bash test/bench/run.sh "${@:2}"
    ;;
  setup)
    setup
    ;;
  *)
    echo "usage: $0 test|demo|e2e|cli|bench|setup" >&2
    exit 2
    ;;
esac
