#!/usr/bin/env bash
# The demo (npm run demo): for now it shows that the real Pulumi engine runs the program offline by
# previewing the `sim` stack. The deployment on the simulated Sparks arrives with the proving ground.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
# shellcheck source=test/toolchain/env.sh
source test/toolchain/env.sh
npx tsc -p tsconfig.json
node bin/test/demo.js
