#!/usr/bin/env bash
# Functions read with the programs of a host command (shell.ts programsOnStdin), and by peer-run.sh.
# `fleet_run <operation>` runs that operation's program and, when it fails, ends its standard
# error with one line saying which step failed, where, and why:
#   vllm-fleet: <resource> (<operation>) on node <node> (<user>@<host>:<port>): <reason>
# The reason is the last meaningful line the program wrote on standard error (not blank, not a
# `set -x` trace, not a traceback's frame, not a generic trailer such as Docker's "See 'docker run
# --help'." unless nothing else is there), else the command that failed, else its exit status. components/stepFailure.ts reads the same lines the same
# way (the builtin runner, when the node could not say it itself: ssh failed); test/unit keeps the
# two in step.
# Inputs: FLEET_CREATE, FLEET_UPDATE, FLEET_DELETE (the programs); FLEET_STEP (the resource; empty:
# no line) and FLEET_NODE (`<node> (<user>@<host>:<port>)`).

# Marks a line the program's ERR trap writes (the command that failed); never passed on.
FLEET_FAILED_MARK='vllm-fleet-failed-command: '

# fleet_filter [prefix]: copies standard input to standard error (each line after `prefix`) and
# notes, in fleet_seen_*, the last step line (withheld: whoever reports the failure prints it, once),
# the command that failed, and, among the last 100 lines, the last meaningful one and the last one
# that is not a generic trailer either. Call it as the last element of a pipeline under
# `shopt -s lastpipe`, or with its input redirected, so that the notes stay in this shell.
fleet_filter() {
  local prefix=${1:-} line body count=0 index
  local -a tail=()
  fleet_seen_step="" fleet_seen_any="" fleet_seen_reason="" fleet_seen_command=""
  # Per line only what must be: the lines are judged once, at the end.
  while IFS= read -r line || [ -n "$line" ]; do
    case "$line" in
      "$FLEET_FAILED_MARK"*)
        fleet_seen_command=${line#"$FLEET_FAILED_MARK"}
        continue
        ;;
      "vllm-fleet: "*" ("*") on node "*": "*)
        fleet_seen_step=$line
        continue
        ;;
    esac
    printf '%s%s\n' "$prefix" "$line" >&2
    tail[count % 100]=$line
    count=$((count + 1))
  done
  for ((index = count - 1; index >= 0 && index >= count - 100; index--)); do
    line=${tail[index % 100]}
    # What a terminal shows of the line: its end of line dropped, and only the last of what a
    # progress bar rewrote.
    line=${line%$'\r'}
    line=${line##*$'\r'}
    if [[ $line =~ ^[[:space:]]*$ ]]; then
      continue
    fi
    # Not a reason: a `set -x` trace (PS4 `+ `, repeated per level); a traceback's head, frames and
    # code (indented), after what vLLM puts before a process's lines (`(EngineCore_DP0 pid=300) `,
    # `[rank0]: `).
    body=$line
    if [[ $body =~ ^((\([^\)]*pid=[0-9]+[^\)]*\)\ |\[rank[0-9]+\]:\ )+)(.*)$ ]]; then
      body=${BASH_REMATCH[3]}
    fi
    if [[ $line =~ ^\++\  || $body =~ ^Traceback\ \(most\ recent\ call\ last\): || $body =~ ^[[:space:]] ]]; then
      continue
    fi
    fleet_seen_any=${fleet_seen_any:-$line}
    # Generic trailers, a reason only when nothing else is there: Docker's pointer to --help,
    # rsync's pointer to its earlier errors, vLLM's pointer to the root cause above it, ssh's note
    # that a connection closed.
    if [[ $body =~ ^See\ \'.*--help\'\.?$ || $body =~ ^Run\ \'.*--help\'\ for\ more\ information || $body =~ \(see\ previous\ errors\) ||
      $body =~ See\ root\ cause\ above || $body =~ ^Connection\ to\ .*\ closed\.?$ ]]; then
      continue
    fi
    fleet_seen_reason=$line
    break
  done
}

# fleet_reason <status> [kind]: the reason fleet_filter's notes give for a failure with that exit
# status (kind `ssh`: the session to the node failed; `stopped`: it was closed after the other side
# of the step had failed).
fleet_reason() {
  local reason=${fleet_seen_reason:-$fleet_seen_any} id
  case "${2:-}" in
    ssh) reason="ssh failed (connection or authentication): ${reason:-no answer}" ;;
    stopped) reason="stopped after the other side had failed${reason:+: $reason}" ;;
    *)
      if [ -z "$reason" ] && [ -n "$fleet_seen_command" ]; then
        reason="\`${fleet_seen_command}\` exited $1"
      fi
      reason=${reason:-exited $1 with no reason on standard error}
      ;;
  esac
  # A container's id as Docker shows it elsewhere (docker ps): its first 12 characters. Image
  # digests (sha256:..., @sha256:...) are left whole.
  while [[ $reason =~ (^|[^0-9a-f:@])([0-9a-f]{64})($|[^0-9a-f]) ]]; do
    id=${BASH_REMATCH[2]}
    reason=${reason/"$id"/"${id:0:12}"}
  done
  if [ "${#reason}" -gt 500 ]; then
    reason="${reason:0:200} … ${reason: -280}"
  fi
  printf '%s' "$reason"
}

# fleet_step_line <operation> <node> <status> [kind]: the one line of a failed step.
fleet_step_line() {
  printf 'vllm-fleet: %s (%s) on node %s: %s\n' "$FLEET_STEP" "$1" "$2" "$(fleet_reason "$3" "${4:-}")"
}

# fleet_run <operation>: runs the program of `operation` in a subshell of its own (its traps and
# `exit` stay its own), its standard output as it is and its standard error through fleet_filter;
# when it fails, ends standard error with its step line. Returns the program's status.
fleet_run() {
  local operation=$1 program status
  case "$operation" in
    create) program=$FLEET_CREATE ;;
    update) program=$FLEET_UPDATE ;;
    delete) program=$FLEET_DELETE ;;
    *)
      echo "fleet_run: no operation $operation" >&2
      return 2
      ;;
  esac
  shopt -s lastpipe
  exec 3>&1
  # The ERR trap notes the command that failed: set -E, inside the program's functions too; only at
  # the program's own level, not in its subshells or command substitutions, whose standard error the
  # program may be capturing (`out="$( { ...; } 2>&1 )"`): a failure there that ends the program
  # fails a command at its level too. BASH_COMMAND is the command as written, unexpanded (a
  # variable holding a secret shows as its name); its first line only.
  (
    shopt -u lastpipe
    set -E
    fleet_level=$BASH_SUBSHELL
    fleet_newline=$'\n'
    # shellcheck disable=SC2016
    trap '[ "$BASH_SUBSHELL" != "$fleet_level" ] || printf "%s%s\n" "$FLEET_FAILED_MARK" "${BASH_COMMAND%%"$fleet_newline"*}" >&2' ERR
    eval "$program"
  ) 2>&1 1>&3 3>&- | fleet_filter ""
  status=${PIPESTATUS[0]}
  exec 3>&-
  shopt -u lastpipe
  if [ "$status" != 0 ] && [ -n "${FLEET_STEP:-}" ]; then
    fleet_step_line "$operation" "$FLEET_NODE" "$status" >&2
  elif [ -n "$fleet_seen_step" ]; then
    printf '%s\n' "$fleet_seen_step" >&2
  fi
  return "$status"
}
