#!/usr/bin/env bash
# A/B of posencd binaries on the cold 512x768 JSON table end to end (curl's time_total), the
# request of make bench's "cold JSON against jansson" rows: every daemon runs at once (--workers 2,
# a data_dir each), and the requests go round-robin over them, N rounds, a new offset each, with
# one jansson encode (build/bench/bench_kernels 1 json, when it is built) after each request, as
# the bench pairs them. On VMs the cost of memory new to a process moves from minute to minute;
# builds compared in separate runs took each other's weather, so only interleaved figures count.
#   fresh     daemons with a 1 GiB cache, which fills with memory new to them (the bench's fresh row)
#   evicting  daemons with the default 256 MiB cache filled first with twelve 24 MiB tables and
#             forty of these JSON tables, so every request evicts (the bench's cold-section row)
# Prints each request's time, then per binary the median, quartiles and largest.
# Usage: tests/tools/ab-cold-json.sh fresh|evicting N POSENCD...   (loopback only; needs curl)
set -u
MODE=$1 N=$2
shift 2
here=$(cd "$(dirname "$0")/../.." && pwd)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ab-cold-json.XXXXXX")
pids=()
trap 'kill "${pids[@]}" 2>/dev/null; wait 2>/dev/null; rm -rf "$tmp"' EXIT
case $MODE in
fresh) cache=(--cache-bytes 1Gi) ;;
evicting) cache=() ;;
*) echo "ab-cold-json: the mode is fresh or evicting, not '$MODE'" >&2; exit 2 ;;
esac
jansson=$here/build/bench/bench_kernels
[ -x "$jansson" ] || { echo "ab-cold-json: note: $jansson is not built (make bench builds it): no jansson runs between requests" >&2; jansson=; }

. "$here/tests/tools/ab-daemon.sh"

get() { curl -s -o /dev/null -w '%{time_total}' "http://127.0.0.1:$1/v1/sinusoidal?$2"; }

k=0
for bin in "$@"; do
	ab_start "$k" "$bin" "" "${cache[@]}"
	k=$((k + 1))
done
for ((i = 0; i < k; i++)); do
	port_var=PORT_$i
	if [ "$MODE" = evicting ]; then
		for r in $(seq 12); do get "${!port_var}" "len=8192&dim=768&format=bin&offset=$r" >/dev/null; done
		for r in $(seq 40); do get "${!port_var}" "len=512&dim=768&offset=$((500 + r))" >/dev/null; done
	fi
	get "${!port_var}" "len=512&dim=768&offset=899999999" >/dev/null # as the bench: one unrecorded
done
for r in $(seq "$N"); do
	for ((i = 0; i < k; i++)); do
		port_var=PORT_$i
		echo "$i $(get "${!port_var}" "len=512&dim=768&offset=$((1000 + r))")" | tee -a "$tmp/times"
		[ -n "$jansson" ] && "$jansson" 1 json >/dev/null
	done
done
i=0
for bin in "$@"; do
	awk -v i=$i '$1 == i {print $2 * 1000}' "$tmp/times" | sort -n |
		awk -v b="$bin" '{a[NR] = $1} END {printf "%s: median %.2f ms, quartiles %.2f-%.2f, largest %.2f (n=%d)\n", b,
			a[int((NR + 1) / 2)], a[int((NR + 3) / 4)], a[int((3 * NR + 3) / 4)], a[NR], NR}'
	i=$((i + 1))
done
