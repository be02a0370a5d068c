#!/usr/bin/env bash
# The benchmark of issue 6 (npm run bench [-- --runs K --nodes 2,4 --out DIR]): simulated Sparks,
# the real Pulumi engine, a report in bench-report/ (report.md, report.json, timeline-*.svg).
# Expects the setup of test/run.sh (node modules, Docker, the Pulumi toolchain). Removes only its
# own simulated clusters (bench<N>), also when it fails or is interrupted.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../.."
# shellcheck source=test/toolchain/env.sh
source test/toolchain/env.sh
npx tsc -p tsconfig.json
exec node bin/test/bench/bench.js "$@"
