#!/usr/bin/env bash
# Removes one container in whatever state it is (running, paused, restarting, exited, dead, being
# removed, or gone: nothing to do). Inputs: NAME; runs after docker-state.sh.
set -euo pipefail

remove_container "$NAME"
