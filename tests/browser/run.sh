#!/usr/bin/env bash
# Browser tests of the dashboard (tests/browser/*.test.mjs; PE_BROWSER_TESTS names a subset): Debian's Chromium driven by
# playwright-core (pinned in tests/package.json) against a real build/posencd on a free port.
#
# Needs the chromium package and the npm packages of tests/ (make deps installs both; make browser
# runs tests/tools/deps.sh browser first). Starts posencd on --port 0 --bind 127.0.0.1, reads the port from its JSON
# start line, runs node's built-in test runner (TAP), stops the daemon, and ends with one line
# "browser: N passed, N failed"; exits non-zero when a test failed or nothing ran. Screenshots and
# the daemon's log are written to build/browser/.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
out=$root/build/browser
daemon=${POSENCD:-$root/build/posencd}
chromium=${PE_CHROMIUM:-/usr/bin/chromium}

[ -x "$chromium" ] || { echo "browser: $chromium is missing (run 'make deps' as root)" >&2; exit 1; }
for tool in node npm; do
	command -v "$tool" >/dev/null || { echo "browser: $tool not found (run 'make deps' as root)" >&2; exit 1; }
done
pinned=$(node -p 'require("./tests/package.json").devDependencies["playwright-core"]')
installed=$(node -p 'try { require("./tests/node_modules/playwright-core/package.json").version } catch (e) { "" }')
if [ "$installed" != "$pinned" ]; then
	echo "browser: playwright-core $pinned is not in tests/node_modules (run 'make deps')" >&2
	exit 1
fi
[ -x "$daemon" ] || { echo "browser: $daemon not built (make build/posencd)" >&2; exit 1; }
daemon=$(realpath "$daemon") # it starts in a scratch directory

mkdir -p "$out"
rm -f "$out"/*.png
: >"$out/posencd.out" # truncated here, not in the background child: no stale start line
# The daemon runs in a scratch directory (its learned-table store, ./data by default, goes there).
work=$(mktemp -d)
(cd "$work" && exec "$daemon" --port 0 --bind 127.0.0.1) >"$out/posencd.out" 2>"$out/posencd.err" &
pid=$!
stop() {
	kill -TERM "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
	rm -rf "$work"
}
trap stop EXIT

port=
for _ in $(seq 1 200); do
	port=$(sed -n 's/.*"event":"start".*"port":\([0-9][0-9]*\).*/\1/p' "$out/posencd.out" | head -1)
	[ -n "$port" ] && break
	kill -0 "$pid" 2>/dev/null || { echo "browser: posencd exited:" >&2; cat "$out/posencd.err" >&2; exit 1; }
	sleep 0.05
done
[ -n "$port" ] || { echo "browser: posencd printed no start line" >&2; exit 1; }

export PE_BROWSER_ORIGIN="http://127.0.0.1:$port" PE_BROWSER_OUT="$out" PE_CHROMIUM="$chromium"
status=0
# The whole run is bounded (a wedged browser must not hold CI): 3 minutes, about 25 s expected.
timeout -k 5 180 node --test --test-reporter=tap ${PE_BROWSER_TESTS:-tests/browser/*.test.mjs} | tee "$out/tap.txt" || status=$?
stop
trap - EXIT

pass=$(sed -n 's/^# pass \([0-9]*\)$/\1/p' "$out/tap.txt" | tail -1)
fail=$(sed -n 's/^# fail \([0-9]*\)$/\1/p' "$out/tap.txt" | tail -1)
echo "browser: screenshots in build/browser/"
echo "browser: ${pass:-0} passed, ${fail:-0} failed"
if [ "$status" -ne 0 ] || [ "${fail:-0}" != 0 ] || [ "${pass:-0}" = 0 ]; then
	exit 1
fi
