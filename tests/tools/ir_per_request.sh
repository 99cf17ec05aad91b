#!/usr/bin/env bash
# Instructions per request of a posencd, counted by callgrind (not timed: the count does not move
# with the machine's load). For each kind of small request it sends WARM requests, zeroes the
# counters, sends N on one keep-alive connection, and prints the instructions of the whole process
# (every thread) divided by N. Not part of make test; for comparing two builds by hand:
#   tests/tools/ir_per_request.sh [POSENCD] [N]      (default build/posencd, 200)
#   tests/tools/ir_per_request.sh /work/base/build/bench/o3/posencd
# IR_KEEP=PREFIX keeps each kind's callgrind profile as PREFIX.hit, .miss, .404, .400
# (callgrind_annotate PREFIX.hit).
# The daemon runs as the bench runs it (--workers 2, --log-level info, its log to /dev/null).
set -euo pipefail
POSENCD=${1:-build/posencd}
N=${2:-200}
WARM=20
command -v valgrind >/dev/null && command -v callgrind_control >/dev/null && command -v curl >/dev/null ||
	{ echo "ir_per_request: needs valgrind (callgrind_control) and curl" >&2; exit 2; }
TMP=$(mktemp -d)
PID=
cleanup() {
	[ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
	rm -rf "$TMP"
}
trap cleanup EXIT

valgrind --tool=callgrind --callgrind-out-file="$TMP/cg.%p" "$POSENCD" --port 0 --bind 127.0.0.1 \
	--log-level info --workers 2 --data-dir "$TMP/data" >"$TMP/log" 2>"$TMP/err" &
PID=$!
port=
for _ in $(seq 600); do
	port=$(grep -o '"port":[0-9]*' "$TMP/log" 2>/dev/null | head -1 | cut -d: -f2 || true)
	[ -n "$port" ] && break
	sleep 0.1
done
[ -n "$port" ] || { echo "ir_per_request: posencd did not start: $(cat "$TMP/err")" >&2; exit 1; }
URL=http://127.0.0.1:$port

# send FIRST COUNT STATUS TEMPLATE: COUNT requests on one connection, @ in TEMPLATE replaced by
# FIRST, FIRST+1, ...; every answer must have STATUS.
send() {
	local first=$1 count=$2 want=$3 tpl=$4 i
	for ((i = first; i < first + count; i++)); do
		printf 'url = "%s%s"\noutput = "/dev/null"\n' "$URL" "${tpl//@/$i}"
	done >"$TMP/curl.cfg"
	curl -s -K "$TMP/curl.cfg" -w '%{http_code}\n' >"$TMP/codes"
	if grep -qv "^$want\$" "$TMP/codes"; then
		echo "ir_per_request: $tpl answered $(sort "$TMP/codes" | uniq -c | tr '\n' ' '), not $want" >&2
		exit 1
	fi
}

# measure NAME STATUS TEMPLATE
measure() {
	local name=$1 want=$2 tpl=$3 ir
	send 1000000 "$WARM" "$want" "$tpl"
	callgrind_control -z "$PID" >/dev/null 2>&1
	send 2000000 "$N" "$want" "$tpl"
	rm -f "$TMP"/cg.*
	callgrind_control -d "$PID" >/dev/null 2>&1
	cat "$TMP"/cg.* >"$TMP/profile"
	[ -z "${IR_KEEP:-}" ] || cp "$TMP/profile" "$IR_KEEP.${name%% *}"
	ir=$(awk '/^totals:/ {s += $2} END {print s}' "$TMP/profile")
	zero=$(callgrind_annotate --threshold=100 --inclusive=no --auto=no "$TMP/profile" 2>/dev/null |
		awk '/memset/ {gsub(",", "", $1); s += $1} END {print s + 0}')
	printf '%-34s %10.0f %10.0f\n' "$name" "$(echo "$ir / $N" | bc -l)" "$(echo "$zero / $N" | bc -l)"
}

# memset: its share of the whole, almost all of it libmicrohttpd clearing the connection's pool
# (callgrind counts a rep stosb one instruction per byte, so it weighs far more here than in time).
printf '%-34s %10s %10s\n' "request ($N each, $(basename "$(dirname "$POSENCD")")/$(basename "$POSENCD"))" "Ir/request" "memset"
measure "hit  GET sinusoidal 16x16 JSON" 200 "/v1/sinusoidal?len=16&dim=16"
measure "miss GET sinusoidal 16x16 JSON" 200 "/v1/sinusoidal?len=16&dim=16&offset=@"
measure "404  GET /v1/nosuch" 404 "/v1/nosuch?x=@"
measure "400  GET sinusoidal unknown param" 400 "/v1/sinusoidal?len=16&dim=16&bogus=@"
