#!/usr/bin/env bash
# Run test programs: run-tests.sh KIND PROGRAM... [KIND: PROGRAM...]... ("unit a b e2e: c d").
# Every program of every kind joins one pool: the independent ones run PE_TEST_JOBS at a time
# (default: the number of CPUs; each daemon a test starts takes port 0 and a data_dir of its own),
# the longest first, with no barrier between kinds; then the serial ones below one after another,
# alone on the machine. Each program's output is captured and printed whole when it ends, with how
# long it ran, so no two interleave. Ends with each kind's failed programs' names and
# "KIND: N passed, N failed" (CI reads it); exits 1 if any failed.
#
# Longest first: a program's expected time is its time in the last run, kept in $PE_TEST_TIMES
# (make: $(BUILD)/test-times, rewritten after each run), else the committed figure in
# tests/tools/test-times, else nothing (it runs after the known ones, in the order given). With two
# CPUs a long program started last would run on alone while the other CPU idles.
set -u
jobs=${PE_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run-tests.sh: PE_TEST_JOBS must be a positive integer" >&2; exit 2; }
[ $# -ge 1 ] || { echo "usage: run-tests.sh KIND PROGRAM... [KIND: PROGRAM...]..." >&2; exit 2; }
times_file=${PE_TEST_TIMES:-}
committed_times=$(dirname "$0")/test-times

# Serial: they measure the daemon's memory, time its threads against the scheduler, give a job
# one second, or hold hundreds of connections or large bodies; another test's load would make them
# flaky or starve it.
serial_names=(
	test_abandon         # RSS after abandoned big answers
	test_bodybudget      # hundreds of MiB of bodies in flight, RSS
	test_bounded         # job_timeout 1 s: the table served right after must be computed within it
	test_connlimit       # fills max_connections; a refusal must come at once
	test_idlerss         # idle RSS against the cache gauge
	test_learned_similarity # job_timeout 1 s: a small table must be read within it
	test_membudget       # RSS under many slow readers
	test_multipart_hostile # many 3 MiB forms held at once: peak RSS against the budget
	test_memtrim         # RSS given back after eviction
	test_overload        # many concurrent cold requests on one worker
	test_reserve_attack  # the HTTP threads' reserve under load, RSS
	test_sched_slice     # scheduler slices of the daemon's threads
	test_sigterm         # SIGTERM under load
	test_slowloris       # hundreds of trickling connections
	test_slow_readers    # paced readers of large answers against the connection timeout
	test_warm            # the warm reserve's filler runs only on an idle CPU
	test_worker_nice     # worker priority against a busy machine
)

is_serial() {
	local name=${1##*/} s
	for s in "${serial_names[@]}"; do [ "$name" = "$s" ] && return 0; done
	return 1
}

# The arguments: a bare first KIND, then programs, "KIND:" switching the kind of those after it.
kinds=(); progs=()
declare -A kind_of=()
add_kind() { local k; for k in "${kinds[@]}"; do [ "$k" = "$1" ] && return; done; kinds+=("$1"); }
kind=$1; shift; add_kind "$kind"
for a in "$@"; do
	case $a in
	*:) kind=${a%:}; add_kind "$kind" ;;
	*) progs+=("$a"); kind_of[$a]=$kind ;;
	esac
done

# Expected tenths of a second per program name: the committed figures, then the last run's.
declare -A est=() took=()
read_times() {
	local name s
	[ -r "$1" ] || return 0
	while read -r name s _; do
		[[ $name != \#* && $s =~ ^([0-9]+)(\.([0-9]))?[0-9]*$ ]] || continue
		est[$name]=$((10#${BASH_REMATCH[1]} * 10 + 10#${BASH_REMATCH[3]:-0}))
	done <"$1"
}
read_times "$committed_times"
[ -n "$times_file" ] && read_times "$times_file"

# The independent programs, the longest expected first (ties and unknowns in the order given).
order=(); serial=(); i=0
while IFS=$'\t' read -r _ _ t; do order+=("$t"); done < <(
	for t in "${progs[@]}"; do
		i=$((i + 1))
		if is_serial "$t"; then continue; fi
		printf '%d\t%d\t%s\n' "${est[${t##*/}]:-0}" "$i" "$t"
	done | sort -t $'\t' -k1,1nr -k2,2n)
for t in "${progs[@]}"; do is_serial "$t" && serial+=("$t"); done

out=$(mktemp -d "${TMPDIR:-/tmp}/posenc-run-tests.XXXXXX") || exit 2
# The PostgreSQL tests copy one initdb'd cluster made under it (support/pe_pg.h), which the
# cluster's owner (postgres, when run as root) must reach.
chmod 711 "$out" && export PE_PG_TEMPLATE=$out/pg-template
declare -A pass=() fail=() failed=()
for k in "${kinds[@]}"; do pass[$k]=0; fail[$k]=0; failed[$k]=; done
declare -A running=() logs=() began=() # pid -> program, its output, when it started

# Print a finished program's output and how long it ran, and count it under its kind.
finish() {
	local t=$1 st=$2 log=$3 t0=$4 k=${kind_of[$1]}
	cat "$log"
	rm -f "$log"
	local us=$(( ${EPOCHREALTIME//[.,]/} - ${t0//[.,]/} ))
	printf '%s: %s: %d.%d s\n' "$k" "$t" $((us / 1000000)) $((us / 100000 % 10))
	took[${t##*/}]=$((us / 1000000)).$((us / 100000 % 10))
	if [ "$st" -eq 0 ]; then
		pass[$k]=$((pass[$k] + 1))
	else
		fail[$k]=$((fail[$k] + 1)); failed[$k]+=" $t"
		printf '%s: %s exited with status %d\n' "$k" "$t" "$st"
	fi
}

# Wait for one of the running programs to end.
reap() {
	local pid st
	wait -n -p pid "${!running[@]}"; st=$?
	[ -n "${pid:-}" ] || return 0
	finish "${running[$pid]}" "$st" "${logs[$pid]}" "${began[$pid]}"
	unset "running[$pid]" "logs[$pid]" "began[$pid]"
}

stop() {
	local pid
	for pid in "${!running[@]}"; do kill -TERM "$pid" 2>/dev/null; done
	wait
	rm -rf "$out"
	exit 130
}
trap stop INT TERM

# The times of this run replace those of the programs it ran; the others' are kept.
save_times() {
	local name s tmp
	[ -n "$times_file" ] && [ ${#took[@]} -gt 0 ] || return 0
	if [ -r "$times_file" ]; then
		while read -r name s _; do
			[[ -n $name && $name != \#* && -z ${took[$name]+x} ]] && took[$name]=$s
		done <"$times_file"
	fi
	tmp=$times_file.$$
	for name in "${!took[@]}"; do printf '%s %s\n' "$name" "${took[$name]}"; done | sort >"$tmp" &&
		mv "$tmp" "$times_file" || rm -f "$tmp"
}

# N programs at once each get about 1/N of the CPUs: check's per-test time limits (hang guards,
# not measurements) stretch by as much, unless the caller set the multiplier.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-$jobs}

n=0
for t in "${order[@]}"; do
	while [ "${#running[@]}" -ge "$jobs" ]; do reap; done
	n=$((n + 1))
	"$t" >"$out/$n.log" 2>&1 &
	running[$!]=$t; logs[$!]=$out/$n.log; began[$!]=$EPOCHREALTIME
done
while [ "${#running[@]}" -gt 0 ]; do reap; done

for t in "${serial[@]}"; do
	t0=$EPOCHREALTIME
	"$t" >"$out/serial.log" 2>&1
	finish "$t" $? "$out/serial.log" "$t0"
done
rm -rf "$out"
save_times

total=0
for k in "${kinds[@]}"; do
	[ -z "${failed[$k]}" ] || printf '%s: FAILED:%s\n' "$k" "${failed[$k]}"
	total=$((total + fail[$k]))
done
for k in "${kinds[@]}"; do printf '%s: %d passed, %d failed\n' "$k" "${pass[$k]}" "${fail[$k]}"; done
[ "$total" -eq 0 ]
