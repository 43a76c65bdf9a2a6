#!/usr/bin/env bash
# Runs two shell commands side by side and fails if either fails, naming it:
#
#   scripts/beside.sh "BACKGROUND" "FOREGROUND"
#
# `make demo` runs the model download (network time) beside the builds (CPU time), which a
# fresh 2-core machine would otherwise run one after the other. An interrupt stops both.
set -uo pipefail
if [ $# -ne 2 ]; then
  echo "usage: scripts/beside.sh BACKGROUND FOREGROUND" >&2
  exit 2
fi

bash -c "$1" &
background=$!
trap 'kill "$background" 2>/dev/null; exit 130' INT TERM

bash -c "$2"
foreground_status=$?
wait "$background"
background_status=$?
trap - INT TERM

if [ "$background_status" -ne 0 ]; then
  echo "beside.sh: \`$1\` failed (exit $background_status)" >&2
fi
if [ "$foreground_status" -ne 0 ]; then
  echo "beside.sh: \`$2\` failed (exit $foreground_status)" >&2
fi
[ "$background_status" -eq 0 ] && [ "$foreground_status" -eq 0 ]
