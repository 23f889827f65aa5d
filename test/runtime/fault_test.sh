#!/usr/bin/env bash
# Runs fault-injection under mpirun and checks that the whole job ends,
# non-zero, within a bound, and that the output names the cause.
#   fault_test.sh BINARY RANKS FAULT FAULTY_RANK BOUND_SECONDS PATTERN [mpirun args...]
set -uo pipefail
binary=$1 ranks=$2 fault=$3 faulty=$4 bound=$5 pattern=$6
shift 6
log=$(mktemp)
trap 'rm -f "$log"' EXIT
start=$(date +%s)
# The outer timeout only guards the test itself against a hang.
timeout -k 5 $((bound + 30)) "$@" -np "$ranks" "$binary" --fault "$fault" --rank "$faulty" --at-step 3 >"$log" 2>&1
status=$?
elapsed=$(( $(date +%s) - start ))
cat "$log"
echo "-- exit status $status after ${elapsed}s (bound ${bound}s)"
if [ "$status" -eq 0 ]; then echo "FAIL: the job exited 0"; exit 1; fi
if [ "$status" -eq 124 ] || [ "$elapsed" -gt "$bound" ]; then echo "FAIL: the job took too long"; exit 1; fi
if ! grep -Eq "$pattern" "$log"; then echo "FAIL: no line matches /$pattern/"; exit 1; fi
if pgrep -f "$binary --fault $fault" >/dev/null; then echo "FAIL: ranks are still running"; exit 1; fi
echo "PASS"
