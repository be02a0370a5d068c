#!/usr/bin/env bash
# The phases of vLLM's start, read from its server log (infra/core/vllmPhases.ts holds the table and
# says where each line comes from in vLLM). Inputs: PHASE_PATTERNS (array: POSIX extended regular
# expressions), PHASE_TEXTS (array, the same length: the phase for each, `{n}` standing for the
# pattern's n-th group).
# Defines:
#   newest_phase   reads a log on standard input; prints the phase of its newest line that names
#                  one (a line a progress bar redrew after carriage returns counts by its pieces,
#                  the last first), or nothing. Always succeeds.
set -euo pipefail

# phase_of_line LINE: prints the phase LINE names (the first pattern that matches), or fails.
phase_of_line() {
  local line=$1 index group text
  for index in "${!PHASE_PATTERNS[@]}"; do
    if [[ $line =~ ${PHASE_PATTERNS[index]} ]]; then
      text=${PHASE_TEXTS[index]}
      for ((group = ${#BASH_REMATCH[@]} - 1; group >= 1; group--)); do
        text=${text//"{$group}"/"${BASH_REMATCH[group]}"}
      done
      printf '%s\n' "$text"
      return 0
    fi
  done
  return 1
}

newest_phase() {
  local -a lines pieces
  local index piece
  mapfile -t lines || true
  for ((index = ${#lines[@]} - 1; index >= 0; index--)); do
    IFS=$'\r' read -r -a pieces <<<"${lines[index]}" || true
    for ((piece = ${#pieces[@]} - 1; piece >= 0; piece--)); do
      if phase_of_line "${pieces[piece]}"; then
        return 0
      fi
    done
  done
  return 0
}
