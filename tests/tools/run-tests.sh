#!/usr/bin/env bash
# Run test programs one after another, print each one's check summary and a closing
# "N passed, N failed" line; exit non-zero when any program failed.
set -u
kind=$1; shift
pass=0; fail=0; failed=()
for t in "$@"; do
	if "$t"; then pass=$((pass + 1)); else fail=$((fail + 1)); failed+=("$t"); fi
done
[ ${#failed[@]} -eq 0 ] || printf '%s: FAILED: %s\n' "$kind" "${failed[*]}"
printf '%s: %d passed, %d failed\n' "$kind" "$pass" "$fail"
[ "$fail" -eq 0 ]
