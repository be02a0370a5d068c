#!/usr/bin/env bash
# The demo (npm run demo): two simulated Sparks, then `pulumi up` of the `sim` stack through the
# real engine, then the endpoint and a completion it answers. The deployment stays up to be tried;
# `npm run demo -- down` destroys it and removes the simulated Sparks.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/toolchain/env.sh
source test/toolchain/env.sh
# `npm run demo -- --real` deploys the `sim-real` stack instead: REAL vLLM (its CPU build) on the
# same simulated Sparks (test/sim/real/README.md).
action=up real=""
for arg in "$@"; do
  case "$arg" in
    up | down) action="$arg" ;;
    --real) real="--real" ;;
    *)
      echo "usage: npm run demo [-- up|down] [-- --real]" >&2
      exit 2
      ;;
  esac
done
npx tsc -p tsconfig.json
case "$action" in
  up)
    bash test/sim/sim.sh up -n 2 -c sim $real
    node bin/test/demo.js up $real
    ;;
  down)
    if [ -f test/sim/.state/sim/cluster.json ]; then
      node bin/test/demo.js down
    fi
    bash test/sim/sim.sh down -c sim
    ;;
esac
