#!/usr/bin/env bash
# The read of one node for every view the stack has of it (each service placed on the node, or the
# first service's view of a node no service runs on): each view's read-only program
# (components/observer.ts observeProgram) in a subshell of its own, its output after a line naming
# the view, so that one SSH session reads a node whatever the number of services sharing it.
# Changes nothing on the host.
# Inputs: VIEWS (array: the programs, in the order the observer numbers the views).
for view in "${!VIEWS[@]}"; do
  printf '\n@@ vllm-fleet view %s\n' "$view"
  (eval "${VIEWS[$view]}") || exit $?
done
