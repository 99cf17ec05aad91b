#!/usr/bin/env bash
# A/B of two posencd binaries on the small requests, for "no row worse than before" checks between
# commits: both daemons run at once (--workers 2, 1 GiB cache, a data_dir each), and wrk alternates
# between them, ROUNDS times: a cached 16x16 JSON hit (-c64, 5 s) and distinct cold 16x16 misses
# (tests/bench/cold.lua, -c16, 3 s). Prints each run's CPU-us per request (the daemon's utime+stime
# from /proc around the run) and requests/s, then the medians and ranges. ENV_A / ENV_B add
# environment to a daemon (e.g. ENV_A=GLIBC_TUNABLES=glibc.malloc.tcache_count=32 with A = B).
# Usage: tests/tools/ab-builds.sh POSENCD_A POSENCD_B [ROUNDS]   (loopback only; needs wrk, curl)
set -u
A=$1 B=$2 ROUNDS=${3:-5}
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ab-builds.XXXXXX")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT

. "$here/tests/tools/ab-daemon.sh"

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# run NAME KIND ROUND: one wrk run; prints "NAME KIND CPU-us/req req/s".
run() {
	local pid_var=PID_$1 port_var=PORT_$1 c0 c1 out
	local pid=${!pid_var} url=http://127.0.0.1:${!port_var}
	c0=$(cpu_ticks "$pid")
	if [ "$2" = hit ]; then
		out=$(wrk -t1 -c64 -d5s "$url/v1/sinusoidal?len=16&dim=16")
	else
		out=$(PE_COLD_BASE=$((1000000000 + $3 * 10000000)) wrk -t1 -c16 -d3s -s "$here/tests/bench/cold.lua" "$url")
	fi
	c1=$(cpu_ticks "$pid")
	echo "$out" | awk -v n="$1" -v k="$2" -v c=$((c1 - c0)) -v t="$(getconf CLK_TCK)" \
		'/requests in/ {r = $1} /Requests\/sec/ {s = $2} END {printf "%s %s %.1f %s\n", n, k, c / t * 1e6 / r, s}'
}

ab_start a "$A" "${ENV_A:-}" --cache-bytes 1Gi
ab_start b "$B" "${ENV_B:-}" --cache-bytes 1Gi
curl -s "http://127.0.0.1:$PORT_a/v1/sinusoidal?len=16&dim=16" >/dev/null
curl -s "http://127.0.0.1:$PORT_b/v1/sinusoidal?len=16&dim=16" >/dev/null
echo "a: $A${ENV_A:+ ($ENV_A)}; b: $B${ENV_B:+ ($ENV_B)}; $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq "$ROUNDS"); do
	for k in hit miss; do run a $k "$r"; run b $k "$r"; done
done | tee "$tmp/runs"
for w in a b; do
	for k in hit miss; do
		awk -v w=$w -v k=$k '$1 == w && $2 == k {print $3, $4}' "$tmp/runs" | sort -n | awk -v w=$w -v k=$k \
			'{c[NR] = $1; s[NR] = $2} END {printf "%s %s: %s CPU-us/req median (%s-%s; that run %s req/s)\n", w, k, c[int((NR + 1) / 2)], c[1], c[NR], s[int((NR + 1) / 2)]}'
	done
done
