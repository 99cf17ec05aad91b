#!/usr/bin/env bash
# Run test programs: KIND then the programs. The independent ones run PE_TEST_JOBS at a time
# (default: the number of CPUs; each daemon a test starts takes port 0 and a data_dir of its own),
# then the serial ones below one after another, alone on the machine. Each program's output is
# captured and printed whole when it ends, with how long it ran, so no two interleave. Ends with
# the failed programs' names and "KIND: N passed, N failed" (CI reads it); exits 1 if any failed.
set -u
kind=$1; shift
jobs=${PE_TEST_JOBS:-$(nproc 2>/dev/null || echo 1)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run-tests.sh: PE_TEST_JOBS must be a positive integer" >&2; exit 2; }

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
	test_worker_nice     # worker priority against a busy machine
)

is_serial() {
	local name=${1##*/} s
	for s in "${serial_names[@]}"; do [ "$name" = "$s" ] && return 0; done
	return 1
}

out=$(mktemp -d "${TMPDIR:-/tmp}/posenc-run-tests.XXXXXX") || exit 2
pass=0; fail=0; failed=()
declare -A running=() logs=() began=() # pid -> program, its output, when it started

# Print a finished program's output and how long it ran, and count it.
finish() {
	local t=$1 st=$2 log=$3 t0=$4
	cat "$log"
	rm -f "$log"
	local us=$(( ${EPOCHREALTIME//[.,]/} - ${t0//[.,]/} ))
	printf '%s: %s: %d.%d s\n' "$kind" "$t" $((us / 1000000)) $((us / 100000 % 10))
	if [ "$st" -eq 0 ]; then
		pass=$((pass + 1))
	else
		fail=$((fail + 1)); failed+=("$t")
		printf '%s: %s exited with status %d\n' "$kind" "$t" "$st"
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

# N programs at once each get about 1/N of the CPUs: check's per-test time limits (hang guards,
# not measurements) stretch by as much, unless the caller set the multiplier.
export CK_TIMEOUT_MULTIPLIER=${CK_TIMEOUT_MULTIPLIER:-$jobs}

serial=(); n=0
for t in "$@"; do
	if is_serial "$t"; then serial+=("$t"); continue; fi
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

[ ${#failed[@]} -eq 0 ] || printf '%s: FAILED: %s\n' "$kind" "${failed[*]}"
printf '%s: %d passed, %d failed\n' "$kind" "$pass" "$fail"
[ "$fail" -eq 0 ]
