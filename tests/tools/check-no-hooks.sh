#!/usr/bin/env bash
# The shipped daemon carries no test hook: `strings` finds no POSENC_TEST_ in it (the gates of
# src/http/test_hooks.c are compiled only into the test build). The test build is checked to show
# them, so a strings that sees nothing cannot pass the check by accident.
#
# Usage: tests/tools/check-no-hooks.sh BUILD/posencd BUILD/posencd-hooks
set -uo pipefail
shipped=${1:?usage: $0 POSENCD POSENCD_HOOKS} hooks=${2:?usage: $0 POSENCD POSENCD_HOOKS}
for f in "$shipped" "$hooks"; do
	[ -f "$f" ] || { echo "check-no-hooks: FAIL: $f does not exist (make it first)"; exit 1; }
done
command -v strings >/dev/null || { echo "check-no-hooks: FAIL: strings (binutils) not found"; exit 1; }
found=$(strings -a "$shipped" | grep -o 'POSENC_TEST_[A-Z_]*' | sort -u)
if [ -n "$found" ]; then
	echo "check-no-hooks: FAIL: $shipped reads test hooks from its environment: $(echo $found)"
	echo "check-no-hooks: keep them under #ifdef PE_TEST_HOOKS (src/http/test_hooks.c)"
	exit 1
fi
if [ -z "$(strings -a "$hooks" | grep -o 'POSENC_TEST_[A-Z_]*')" ]; then
	echo "check-no-hooks: FAIL: $hooks shows no POSENC_TEST_ either: the check cannot tell the builds apart"
	exit 1
fi
echo "check-no-hooks: ok: $shipped has no POSENC_TEST_ string; $hooks has its gates"
