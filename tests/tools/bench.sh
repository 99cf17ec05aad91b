#!/usr/bin/env bash
# `make bench`: posenc beside its anchors, measured in one run, printed as one Markdown table (also
# written to build/bench.md). For people and decisions: nothing here asserts a time, and `make test`
# never runs it.
#
# Every posenc figure stands next to an anchor measured in the same run, and the ratio is what
# counts (these machines are noisy). Figures are medians of BENCH_ROUNDS (default 5) runs or more;
# where two systems are compared their runs alternate A B A B, so drift hits both alike.
#   kernels  tests/bench/bench_kernels.c (posenc core via include/posenc/core.h) against memset and
#            jansson, alternating with tests/bench/bench_py.py (the seeds' NumPy / PyTorch code and
#            Hugging Face's RoPE, one thread) run by Debian's /usr/bin/python3
#   http     build/posencd against a real Debian nginx serving the same bytes as static files, both
#            driven by wrk on loopback; cold misses with tests/bench/cold.lua; single flight
#   memory   VmHWM / VmRSS of fresh posencd processes from /proc/<pid>/status
#   checks   tests/bench/bench_checks.c: request validation at dim 65536 (the O(1) frequency bound)
#            beside the O(dim) scan it replaced, in-process, and NumPy's dim/2 inverse frequencies
#   cli      the posenc CLI's whole process beside head, PyTorch, and (analysis/similarity) a
#            posencd computing the same table and NumPy
#   cold     cold tables beside hits of the same bytes and the CLI's CPU; faults, first byte by
#            size, cold JSON beside jansson (BENCH_ONLY=cold runs it alone)
# Knobs (environment): BENCH_ROUNDS, BENCH_WRK_SECONDS (5), BENCH_COLD_SECONDS (3),
# BENCH_NGINX_WORKERS (1), BENCH_SMALL_CONNS (64), BENCH_LARGE_CONNS (16), BENCH_COLD_CONNS (16),
# BENCH_MIXED_LARGE_Q / BENCH_MIXED_LARGE_CONNS (the mixed load's large tables: 512×768 JSON, 2);
# BENCH_SIM_LEN / BENCH_SIM_DIM (the CLI section's similarity table: 2048, 1024);
# BENCH_ONLY=cli, BENCH_ONLY=checks or BENCH_ONLY=small runs one section (see each); BENCH_PE_ARGS adds flags to the
# HTTP section's posencd (an A/B: BENCH_PE_ARGS='--inline-max-us 0' computes every miss on the pool);
# BENCH_TUNABLES (glibc.malloc.tcache_count=32): a GLIBC_TUNABLES to weigh: every posencd here runs on
# glibc's defaults, as shipped, and the HTTP section's small rows are also taken on a second posencd
# with it, beside them (docs/configuration.md, Allocator tuning).
# Raw outputs (wrk logs, samples, configs) stay in build/bench/ for a second look.
set -euo pipefail
cd "$(dirname "$0")/../.."

ROUNDS=${BENCH_ROUNDS:-5}
WRK_S=${BENCH_WRK_SECONDS:-5}
COLD_S=${BENCH_COLD_SECONDS:-3}
NGINX_WORKERS=${BENCH_NGINX_WORKERS:-1}
SMALL_C=${BENCH_SMALL_CONNS:-64}
LARGE_C=${BENCH_LARGE_CONNS:-16}
COLD_C=${BENCH_COLD_CONNS:-16}
WRK_T=1
PY=/usr/bin/python3
OUT=build/bench
SMALL_Q='len=16&dim=16'
TUNABLES=${BENCH_TUNABLES:-glibc.malloc.tcache_count=32}
LARGE_Q='len=512&dim=768&format=bin'
MIXED_LARGE_Q=${BENCH_MIXED_LARGE_Q:-'len=512&dim=768'}
MIXED_LARGE_C=${BENCH_MIXED_LARGE_CONNS:-2}
T_START=$(date +%s)
LOAD0=$(cut -d' ' -f1-3 /proc/loadavg)

log() { echo "bench: $*" >&2; }
die() { echo "bench: $*" >&2; exit 1; }

# ---------------------------------------------------------------- tools
missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx-light)
command -v wrk >/dev/null 2>&1 || missing+=(wrk)
command -v curl >/dev/null 2>&1 || missing+=(curl)
# the CLI section needs none of them (its similarity row skips its daemon without curl); checks neither
# the cold section needs curl only
[ "${BENCH_ONLY:-}" = cold ] && [ -n "$(command -v curl)" ] && missing=()
if [ ${#missing[@]} -gt 0 ] && [ "${BENCH_ONLY:-}" != cli ] && [ "${BENCH_ONLY:-}" != checks ]; then
	die "missing ${missing[*]}: run 'make deps' as root (make bench does)"
fi

# ---------------------------------------------------------------- binaries at -O3
# `make OPT=-O3 all` does not rebuild objects an earlier -O2 build left in build/ (make compares
# times, not flags), so check what the objects were compiled with (the DWARF producer string) and
# build a separate -O3 tree when build/ is not one.
BUILD=${BUILD:-build}
is_o3() { # (no early-exiting grep: with pipefail, strings' SIGPIPE would fail the test)
	local producer
	[ -f "$1" ] || return 1
	producer=$(strings -a "$1" | grep '^GNU C' || true)
	case "$producer" in *" -O3"*) return 0 ;; *) return 1 ;; esac
}
for o in src/core/sinusoidal.o src/tensor/json.o src/http/table.o src/daemon/main.o; do
	if ! is_o3 "$BUILD/obj/$o"; then
		log "$BUILD/obj/$o was not compiled with -O3: building $OUT/o3 instead"
		BUILD=$OUT/o3
		${MAKE:-make} -s --no-print-directory BUILD="$BUILD" OPT=-O3 all >&2
		break
	fi
done
mkdir -p "$OUT"
if [ -x "$BUILD/tests/bench/bench_kernels" ]; then # built by make bench with the Makefile's flags
	cp "$BUILD/tests/bench/bench_kernels" "$OUT/bench_kernels"
else
	cc -O3 -std=c11 -D_GNU_SOURCE -Iinclude -Isrc -Itests $(pkg-config --cflags jansson) -o "$OUT/bench_kernels" \
		tests/bench/bench_kernels.c "$BUILD/libposenc.a" $(pkg-config --libs jansson) \
		-lnettle -lpng -ldeflate -lsleef -lm
fi
if [ ! -x "$BUILD/tests/bench/bench_checks" ]; then # make bench builds it; a bare bench.sh may not have
	${MAKE:-make} -s --no-print-directory BUILD="$BUILD" OPT=-O3 "$BUILD/tests/bench/bench_checks" >&2 ||
		log "bench_checks did not build: its rows are skipped"
fi
if [ -x "$BUILD/tests/bench/bench_checks" ]; then cp "$BUILD/tests/bench/bench_checks" "$OUT/bench_checks"; fi
POSENCD=$BUILD/posencd
[ -x "$POSENCD" ] || die "$POSENCD is missing"

# ---------------------------------------------------------------- processes we start
PIDS=()
NGINX_PID=
cleanup() {
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	[ -n "$NGINX_PID" ] && kill "$NGINX_PID" 2>/dev/null || true
	wait 2>/dev/null || true
}
trap cleanup EXIT

# start_posencd NAME ARGS...: sets PD_PID and PD_URL (port 0: the daemon picks and logs it). It runs
# on glibc's defaults (GLIBC_TUNABLES empty), or with GLIBC_TUNABLES=$PD_TUNABLES when that is set.
start_posencd() {
	local name=$1
	shift
	rm -f "$OUT/$name.log"
	# Its log (an access-log line per request: hundreds of MB under wrk) is kept to its first 64 reads
	# (dd writes each as it comes); posencd ignores SIGPIPE, so once dd is gone its writes just fail.
	# Its stderr (errors, an abort's last words) goes whole to $name.err.
	GLIBC_TUNABLES=${PD_TUNABLES:-} "$POSENCD" --port 0 --bind 127.0.0.1 --log-level info "$@" > >(dd of="$OUT/$name.log" bs=64k count=64 status=none) \
		2>"$OUT/$name.err" &
	PD_PID=$!
	PIDS+=("$PD_PID")
	local port=
	for _ in $(seq 100); do
		port=$(grep -o '"port":[0-9]*' "$OUT/$name.log" 2>/dev/null | head -1 | cut -d: -f2 || true)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || die "posencd ($name) did not start: $(cat "$OUT/$name.log" "$OUT/$name.err")"
	PD_URL=http://127.0.0.1:$port
	PD_NAME=$name
}
# alive PID NAME: stop the bench with what is known when a posencd we started has died (a crash is
# a finding, not a figure).
alive() {
	kill -0 "$1" 2>/dev/null && return 0
	local st=0
	wait "$1" 2>/dev/null || st=$?
	die "posencd ($2) died during the bench: exit status $st$([ "$st" -gt 128 ] && echo " (signal $((st - 128)))"); stderr: $(tail -5 "$OUT/$2.err")"
}
stop_pid() { kill "$1" 2>/dev/null || true; wait "$1" 2>/dev/null || true; }
status_kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; } # VmHWM / VmRSS in kB
metric() { curl -sf "$1/metrics" | awk -v m="$2" '$1 == m {printf "%.0f\n", $2}'; }

# ---------------------------------------------------------------- number helpers
# median NAME FILE: median of the "sample NAME x" lines, and their count ("median n").
median() {
	awk -v n="$1" '$1 == "sample" && $2 == n {print $3}' "$2" | sort -g |
		awk '{a[NR] = $1} END {if (NR == 0) exit; m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2; print m, NR}'
}
# col FILE N: median of column N over the lines (runs, pairs)
col() { awk -v c="$2" '{print $c}' "$1" | sort -g | awk '{a[NR] = $1} END {if (NR == 0) {print 0; exit}; print NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
skipped() { awk -v n="$1" '$1 == "skip" && $2 == n {$1 = $2 = ""; sub(/^ +/, ""); print; exit}' "$2"; }
info() { awk -v n="$1" '$1 == "info" && $2 == n {$1 = $2 = ""; sub(/^ +/, ""); print; exit}' "$2"; }
fmt_s() { awk -v s="$1" 'BEGIN {if (s >= 1) printf "%.2f s", s; else if (s >= 1e-3) printf "%.3g ms", s * 1e3; else printf "%.3g µs", s * 1e6}'; }
fmt_n() { awk -v x="$1" 'BEGIN {printf "%.0f", x}'; }
div() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "nan"; else printf "%.3g", a / b}'; }
# verdict RATIO OP LIMIT: "met" or "**missed**"
verdict() { awk -v r="$1" -v op="$2" -v l="$3" 'BEGIN {ok = op == "<=" ? r <= l : r >= l; print ok ? "met" : "**missed**"}'; }
# faster RATIO (anchor time / posenc time): "3.2× faster", or "0.8×: slower" below 1
faster() { awk -v r="$1" 'BEGIN {print (r >= 1 ? r "× faster" : r "×: slower")}'; }
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }

ROWS=()
row() { ROWS+=("| $1 | $2 | $3 | $4 | $5 | $6 |"); } # what | posenc | anchor | ratio | target | verdict

# ================================================================ CLI
# The whole `posenc` process (exec, compute, write) for a 64 MiB table into /dev/null by a shell
# redirection, beside `head -c 64M /dev/zero > /dev/null` (the same bytes through the same kind of
# redirection: what "pipe speed" means here) and PyTorch building the same table in-process on one
# thread (bench_py.py cli: Hugging Face's cos/sin, and the seeds' PositionalEncoding for the
# sinusoidal table; interpreter start-up not counted). The compat=hf tables (YaRN, and unscaled for
# comparison: float32 cos/sin as torch computes them) stand beside PyTorch computing Hugging Face's
# tables the same way (bench_py.py cli). The processes alternate, 4 runs of each per round; times
# from bash's EPOCHREALTIME around each command. `BENCH_ONLY=cli` runs this section alone (no nginx,
# wrk or daemon) and prints its rows.
cli_elapsed() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.9f\n", b - a}'; }
cli_section() {
	local cli=$BUILD/posenc f=$OUT/cli.txt t0 t1
	local rope=(rope --len 65536 --dim 128 --base 500000 --format bin) sin=(sinusoidal --len 16384 --dim 1024 --format bin)
	local yarn=(rope --len 65536 --dim 128 --scaling yarn --factor 4 --original-max-position-embeddings 4096 --compat hf --format bin)
	local hf=(rope --len 65536 --dim 128 --compat hf --format bin)
	: >"$f"
	if [ ! -x "$cli" ]; then
		row "CLI: posenc ${rope[*]} > /dev/null" "skipped: $cli is missing" "head -c 64M" "—" "≤ 3× head" "—"
		return
	fi
	log "cli: $ROUNDS rounds of head / posenc rope / posenc sinusoidal / posenc rope compat=hf (YaRN, default), alternating, and bench_py.py cli"
	for r in $(seq $((ROUNDS * 4))); do
		t0=$EPOCHREALTIME; head -c 64M /dev/zero >/dev/null; t1=$EPOCHREALTIME
		echo "sample cli_head $(cli_elapsed "$t0" "$t1")" >>"$f"
		t0=$EPOCHREALTIME; "$cli" "${rope[@]}" >/dev/null; t1=$EPOCHREALTIME
		echo "sample cli_rope $(cli_elapsed "$t0" "$t1")" >>"$f"
		t0=$EPOCHREALTIME; "$cli" "${sin[@]}" >/dev/null; t1=$EPOCHREALTIME
		echo "sample cli_sin $(cli_elapsed "$t0" "$t1")" >>"$f"
		t0=$EPOCHREALTIME; "$cli" "${yarn[@]}" >/dev/null; t1=$EPOCHREALTIME
		echo "sample cli_yarn $(cli_elapsed "$t0" "$t1")" >>"$f"
		t0=$EPOCHREALTIME; "$cli" "${hf[@]}" >/dev/null; t1=$EPOCHREALTIME
		echo "sample cli_hf_rope $(cli_elapsed "$t0" "$t1")" >>"$f"
		if [ $((r % 4)) -eq 0 ]; then
			if [ -x "$PY" ]; then
				"$PY" tests/bench/bench_py.py 3 cli >>"$f" 2>>"$OUT/bench_py.err" ||
					echo "skip torch_cli_rope bench_py.py failed (see $OUT/bench_py.err)" >>"$f"
			else
				echo "skip torch_cli_rope $PY is missing" >>"$f"
			fi
		fi
	done
	local bytes
	bytes=$("$cli" "${rope[@]}" | wc -c)
	cli_row "CLI: posenc ${rope[*]} > /dev/null ($(mib "$bytes")), whole process" cli_rope cli_head "head -c 64M /dev/zero > /dev/null" time "<=" 3 "≤ 3× head"
	cli_row "CLI: the same rope table vs PyTorch in-process, HF inv_freq→outer→cat→cos/sin (base 500000), 1 thread" cli_rope torch_cli_rope "PyTorch" speed ">=" 4 "≥ 4× faster"
	bytes=$("$cli" "${sin[@]}" | wc -c)
	cli_row "CLI: posenc ${sin[*]} > /dev/null ($(mib "$bytes")), whole process" cli_sin cli_head "head -c 64M /dev/zero > /dev/null" time "<=" 3 "≤ 3× head"
	cli_row "CLI: the same sinusoidal table vs PyTorch in-process, the seeds' PositionalEncoding(1024, 16384), 1 thread" cli_sin torch_cli_sin "PyTorch" speed ">=" 4 "≥ 4× faster"
	yarn_rows "$cli" "$f" "${yarn[@]}"
	cli_row "CLI: posenc ${hf[*]} > /dev/null (float32 cos/sin as torch's, unscaled: for comparison with the YaRN row), whole process, vs PyTorch in-process, HF inv_freq→outer→cat→cos/sin (base 10000), 1 thread" \
		cli_hf_rope torch_cli_hf_rope "PyTorch" speed - 0 "reported"
	sim_rows "$cli" "$f"
}
# yarn_rows CLI SAMPLES ARGS...: the compat=hf YaRN table (ARGS: the CLI's) beside Hugging Face's
# YaRN cos/sin in PyTorch (bench_py.py cli: torch_cli_yarn), with the two tables' largest
# difference (bench_py.py yarn-diff on the CLI's bytes, once).
yarn_rows() {
	local cli=$1 f=$2 diff="" bytes=0
	shift 2
	if "$cli" "$@" >"$OUT/yarn-cli.bin" 2>>"$OUT/yarn-cli.err"; then
		bytes=$(stat -c %s "$OUT/yarn-cli.bin")
		if [ -x "$PY" ]; then
			diff=$("$PY" tests/bench/bench_py.py 1 yarn-diff "$OUT/yarn-cli.bin" 2>>"$OUT/bench_py.err" | info torch_cli_yarn_diff /dev/stdin)
		fi
	fi
	rm -f "$OUT/yarn-cli.bin"
	cli_row "CLI: posenc $* > /dev/null ($(mib "$bytes"); float32 cos/sin as torch's, times the attention factor), whole process, vs PyTorch in-process: HF's YaRN cos/sin (inv_freq blended by the linear ramp between extrapolation and interpolation, beta 32/1, truncated; outer→cat→cos/sin × attention_factor 0.1 ln 4 + 1; float32, 1 thread; ${diff:-no comparison})" \
		cli_yarn torch_cli_yarn "PyTorch" speed ">=" 1 "beat PyTorch (≥ 1×)"
}
# RoPE's similarity table (analysis/similarity: G = X·Xᵀ, X's rows RoPE's rotated all-ones vectors
# [cos − sin | cos + sin] of the angles p·θ_k, θ_k = 10000^(−2k/dim), so G_ij = 2 Σ_k cos((i−j)·θ_k);
# src/core/analysis.c, gram.c), SIM_LEN × SIM_LEN f64 bin from SIM_DIM-wide rows, three ways,
# alternating, ROUNDS rounds: the CLI's whole process (it streams blocks of rows, making X again
# for each block) into a file under $OUT by a redirection; a posencd started here (--workers 2, the
# default limits, --worker-nice 0: its worker at the nice of the CLI and NumPy, as on a shared
# machine the default 19 would time the neighbours) computing it for one cold GET, curl's whole
# process writing a file, timed the same way (one unrecorded cold request first, so the daemon's
# first-ever allocations are not in it); NumPy in-process (bench_py.py sim: X, then X @ X.T in float64 over the BLAS numpy links, one
# thread; interpreter start-up not counted). Each round takes a new offset for all three, so the
# daemon's answer is a miss (counted from X-PE-Cache) and all three compute the same table (the
# CLI's and the daemon's bytes are compared; NumPy's largest difference from the CLI's is printed).
SIM_LEN=${BENCH_SIM_LEN:-2048}
SIM_DIM=${BENCH_SIM_DIM:-1024}
# sim_rows CLI SAMPLES: appends cli_sim, pd_sim and np_sim samples to SAMPLES and adds the rows.
sim_rows() {
	local cli=$1 f=$2 q r off t0 t1 code miss=0 same=0 diff blas pd=1
	local args=(analysis/similarity --encoding rope --len "$SIM_LEN" --dim "$SIM_DIM" --dtype f64 --format bin)
	q="encoding=rope&len=$SIM_LEN&dim=$SIM_DIM&dtype=f64&format=bin"
	if ! command -v curl >/dev/null 2>&1; then
		echo "skip pd_sim curl is missing" >>"$f"
		pd=0
	else
		start_posencd sim --workers 2 --worker-nice 0
		curl -s -o "$OUT/sim-pd.bin" "$PD_URL/v1/analysis/similarity?$q&offset=999"
	fi
	[ -x "$PY" ] || echo "skip np_sim $PY is missing" >>"$f"
	log "cli: $ROUNDS rounds of posenc ${args[*]} / posencd GET / NumPy, alternating"
	for r in $(seq "$ROUNDS"); do
		off=$((1000 + r))
		t0=$EPOCHREALTIME
		"$cli" "${args[@]}" --offset "$off" >"$OUT/sim-cli.bin" 2>>"$OUT/sim-cli.err" ||
			echo "skip cli_sim posenc failed (see $OUT/sim-cli.err)" >>"$f"
		t1=$EPOCHREALTIME
		echo "sample cli_sim $(cli_elapsed "$t0" "$t1")" >>"$f"
		if [ "$pd" = 1 ]; then
			rm -f "$OUT/sim-pd.bin"
			t0=$EPOCHREALTIME
			code=$(curl -s -o "$OUT/sim-pd.bin" -w '%{http_code} %header{x-pe-cache}' "$PD_URL/v1/analysis/similarity?$q&offset=$off" || true)
			t1=$EPOCHREALTIME
			alive "$PD_PID" sim
			case $code in
			200\ miss) miss=$((miss + 1)) ;;
			200*) ;;
			*) echo "skip pd_sim posencd answered $code (see $OUT/sim-pd.bin)" >>"$f" ;;
			esac
			echo "sample pd_sim $(cli_elapsed "$t0" "$t1")" >>"$f"
			cmp -s "$OUT/sim-cli.bin" "$OUT/sim-pd.bin" && same=$((same + 1))
		fi
		if [ -x "$PY" ]; then
			local cmp_file=()
			[ "$r" = 1 ] && cmp_file=("$OUT/sim-cli.bin") # NumPy's difference from posenc's, once
			"$PY" tests/bench/bench_py.py 1 sim "$SIM_LEN" "$SIM_DIM" "$off" "${cmp_file[@]}" \
				>>"$f" 2>>"$OUT/bench_py.err" || echo "skip np_sim bench_py.py failed (see $OUT/bench_py.err)" >>"$f"
		fi
	done
	if [ "$pd" = 1 ]; then stop_pid "$PD_PID"; fi
	diff=$(info np_sim_diff "$f")
	blas=$(dpkg -S "$(readlink -f /usr/lib/x86_64-linux-gnu/libblas.so.3 2>/dev/null)" 2>/dev/null | cut -d: -f1 || true)
	if [ "$blas" = libblas3 ]; then blas="libblas3, the netlib reference BLAS"; fi
	local what
	what="analysis/similarity rope ${SIM_LEN}×${SIM_LEN} from dim $SIM_DIM, f64 bin ($(mib $((SIM_LEN * SIM_LEN * 8))))"
	cli_row "CLI: posenc ${args[*]} > file, whole process (streamed), beside posencd computing the same table for one cold GET (curl's whole process; $miss/$ROUNDS misses, bytes identical to the CLI's in $same/$ROUNDS)" \
		cli_sim pd_sim "posencd --workers 2 --worker-nice 0, GET /v1/analysis/similarity?$q&offset=N" time - 0 "reported (was ~3× by hand)"
	cli_row "CLI: the same $what vs NumPy in-process, X then X @ X.T in float64 (BLAS ${blas:-?}; 1 thread; ${diff:-no comparison})" \
		cli_sim np_sim "NumPy" speed - 0 "—"
	cli_row "posencd: the same $what, one cold GET, vs NumPy in-process (as above)" \
		pd_sim np_sim "NumPy" speed - 0 "—"
}
# cli_row LABEL A B ANCHOR_LABEL MODE OP LIMIT TARGET_TEXT: as kernel_row (below), from $OUT/cli.txt.
cli_row() {
	local f=$OUT/cli.txt why ma mb ra rtext v=—
	why=$(skipped "$2" "$f")
	[ -z "$why" ] && why=$(skipped "$3" "$f")
	ma=$(median "$2" "$f")
	mb=$(median "$3" "$f")
	if [ -n "$why" ] || [ -z "$ma" ] || [ -z "$mb" ]; then
		row "$1" "skipped: ${why:-no samples}" "$4" "—" "$8" "—"
		return
	fi
	set -- "$@" $ma $mb # $9 $10: A's median and count, $11 $12: B's
	if [ "$5" = time ]; then
		ra=$(div "$9" "${11}")
		rtext="${ra}× its time"
	else
		ra=$(div "${11}" "$9")
		rtext=$(faster "$ra")
	fi
	[ "$6" != "-" ] && v=$(verdict "$ra" "$6" "$7")
	row "$1" "$(fmt_s "$9") (n=${10})" "$4 $(fmt_s "${11}") (n=${12})" "$rtext" "$8" "$v"
}

# ================================================================ request validation
# checks_section: tests/bench/bench_checks.c, request validation at dim 65536 (pe_params_set per
# key, pe_params_finish, the dtype check a miss adds) with the O(1) frequency bound, each sample
# alternating in-process with the O(dim) scan it replaced (still the fallback for what the bound
# cannot decide), 5 of each per case per round; beside NumPy computing RoPE's dim/2 inverse
# frequencies 10000 ** (-arange(0, dim, 2) / dim) in float64 (bench_py.py checks: what rebuilding
# the frequencies costs at least, in-process, one thread), the two programs alternating ROUNDS
# times. `BENCH_ONLY=checks` runs this section alone (no nginx, wrk or daemon) and prints its rows.
checks_section() {
	local f=$OUT/checks.txt k why q mb ms mn
	: >"$f"
	if [ ! -x "$OUT/bench_checks" ]; then
		row "request validation at dim 65536" "skipped: bench_checks did not build" "O(dim) scan; NumPy" "—" "reported" "—"
		return
	fi
	log "checks: $ROUNDS rounds of bench_checks and bench_py.py checks, alternating"
	for _ in $(seq "$ROUNDS"); do
		"$OUT/bench_checks" 5 >>"$f" 2>>"$OUT/bench_checks.err"
		if [ -x "$PY" ]; then
			"$PY" tests/bench/bench_py.py 5 checks >>"$f" 2>>"$OUT/bench_py.err" ||
				echo "skip np_inv_freq bench_py.py failed (see $OUT/bench_py.err)" >>"$f"
		else
			echo "skip np_inv_freq $PY is missing" >>"$f"
		fi
	done
	mn=$(median np_inv_freq "$f")
	for k in $(awk '$1 == "info" && $2 ~ /^check_[0-9]+$/ {sub(/check_/, "", $2); if (!seen[$2]++) print $2}' "$f"); do
		q=$(info "check_$k" "$f")
		why=$(skipped "check_$k" "$f")
		mb=$(median "check_bound_$k" "$f")
		ms=$(median "check_scan_$k" "$f")
		if [ -n "$why" ] || [ -z "$mb" ] || [ -z "$ms" ]; then
			row "validation: $q" "skipped: ${why:-no samples}" "O(dim) scan; NumPy inv_freq" "—" "reported" "—"
			continue
		fi
		set -- $mb $ms ${mn:-}
		row "validation: $q" "$(fmt_s "$1") (n=$2)" \
			"O(dim) scan (pe_rope_freq_force_scan) $(fmt_s "$3") (n=$4); NumPy inv_freq $([ -n "${5:-}" ] && echo "$(fmt_s "$5") (n=$6)" || echo "skipped: $(skipped np_inv_freq "$f")")" \
			"$(faster "$(div "$3" "$1")") than the scan$([ -n "${5:-}" ] && echo "; $(div "$1" "$5")× NumPy's time")" "reported" "—"
	done
}
# ================================================================ cold tables
# cold_section: what a cold table costs against what sending it costs, on one posencd started here
# (--workers 2, the other settings at their defaults: a 256 MiB cache), each figure beside its
# anchor from the same run. `BENCH_ONLY=cold` runs this section alone (no nginx or wrk).
#   cold vs hit  per table (sinusoidal 8192×768 and rope 32768×192, f32 bin): ROUNDS times a cold
#                GET at a new offset, then a hit of the same URL, curl's time_total. Unrecorded
#                cold tables of the same size fill the cache first, so every recorded miss evicts,
#                as on a daemon that has run a while (the first tables of a fresh daemon take
#                memory the kernel has not handed out for a while: COLD_FRESH says what they cost)
#   CPU          posencd's utime+stime (/proc/PID/stat) around those cold GETs, per table, beside
#                the CLI's whole-process CPU (bash's times for its child) writing the same table
#                into a pipe, ROUNDS runs, alternating with the GETs
#   faults       posencd's minor faults (/proc/PID/stat) around the same GETs, per table, against
#                the target of one per 64 KiB of output
#   first byte   curl's time_starttransfer of cold 1 MiB and 256 MiB bin tables, alternating; and
#                of cold sinusoidal 4096×1024 (~45 MB) and 64×1024 (~0.7 MB) JSON, and the same
#                in CSV, alternating, a new offset each (a table streamed in chunks sends its first
#                byte after its first block of rows; one built whole, after all of it); curl drops
#                the bodies (-o /dev/null): written to a file, the last 256 MiB body's writeback
#                delayed the next first byte by 8-27 ms on some runs (Intel Xeon VM); and the
#                slowest first byte of 4 requests for one cold 256 MiB bin table sent at once
#                (single flight: one computation, every request read from its stream)
#   JSON         cold 512×768 JSON end to end (curl's time_total) beside jansson's tree +
#                json_dumps of the same table in-process (bench_kernels json), in pairs
#                (cold_json, below)
COLD_F=$OUT/cold.txt
# cold_json: cold 512×768 JSON end to end beside jansson's encode alone, in pairs: a cold request
# (curl's time_total, a new offset), then right after it one bench_kernels json run (a warm-up and
# one timed encode of each library). The figure is the median of the pairs' ratios (jansson's time
# over the request's): jansson's own time can move by 1.7× within one run, and such a drift moves
# both members of a pair alike, where a ratio of the two medians takes it whole. COLD_JSON_N pairs
# (at least 9); the two medians are printed beside the figure.
COLD_JSON_N=$((2 * ROUNDS - 1 > 9 ? 2 * ROUNDS - 1 : 9))
# First bytes come in 1-2 ms with a rare stall of 5-11 ms (cause not found; about 1 in 20 on an
# Intel Xeon VM): as many of each as of the pairs above
TTFB_N=$COLD_JSON_N
# cold_json URL TAG: writes "pair TIME_TOTAL X-PE-CACHE JANSSON_S" lines to $OUT/cold-json-TAG.txt
cold_json() {
	local url=$1 tag=$2 i t c js
	: >"$OUT/cold-json-$tag.txt"
	curl -s -o /dev/null "$url/v1/sinusoidal?len=512&dim=768&offset=899999999"
	for i in $(seq "$COLD_JSON_N"); do
		# the body is received and dropped (curl's own -o /dev/null): jansson's side writes nothing either
		read -r t c < <(curl -s -o /dev/null -w '%{time_total} %header{x-pe-cache}\n' \
			"$url/v1/sinusoidal?len=512&dim=768&offset=$((900000000 + i))" || true) || true
		js=
		if [ -x "$OUT/bench_kernels" ]; then
			js=$("$OUT/bench_kernels" 1 json | awk '$1 == "sample" && $2 == "json_jansson" {print $3}' || true)
		fi
		echo "pair ${t:-0} ${c:--} ${js:-0}" >>"$OUT/cold-json-$tag.txt"
	done
}
# cold_json_row TAG LABEL TARGET: the row of cold_json's pairs; TARGET "≥ 10× faster" is checked
cold_json_row() {
	local tag=$1 label=$2 target=$3 f=$OUT/cold-json-$1.txt g=$OUT/cold-json-$1.ratios n miss r v=—
	awk '$1 == "pair" && $2 > 0 && $4 > 0 {print $2, $4, $4 / $2}' "$f" >"$g"
	n=$(wc -l <"$g")
	miss=$(awk '$1 == "pair" && $3 == "miss"' "$f" | wc -l)
	if [ "$n" = 0 ]; then
		row "$label" "$(fmt_s "$(col "$f" 2)")" "skipped: no jansson figure (bench_kernels json)" "—" "$target" "—"
		return
	fi
	r=$(awk -v x="$(col "$g" 3)" 'BEGIN {printf "%.3g", x}')
	[ "$target" = "≥ 10× faster" ] && v=$(verdict "$r" ">=" 10)
	row "$label (curl time_total, body received and dropped, distinct offsets, $miss/$(wc -l <"$f") were misses; each request paired with the jansson encode run right after it, the ratio the median of the $n pairs' ratios)" \
		"$(fmt_s "$(col "$g" 1)") (n=$n)" "jansson tree + json_dumps of the same table in-process, run after each request $(fmt_s "$(col "$g" 2)") (n=$n)" \
		"$(faster "$r") (median of pair ratios)" "$target" "$v"
}
# cold_ticks_faults PID: "utime+stime minflt" of the process
cold_ticks_faults() { awk '{print $14 + $15, $10}' "/proc/$1/stat"; }
# cold_cli_cpu ARGS...: the CLI's user+system seconds for one run into fd 3 (a pipe to cat)
cold_cli_cpu() {
	( "$BUILD/posenc" "$@" >&3; times ) | awk 'NR == 2 {n = split($0, t, " "); s = 0
		for (i = 1; i <= n; i++) {split(t[i], a, "m"); sub(/s$/, "", a[2]); s += a[1] * 60 + a[2]}; printf "%.6f\n", s}'
}
# cold_table NAME QUERY BYTES CLI_ARGS...: samples NAME_cold, NAME_hit, NAME_cli; info NAME_cpu,
# NAME_faults (per table), NAME_misses, NAME_same
cold_table() {
	local name=$1 q=$2 bytes=$3 r off code t0 f0 t1 f1 ticks=0 faults=0 misses=0 fill
	shift 3
	fill=$((268435456 / bytes + 2))
	read -r t0 f0 < <(cold_ticks_faults "$PD_PID")
	for r in $(seq "$fill"); do curl -s -o "$OUT/discard" "$PD_URL/v1/$q&offset=$((700000 + r))"; done
	read -r t1 f1 < <(cold_ticks_faults "$PD_PID")
	echo "info ${name}_fill $fill $(awk -v t=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" -v n="$fill" 'BEGIN {printf "%.6f", t / hz / n}') $(((f1 - f0) / fill))" >>"$COLD_F"
	for r in $(seq "$ROUNDS"); do
		off=$((800000 + r))
		read -r t0 f0 < <(cold_ticks_faults "$PD_PID")
		code=$(curl -s -o "$OUT/discard" -w '%{time_total} %{http_code} %header{x-pe-cache}' "$PD_URL/v1/$q&offset=$off")
		read -r t1 f1 < <(cold_ticks_faults "$PD_PID")
		ticks=$((ticks + t1 - t0))
		faults=$((faults + f1 - f0))
		[ "${code#* }" = "200 miss" ] && misses=$((misses + 1))
		echo "sample ${name}_cold ${code%% *}" >>"$COLD_F"
		echo "sample ${name}_hit $(curl -s -o "$OUT/discard" -w '%{time_total}' "$PD_URL/v1/$q&offset=$off")" >>"$COLD_F"
		echo "sample ${name}_cli $(cold_cli_cpu "$@" --offset "$off")" >>"$COLD_F"
	done
	alive "$PD_PID" cold
	curl -s -o "$OUT/cold-pd.bin" "$PD_URL/v1/$q&offset=$off"
	"$BUILD/posenc" "$@" --offset "$off" >"$OUT/cold-cli.bin"
	echo "info ${name}_same $(cmp -s "$OUT/cold-pd.bin" "$OUT/cold-cli.bin" && echo identical || echo DIFFERENT)" >>"$COLD_F"
	echo "info ${name}_cpu $(awk -v t="$ticks" -v hz="$(getconf CLK_TCK)" -v n="$ROUNDS" 'BEGIN {printf "%.6f", t / hz / n}')" >>"$COLD_F"
	echo "info ${name}_faults $((faults / ROUNDS))" >>"$COLD_F"
	echo "info ${name}_misses $misses" >>"$COLD_F"
	rm -f "$OUT/cold-pd.bin" "$OUT/cold-cli.bin"
}
# cold_rows NAME LABEL BYTES: the three rows of one table
cold_rows() {
	local name=$1 label=$2 bytes=$3 mc mh cli cpu faults lim r
	mc=$(median "${name}_cold" "$COLD_F")
	mh=$(median "${name}_hit" "$COLD_F")
	cli=$(awk -v n="$name" '$1 == "sample" && $2 == n "_cli" {s += $3; k++} END {if (k) printf "%.6f", s / k}' "$COLD_F")
	cpu=$(info "${name}_cpu" "$COLD_F")
	faults=$(info "${name}_faults" "$COLD_F")
	set -- $mc $mh
	r=$(div "$1" "$3")
	row "cold vs cached hit, $label ($(mib "$bytes"); $(info "${name}_misses" "$COLD_F")/$ROUNDS misses, cache full and evicting; curl time_total, alternating)" \
		"cold $(fmt_s "$1") (n=$2)" "hit of the same URL $(fmt_s "$3") (n=$4)" "${r}× the hit" "≤ 1.5×" "$(verdict "$r" "<=" 1.5)"
	r=$(div "$cpu" "$cli")
	row "CPU per cold table, $label: posencd utime+stime (/proc/PID/stat) around the $ROUNDS cold GETs above" \
		"$(fmt_s "$cpu")" "the CLI's whole process into a pipe (bash times, mean of $ROUNDS; bytes $(info "${name}_same" "$COLD_F")) $(fmt_s "$cli")" \
		"${r}× the CLI's" "≤ 1.5×" "$(verdict "$r" "<=" 1.5)"
	set -- $(info "${name}_fill" "$COLD_F")
	row "CPU per cold table, $label, the first $1 tables of the fresh daemon (the cache filling with memory new to the process; diagnostic)" \
		"$(fmt_s "$2"), $3 faults per table" "the CLI's, as above, $(fmt_s "$cli")" "$(div "$2" "$cli")× the CLI's" "reported" "—"
	lim=$(awk -v b="$bytes" 'BEGIN {printf "%d", b / 65536}')
	r=$(div "$faults" "$lim")
	row "minor page faults per cold table, $label (posencd, /proc/PID/stat, the same GETs)" "$faults" \
		"1 per 64 KiB of output: $lim" "$r× the allowance" "≤ 1×" "$(verdict "$r" "<=" 1)"
}
cold_section() {
	local q1 q256 r fmt size q qts='sinusoidal?len=64&dim=1024' qtl='sinusoidal?len=4096&dim=1024'
	: >"$COLD_F"
	if [ ! -x "$BUILD/posenc" ] || ! command -v curl >/dev/null 2>&1; then
		row "cold tables" "skipped: $BUILD/posenc or curl is missing" "—" "—" "—" "—"
		return
	fi
	start_posencd cold --workers 2
	exec 3> >(cat >/dev/null)
	log "cold: cold vs hit, CPU and faults per table, $ROUNDS rounds each, alternating with the CLI"
	cold_table sin 'sinusoidal?len=8192&dim=768&format=bin' $((8192 * 768 * 4)) sinusoidal --len 8192 --dim 768 --format bin
	cold_table rope 'rope?len=32768&dim=192&format=bin' $((2 * 32768 * 192 * 4)) rope --len 32768 --dim 192 --format bin
	exec 3>&-
	log "cold: time to first byte, 1 MiB and 256 MiB bin, alternating"
	q1='sinusoidal?len=256&dim=1024&format=bin'
	q256='sinusoidal?len=65536&dim=1024&format=bin'
	for r in $(seq "$TTFB_N"); do
		echo "sample ttfb_1 $(curl -s -o /dev/null -w '%{time_starttransfer}' "$PD_URL/v1/$q1&offset=$((900000 + r))")" >>"$COLD_F"
		echo "sample ttfb_256 $(curl -s -o /dev/null -w '%{time_starttransfer}' "$PD_URL/v1/$q256&offset=$((900000 + r))")" >>"$COLD_F"
	done
	log "cold: time to first byte, 4 requests at once for one cold 256 MiB bin table"
	for r in $(seq "$TTFB_N"); do
		u="$PD_URL/v1/$q256&offset=$((920000 + r))"
		pids=()
		for k in 1 2 3 4; do
			curl -s -o /dev/null -w '%{time_starttransfer}\n' "$u" >"$OUT/ttfb4-$k.txt" &
			pids+=($!)
		done
		wait "${pids[@]}" # these four only: the daemon is a child too
		cat "$OUT"/ttfb4-[1-4].txt >"$OUT/ttfb4.txt"
		echo "sample ttfb_256x4 $(sort -g "$OUT/ttfb4.txt" | tail -1)" >>"$COLD_F"
	done
	alive "$PD_PID" cold
	log "cold: time to first byte, JSON and CSV, 4096×1024 and 64×1024, alternating"
	for r in $(seq "$TTFB_N"); do
		for fmt in json csv; do
			for size in small large; do
				q=$qts
				[ "$size" = large ] && q=$qtl
				echo "sample ttfb_${fmt}_$size $(curl -s -o /dev/null -w '%{time_starttransfer} %{http_code} %{size_download}' \
					"$PD_URL/v1/$q&format=$fmt&offset=$((910000 + r))")" >>"$COLD_F"
			done
		done
	done
	alive "$PD_PID" cold
	log "cold: 512×768 JSON end to end, $COLD_JSON_N requests each paired with jansson in-process"
	cold_json "$PD_URL" cold
	alive "$PD_PID" cold
	stop_pid "$PD_PID"
	cold_rows sin "sinusoidal?len=8192&dim=768&format=bin" $((8192 * 768 * 4))
	cold_rows rope "rope?len=32768&dim=192&format=bin" $((2 * 32768 * 192 * 4))
	set -- $(median ttfb_256 "$COLD_F") $(median ttfb_1 "$COLD_F")
	r=$(div "$1" "$3")
	row "time to first byte of a cold bin table by size: 256 MiB ($q256) beside 1 MiB ($q1), curl time_starttransfer, alternating" \
		"256 MiB $(fmt_s "$1") (n=$2)" "1 MiB $(fmt_s "$3") (n=$4)" "${r}× the 1 MiB one's" "≤ 5×" "$(verdict "$r" "<=" 5)"
	set -- $(median ttfb_256x4 "$COLD_F") $(median ttfb_1 "$COLD_F")
	r=$(div "$1" "$3")
	worst=$(awk '$1 == "sample" && $2 == "ttfb_256x4" && $3 > m {m = $3} END {print m + 0}' "$COLD_F")
	row "time to first byte of 4 curls started at once for one cold 256 MiB bin table (the slowest of the 4 each round; one computation, every request read from its stream, those that come before its first block too), beside a lone cold 1 MiB one (diagnostic: on 2 CPUs the four clients' own start and reads compete with the daemon)" \
		"256 MiB, slowest of 4: median $(fmt_s "$1"), largest $(fmt_s "$worst") (n=$2)" "1 MiB $(fmt_s "$3") (n=$4)" "${r}× the 1 MiB one's" "reported (a request waiting for the whole table: ~0.3 s)" "—"
	for fmt in json csv; do ttfb_text_row "$fmt" "$qtl" "$qts"; done
	cold_json_row cold "cold 512×768 JSON end to end on the cold section's daemon (its 256 MiB cache full of large tables)" "≥ 10× faster"
}
# ttfb_text_row FORMAT LARGE_Q SMALL_Q: time to first byte of the large cold text table beside the
# small one's (samples ttfb_FORMAT_large, ttfb_FORMAT_small: time_starttransfer, HTTP code, bytes)
ttfb_text_row() {
	local fmt=$1 ql=$2 qs=$3 ok n bl bs r ml ms
	ok=$(awk -v a="ttfb_${fmt}_large" -v b="ttfb_${fmt}_small" '$1 == "sample" && ($2 == a || $2 == b) && $4 == 200' "$COLD_F" | wc -l)
	n=$(awk -v a="ttfb_${fmt}_large" -v b="ttfb_${fmt}_small" '$1 == "sample" && ($2 == a || $2 == b)' "$COLD_F" | wc -l)
	bl=$(awk -v a="ttfb_${fmt}_large" '$1 == "sample" && $2 == a {b = $5} END {print b + 0}' "$COLD_F")
	bs=$(awk -v a="ttfb_${fmt}_small" '$1 == "sample" && $2 == a {b = $5} END {print b + 0}' "$COLD_F")
	ml=$(median "ttfb_${fmt}_large" "$COLD_F")
	ms=$(median "ttfb_${fmt}_small" "$COLD_F")
	if [ -z "$ml" ] || [ -z "$ms" ]; then
		row "time to first byte of a cold ${fmt^^} table by size: $ql beside $qs" "skipped: no samples" "—" "—" "≤ 5×" "—"
		return
	fi
	set -- $ml $ms
	r=$(div "$1" "$3")
	row "time to first byte of a cold ${fmt^^} table by size: $(mib "$bl") ($ql&format=$fmt) beside $(mib "$bs") ($qs&format=$fmt), curl time_starttransfer, alternating, new offset each ($ok/$n × 200)" \
		"$(mib "$bl") $(fmt_s "$1") (n=$2)" "$(mib "$bs") $(fmt_s "$3") (n=$4)" "${r}× the small one's" "≤ 5×" "$(verdict "$r" "<=" 5)"
}
# only_header: the machine and its load, for a section run alone
only_header() {
	echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) vCPU; load average at the start: $LOAD0, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "- posenc $(git rev-parse --short HEAD 2>/dev/null || echo '?'), built -O3 ($BUILD); $(date -u '+%Y-%m-%d %H:%M UTC'); medians of $ROUNDS rounds"
	echo
}
if [ "${BENCH_ONLY:-}" = cli ] || [ "${BENCH_ONLY:-}" = checks ] || [ "${BENCH_ONLY:-}" = cold ]; then
	case $BENCH_ONLY in cli) cli_section ;; checks) checks_section ;; cold) cold_section ;; esac
	{
		only_header
		printf '%s\n' "| measurement | posenc | anchor (same run) | ratio | target | verdict |" "|---|---|---|---|---|---|" "${ROWS[@]}"
	} | tee "build/bench-$BENCH_ONLY.md"
	exit 0
fi

# `BENCH_ONLY=small` runs only the small-request HTTP rows (cached and cold 16×16 JSON beside nginx,
# CPU per miss against per hit, the mixed load) on one posencd and one nginx, and prints them.
SMALL_ONLY=0
[ "${BENCH_ONLY:-}" = small ] && SMALL_ONLY=1
K=$OUT/kernels.txt
ISA="(kernels not run)"
if [ "$SMALL_ONLY" = 0 ]; then
# ================================================================ 1. kernels
log "kernels: $ROUNDS rounds of bench_kernels and bench_py.py, alternating"
K=$OUT/kernels.txt
: >"$K"
for r in $(seq "$ROUNDS"); do
	"$OUT/bench_kernels" 3 >>"$K"
	if [ -x "$PY" ]; then
		"$PY" tests/bench/bench_py.py 3 >>"$K" 2>>"$OUT/bench_py.err" ||
			echo "skip py bench_py.py failed (see $OUT/bench_py.err)" >>"$K"
	else
		for n in np_seed_sin torch_seed_sin torch_hf_rope torch_rope_apply; do echo "skip $n $PY is missing"; done >>"$K"
	fi
done
ISA=$(info isa "$K")

# kernel_row LABEL A B ANCHOR_LABEL MODE TARGET_OP TARGET_LIMIT TARGET_TEXT
#   MODE time: ratio = A/B (A's time in units of B's);  speed: ratio = B/A (A is that many × faster)
kernel_row() {
	local label=$1 a=$2 b=$3 alabel=$4 mode=$5 op=$6 lim=$7 ttext=$8 why ma mb ra
	why=$(skipped "$a" "$K")
	[ -z "$why" ] && why=$(skipped "$b" "$K")
	ma=$(median "$a" "$K")
	mb=$(median "$b" "$K")
	if [ -n "$why" ] || [ -z "$ma" ] || [ -z "$mb" ]; then
		row "$label" "skipped: ${why:-no samples}" "$alabel" "—" "$ttext" "—"
		return
	fi
	set -- $ma
	local ta=$1 na=$2
	set -- $mb
	local tb=$1 nb=$2
	if [ "$mode" = time ]; then
		ra=$(div "$ta" "$tb")
		rtext="${ra}× its time"
	else
		ra=$(div "$tb" "$ta")
		rtext=$(faster "$ra")
	fi
	local v="—"
	[ "$op" != "-" ] && v=$(verdict "$ra" "$op" "$lim")
	row "$label" "$(fmt_s "$ta") (n=$na)" "$alabel $(fmt_s "$tb") (n=$nb)" "$rtext" "$ttext" "$v"
}

kernel_row "sinusoidal 512×768 f32 exact, $ISA" sin_exact sin_memset "memset of the same 1.5 MiB" time "<=" 4 "≤ 4× memset"
kernel_row "sinusoidal 512×768 f32 exact, scalar (pe_isa_force)" sin_scalar sin_scalar_memset "memset of the same 1.5 MiB" time - 0 "for comparison"
kernel_row "sinusoidal 512×768 vs the seeds' NumPy get_position_encoding (float64, as written)" sin_exact np_seed_sin "NumPy" speed - 0 "—"
kernel_row "sinusoidal 512×768 vs the seeds' PyTorch PositionalEncoding(768, 512), 1 thread" sin_exact torch_seed_sin "PyTorch" speed - 0 "—"
kernel_row "RoPE cos/sin 65536×128 f32 vs HF (inv_freq→outer→cat→cos/sin), torch 1 thread" rope torch_hf_rope "PyTorch" speed ">=" 10 "≥ 10× faster"
kernel_row "RoPE cos/sin 65536×128 f32 (64 MiB) vs memset" rope rope_memset "memset of the same 64 MiB" time - 0 "—"
kernel_row "RoPE cos/sin 65536×128 f32 into a plain malloc'd buffer (16 mod 32) vs HF torch (diagnostic: the rows above use a 64-byte-aligned buffer, as the server's pe_buf is)" rope_aligned torch_hf_rope "PyTorch" speed - 0 "—"
kernel_row "RoPE apply, [1,32,2048,128] f32 (32 MiB) in place, via pe_transform_apply" rope_apply rope_apply_memcpy "memcpy of the same 32 MiB" time "<=" 2 "≤ 2× memcpy"
kernel_row "RoPE apply, the same, vs HF q·cos + rotate_half(q)·sin (cos/sin precomputed), torch 1 thread" rope_apply torch_rope_apply "PyTorch" speed - 0 "—"
kernel_row "JSON encode 512×768 f32: pe_json_write_table ($(info json_pe "$K"))" json_pe json_jansson "jansson tree + json_dumps, 9 digits ($(info json_jansson "$K"))" speed - 0 "see the cold HTTP row"
kernel_row "JSON encode 512×768 f32, the scalar printer (pe_isa_force scalar: the SIMD list printers' comparison)" json_pe_scalar json_jansson "jansson tree + json_dumps, 9 digits" speed - 0 "for comparison"
JANSSON_S=$(median json_jansson "$K" | cut -d' ' -f1)
TORCH_APPLY_S=$(median torch_rope_apply "$K" | cut -d' ' -f1)

# The cold 512×768 JSON rows against jansson (cold_json, above) are taken on a fresh posencd (same
# flags), after one unrecorded cold request of the same shape, before the HTTP section's load: right
# after it (after the single flight step), the first four to six requests of a fresh daemon
# measured 16-20 ms of server time for about 1.5 s and ~6 ms after that, while the same rows taken
# here measured ~8 ms throughout. On the HTTP section's daemon, whose 1 GiB cache the cold-miss
# flood has filled with ~276k small entries, each request also evicts ~1200 of them, and perf
# showed 44% of its time in the kernel zeroing the answer's fresh pages: the diagnostic row after
# it measures that case. The same fresh daemon with --warm-bytes 0 (no warm reserve: every answer is
# written into memory new to the process) is a diagnostic row beside it.
log "cold JSON: a fresh posencd, requests alternating with jansson's encode"
for tag in fresh fresh-nowarm; do
	warm=()
	[ "$tag" = fresh-nowarm ] && warm=(--warm-bytes 0)
	start_posencd "cold-json-$tag" --workers 2 --cache-bytes 1Gi "${warm[@]}"
	cold_json "$PD_URL" "$tag"
	alive "$PD_PID" "cold-json-$tag"
	stop_pid "$PD_PID"
done
fi # SMALL_ONLY

# ================================================================ 2. HTTP
log "http: posencd (--workers 2, cache 1 GiB) and nginx on loopback"
# shellcheck disable=SC2086 # BENCH_PE_ARGS: extra posencd flags for an A/B (e.g. --inline-max-us 0)
start_posencd http --workers 2 --cache-bytes 1Gi ${BENCH_PE_ARGS:-}
HTTP_PID=$PD_PID
PE=$PD_URL
CHECK_PID=$HTTP_PID
CHECK_NAME=http
curl -sf "$PE/healthz" >/dev/null || die "posencd is not healthy"
# The same daemon with GLIBC_TUNABLES=$TUNABLES, for the small rows' A/B, with a data_dir of its own
# (one daemon per data_dir). Its files keep the name _default: the second daemon of the A/B.
rm -rf "$OUT/http-default.data"
# shellcheck disable=SC2086
PD_TUNABLES=$TUNABLES start_posencd http-default --workers 2 --cache-bytes 1Gi --data-dir "$OUT/http-default.data" ${BENCH_PE_ARGS:-}
DEF_PID=$PD_PID
PE_DEF=$PD_URL
# (glibc parses GLIBC_TUNABLES in place, cutting it at each ':', so only its first item is looked for)
tunables_of() { tr '\0' '\n' <"/proc/$1/environ" | grep -c "^GLIBC_TUNABLES=$2" || true; }
[ "$(tunables_of "$DEF_PID" "${TUNABLES%%:*}")" = 1 ] || die "posencd (http-default) does not run with GLIBC_TUNABLES=$TUNABLES"
[ "$(tunables_of "$HTTP_PID" .)" = 0 ] || die "posencd (http) runs with GLIBC_TUNABLES set"

# nginx serves the bytes posencd serves, with the same Content-Type and the same extra headers.
NG=$OUT/nginx
rm -rf "$NG"
mkdir -p "$NG/html" "$NG/tmp"
fetch() { # fetch QUERY FILE: a miss that fills the cache, then a hit whose headers we keep
	curl -sf -o "$OUT/discard" "$PE/v1/sinusoidal?$1"
	curl -sf -D "$NG/$2.headers" -o "$NG/html/$2" "$PE/v1/sinusoidal?$1"
	grep -qi '^X-PE-Cache: hit' "$NG/$2.headers" || die "$1 was not a cache hit on the second request"
}
fetch "$SMALL_Q" small.json
fetch "$LARGE_Q" large.bin
for _ in miss hit; do
	curl -sf -o "$OUT/discard" "$PE_DEF/v1/sinusoidal?$SMALL_Q" || die "posencd (http-default) does not serve $SMALL_Q"
done
location() { # location FILE: an nginx location echoing posencd's headers
	local f=$1 ctype
	ctype=$(awk -F': ' 'tolower($1) == "content-type" {sub(/\r$/, "", $2); print $2}' "$NG/$f.headers")
	echo "        location = /$f {"
	echo "            types {}"
	echo "            default_type '$ctype';"
	tr -d '\r' <"$NG/$f.headers" | awk -F': ' 'NF >= 2 && tolower($1) !~ /^(date|content-length|content-type|connection|keep-alive|server)$/ {
		v = substr($0, length($1) + 3); printf "            add_header %s '\''%s'\'';\n", $1, v}'
	echo "        }"
}
free_port() {
	local p
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 40000))
		ss -Htln "sport = :$p" 2>/dev/null | grep -q . || { echo "$p"; return; }
	done
	die "no free port"
}
NG_PORT=$(free_port)
NG_USER=$(id -un)
cat >"$NG/nginx.conf" <<EOF
# generated by tests/tools/bench.sh: static copies of posencd's responses
$([ "$(id -u)" -eq 0 ] && echo "user $NG_USER;")
worker_processes $NGINX_WORKERS;
pid $PWD/$NG/nginx.pid;
error_log $PWD/$NG/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    sendfile on;
    tcp_nopush on;
    tcp_nodelay on;
    keepalive_timeout 65;
    keepalive_requests 1000000;
    server_tokens off;
    etag off;
    client_body_temp_path $PWD/$NG/tmp/body;
    proxy_temp_path $PWD/$NG/tmp/proxy;
    fastcgi_temp_path $PWD/$NG/tmp/fastcgi;
    uwsgi_temp_path $PWD/$NG/tmp/uwsgi;
    scgi_temp_path $PWD/$NG/tmp/scgi;
    server {
        listen 127.0.0.1:$NG_PORT;
        root $PWD/$NG/html;
$(location small.json)
$(location large.bin)
    }
}
EOF
nginx -p "$PWD/$NG/" -c "$PWD/$NG/nginx.conf" -e "$PWD/$NG/error.log" || die "nginx did not start: $(cat "$NG/error.log")"
for _ in $(seq 100); do [ -s "$NG/nginx.pid" ] && break; sleep 0.05; done
NGINX_PID=$(cat "$NG/nginx.pid")
NGX=http://127.0.0.1:$NG_PORT
NGINX_PIDS="$NGINX_PID $(pgrep -P "$NGINX_PID" | tr '\n' ' ')"
for f in small.json large.bin; do
	curl -sf -o "$NG/$f.check" "$NGX/$f" || die "nginx does not serve $f"
	cmp -s "$NG/$f.check" "$NG/html/$f" || die "nginx serves different bytes for $f"
done
hdr_bytes() { curl -s -D - -o "$OUT/discard" "$1" | wc -c; }
SMALL_BODY=$(stat -c %s "$NG/html/small.json")
LARGE_BODY=$(stat -c %s "$NG/html/large.bin")
SMALL_HDR="posencd $(hdr_bytes "$PE/v1/sinusoidal?$SMALL_Q") B, nginx $(hdr_bytes "$NGX/small.json") B"

# run_wrk NAME CONNS SECONDS URL [SCRIPT]: appends "rps p99_ms errors" to $OUT/wrk/NAME.txt
mkdir -p "$OUT/wrk"
: >"$OUT/wrk/runs.log"
# CPU ticks (user + system) of the server processes in SERVER_PIDS, to give CPU time per request: on
# a shared 2-core machine it says whether a server was saturated, and what a request costs it.
cpu_ticks() { local t=0 p; for p in $SERVER_PIDS; do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2>/dev/null || echo 0))); done; echo "$t"; }
run_wrk() {
	local name=$1 c=$2 d=$3 url=$4 script=${5:-} f t0 t1
	f=$OUT/wrk/$name.$(date +%s%N).out
	t0=$(cpu_ticks)
	wrk -t"$WRK_T" -c"$c" -d"${d}s" --latency ${script:+-s "$script"} "$url" >"$f" 2>&1 || true
	t1=$(cpu_ticks)
	if [ -n "${CHECK_PID:-}" ]; then alive "$CHECK_PID" "$CHECK_NAME"; fi
	awk -v name="$name" -v ticks=$((t1 - t0)) -v hz="$(getconf CLK_TCK)" '
		/^Requests\/sec:/ {rps = $2}
		$1 == "99%" {v = $2; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
			p99 = u == "us" ? v / 1000 : u == "ms" ? v : u == "s" ? v * 1000 : v}
		/requests in/ {reqs = $1}
		/Non-2xx|Socket errors/ {err = err $0 ";"}
		END {gsub(/ +/, " ", err); printf "%s %s %s %.3g %s\n", rps + 0, p99 + 0, reqs + 0,
			reqs ? ticks / hz * 1e6 / reqs : 0, (err == "" ? "-" : err)}' "$f" |
		tee -a "$OUT/wrk/$name.txt" >/dev/null
	echo "$name $(tail -1 "$OUT/wrk/$name.txt") load $(cut -d' ' -f1 /proc/loadavg)" >>"$OUT/wrk/runs.log"
	cut -d' ' -f1 /proc/loadavg >>"$OUT/wrk/$name.load"
}
# pe_ab ROUND NAME CONNS SECONDS PATH [SCRIPT]: one run on the tuned posencd (NAME) and one on the
# default one (NAME_default), odd rounds tuned first, even rounds default first.
pe_ab() {
	local r=$1 name=$2 c=$3 d=$4 path=$5 script=${6:-} which
	for which in $([ $((r % 2)) = 1 ] && echo "tuned default" || echo "default tuned"); do
		if [ "$which" = tuned ]; then
			SERVER_PIDS=$HTTP_PID run_wrk "$name" "$c" "$d" "$PE$path" "$script"
		else
			SERVER_PIDS=$DEF_PID CHECK_PID=$DEF_PID CHECK_NAME=http-default run_wrk "${name}_default" "$c" "$d" "$PE_DEF$path" "$script"
		fi
	done
}
rm -f "$OUT"/wrk/*.load
for n in pe_small pe_small_default ng_small pe_large ng_large pe_cold pe_cold_default ng_cold pe_mixed; do : >"$OUT/wrk/$n.txt"; done
: >"$OUT/wrk/mixed-large.txt"
COLD_MISSES=0
COLD_REQS=0
for r in $(seq "$ROUNDS"); do
	log "http round $r/$ROUNDS"
	pe_ab "$r" pe_small "$SMALL_C" "$WRK_S" "/v1/sinusoidal?$SMALL_Q"
	SERVER_PIDS=$NGINX_PIDS run_wrk ng_small "$SMALL_C" "$WRK_S" "$NGX/small.json"
	m0=$(metric "$PE" posenc_cache_misses_total)
	PE_COLD_PATH="/v1/sinusoidal?$SMALL_Q" PE_COLD_BASE=$((r * 10000000000)) \
		pe_ab "$r" pe_cold "$COLD_C" "$COLD_S" / tests/bench/cold.lua
	m1=$(metric "$PE" posenc_cache_misses_total)
	COLD_MISSES=$((COLD_MISSES + m1 - m0))
	COLD_REQS=$((COLD_REQS + $(tail -1 "$OUT/wrk/pe_cold.txt" | cut -d' ' -f3)))
	SERVER_PIDS=$NGINX_PIDS run_wrk ng_cold "$COLD_C" "$COLD_S" "$NGX/small.json"
	# mixed: the same cold small misses while MIXED_LARGE_C connections ask for large cold tables
	PE_COLD_PATH="/v1/sinusoidal?$MIXED_LARGE_Q" PE_COLD_BASE=$((r * 10000000000 + 5000000000)) \
		wrk -t1 -c"$MIXED_LARGE_C" -d"$((COLD_S + 1))s" -s tests/bench/cold.lua "$PE/" >"$OUT/wrk/mixed-large.$r.out" 2>&1 &
	LARGE_WRK=$!
	sleep 0.5
	PE_COLD_PATH="/v1/sinusoidal?$SMALL_Q" PE_COLD_BASE=$((r * 10000000000 + 2000000000)) SERVER_PIDS=$HTTP_PID \
		run_wrk pe_mixed "$COLD_C" "$COLD_S" "$PE/" tests/bench/cold.lua
	wait "$LARGE_WRK" || true
	awk '/requests in/ {print $1}' "$OUT/wrk/mixed-large.$r.out" >>"$OUT/wrk/mixed-large.txt"
	[ "$SMALL_ONLY" = 1 ] && continue
	SERVER_PIDS=$HTTP_PID run_wrk pe_large "$LARGE_C" "$WRK_S" "$PE/v1/sinusoidal?$LARGE_Q"
	SERVER_PIDS=$NGINX_PIDS run_wrk ng_large "$LARGE_C" "$WRK_S" "$NGX/large.bin"
done
alive "$DEF_PID" http-default
stop_pid "$DEF_PID"
errs() { awk '$5 != "-" {$1 = $2 = $3 = $4 = ""; print}' "$1" | sort -u | tr '\n' ' '; }
# span FILE N: "lowest–highest" of column N over the runs (the run-to-run noise)
span() { awk -v c="$2" '{print $c}' "$1" | sort -g | awk 'NR == 1 {lo = $1} {hi = $1} END {print lo "–" hi}'; }
http_rows() { # http_rows LABEL PE NG TARGET
	local label=$1 a=$OUT/wrk/$2.txt b=$OUT/wrk/$3.txt lim=$4 ra rb ratio la lb e ca cb
	ca=$(col "$a" 4)
	cb=$(col "$b" 4)
	ra=$(col "$a" 1)
	rb=$(col "$b" 1)
	la=$(col "$a" 2)
	lb=$(col "$b" 2)
	ratio=$(div "$ra" "$rb")
	e="$(errs "$a")$(errs "$b")"
	row "$label: requests/s${e:+ (errors: $e)}" "$(fmt_n "$ra") (n=$(wc -l <"$a"); ${ca} CPU-µs/req)" "nginx $(fmt_n "$rb") (n=$(wc -l <"$b"); ${cb} CPU-µs/req)" "${ratio}× nginx" "≥ ${lim}×" "$(verdict "$ratio" ">=" "$lim")"
	row "$label: p99 latency" "$la ms" "nginx $lb ms" "$(div "$la" "$lb")× nginx's" "reported" "—"
}
http_rows "cached small, 16×16 JSON ($SMALL_BODY B body; headers $SMALL_HDR), wrk -t$WRK_T -c$SMALL_C -d${WRK_S}s (load $(col "$OUT/wrk/pe_small.load" 1))" pe_small ng_small 1.0
[ "$SMALL_ONLY" = 0 ] && http_rows "cached large, 512×768 f32 bin ($(mib "$LARGE_BODY")), wrk -t$WRK_T -c$LARGE_C -d${WRK_S}s" pe_large ng_large 1.0
CR=$(col "$OUT/wrk/pe_cold.txt" 1)
CL=$(col "$OUT/wrk/pe_cold.txt" 2)
row "cold misses, distinct 16×16 JSON (new offset each; $COLD_MISSES misses for $COLD_REQS completed requests), wrk -t$WRK_T -c$COLD_C -d${COLD_S}s cold.lua: requests/s, p99$( e=$(errs "$OUT/wrk/pe_cold.txt"); [ -n "$e" ] && echo " (errors: $e)")" \
	"$(fmt_n "$CR") (n=$(wc -l <"$OUT/wrk/pe_cold.txt"); $(col "$OUT/wrk/pe_cold.txt" 4) CPU-µs/req), p99 $CL ms" "nginx static 16×16 $(fmt_n "$(col "$OUT/wrk/ng_small.txt" 1)"), p99 $(col "$OUT/wrk/ng_small.txt" 2) ms" \
	"$(div "$CR" "$(col "$OUT/wrk/ng_small.txt" 1)")× nginx" "reported" "—"
# The same cold misses against nginx at the same connection count (alternating, same rounds); a miss
# small enough for inline work (inline_max_us) is computed on the HTTP thread without suspending.
NCR=$(col "$OUT/wrk/ng_cold.txt" 1)
row "cold misses, distinct 16×16 JSON, computed inline, beside nginx at the same -c$COLD_C (load $(col "$OUT/wrk/pe_cold.load" 1)): requests/s" \
	"$(fmt_n "$CR") (n=$(wc -l <"$OUT/wrk/pe_cold.txt"))" "nginx static 16×16 -c$COLD_C $(fmt_n "$NCR") (n=$(wc -l <"$OUT/wrk/ng_cold.txt"); $(col "$OUT/wrk/ng_cold.txt" 4) CPU-µs/req)" \
	"$(div "$CR" "$NCR")× nginx" "≥ 0.7×" "$(verdict "$(div "$CR" "$NCR")" ">=" 0.7)"
row "cold misses, distinct 16×16 JSON: p99 latency beside nginx at -c$COLD_C" "$CL ms" "nginx $(col "$OUT/wrk/ng_cold.txt" 2) ms" \
	"$(div "$CL" "$(col "$OUT/wrk/ng_cold.txt" 2)")× nginx's" "reported" "—"
CPU_MISS=$(col "$OUT/wrk/pe_cold.txt" 4)
CPU_HIT=$(col "$OUT/wrk/pe_small.txt" 4)
row "posencd CPU time per cold 16×16 miss against per cached hit (process utime+stime from /proc/PID/stat around each wrk run, divided by its requests)" \
	"$CPU_MISS CPU-µs/miss" "$CPU_HIT CPU-µs/hit" "$(div "$CPU_MISS" "$CPU_HIT")× a hit" "≤ 2×" "$(verdict "$(div "$CPU_MISS" "$CPU_HIT")" "<=" 2)"
# The thread-cache A/B (pe_ab): the same runs on posencd as shipped (glibc's defaults) and with
# GLIBC_TUNABLES=$TUNABLES.
ab_row() { # ab_row LABEL NAME
	local a=$OUT/wrk/$2.txt b=$OUT/wrk/$2_default.txt e
	e="$(errs "$a")$(errs "$b")"
	row "$1: glibc's defaults (as shipped) against GLIBC_TUNABLES=$TUNABLES, two posencds, runs alternating (CPU-µs/req medians, their range over the runs; requests/s)${e:+ (errors: $e)}" \
		"$(col "$a" 4) CPU-µs/req ($(span "$a" 4)), $(fmt_n "$(col "$a" 1)") req/s (n=$(wc -l <"$a"))" \
		"with it: $(col "$b" 4) CPU-µs/req ($(span "$b" 4)), $(fmt_n "$(col "$b" 1)") req/s (n=$(wc -l <"$b"))" \
		"$(div "$(col "$a" 4)" "$(col "$b" 4)")× the CPU, $(div "$(col "$a" 1)" "$(col "$b" 1)")× the req/s" "reported" "—"
}
ab_row "cached small, 16×16 JSON, wrk -c$SMALL_C" pe_small
ab_row "cold misses, distinct 16×16 JSON, wrk -c$COLD_C cold.lua" pe_cold
ML=$(col "$OUT/wrk/pe_mixed.txt" 2)
row "mixed load: cold 16×16 JSON misses (wrk -c$COLD_C) while $MIXED_LARGE_C connections ask for cold $MIXED_LARGE_Q ($(col "$OUT/wrk/mixed-large.txt" 1) large tables per ${COLD_S}s run; load $(col "$OUT/wrk/pe_mixed.load" 1)): small-request p99$( e=$(errs "$OUT/wrk/pe_mixed.txt"); [ -n "$e" ] && echo " (errors: $e)")" \
	"p99 $ML ms, $(fmt_n "$(col "$OUT/wrk/pe_mixed.txt" 1)") small req/s (n=$(wc -l <"$OUT/wrk/pe_mixed.txt"))" "nginx static 16×16 -c$COLD_C p99 $(col "$OUT/wrk/ng_cold.txt" 2) ms" \
	"—" "< 5 ms" "$(verdict "$ML" "<=" 5)"
if [ "$SMALL_ONLY" = 1 ]; then
	stop_pid "$HTTP_PID"
	kill "$NGINX_PID" 2>/dev/null || true
	NGINX_PID=
	{
		echo "- machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) vCPU; load average at the start: $LOAD0, at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
		echo "- posenc $(git rev-parse --short HEAD 2>/dev/null || echo '?'), built -O3 ($BUILD), posencd --workers 2 ${BENCH_PE_ARGS:-} on glibc's defaults (and one with GLIBC_TUNABLES=$TUNABLES, for the A/B rows); medians of $ROUNDS rounds, posencd and nginx alternating"
		echo
		printf '%s\n' "| measurement | posenc | anchor (same run) | ratio | target | verdict |" "|---|---|---|---|---|---|" "${ROWS[@]}"
	} | tee build/bench-small.md
	exit 0
fi

# 50 identical concurrent cold requests: one computation.
SF_URL="$PE/v1/sinusoidal?len=4096&dim=1024&offset=777000111"
j0=$(metric "$PE" posenc_jobs_total)
jn0=$(metric "$PE" posenc_cache_joins_total)
h0=$(metric "$PE" posenc_cache_hits_total)
SF_T0=$(date +%s%N)
printf 'url = "%s"\noutput = "%s"\n' $(for _ in $(seq 50); do echo "$SF_URL" "$OUT/discard"; done) >"$OUT/single-flight.curl"
curl -s --no-progress-meter -Z --parallel-immediate --parallel-max 50 -K "$OUT/single-flight.curl" -w '%{http_code} %{size_download}\n' >"$OUT/single-flight.out" || true
SF_MS=$((($(date +%s%N) - SF_T0) / 1000000))
j1=$(metric "$PE" posenc_jobs_total)
jn1=$(metric "$PE" posenc_cache_joins_total)
h1=$(metric "$PE" posenc_cache_hits_total)
SF_OK=$(awk '$1 == 200' "$OUT/single-flight.out" | wc -l)
SF_SIZES=$(awk '{print $2}' "$OUT/single-flight.out" | sort -u | wc -l)
SF_ONE=$(curl -s -o "$OUT/discard" -w "%{time_total}" "${SF_URL/777000111/777000112}")
SF_JOBS=$((j1 - j0))
row "single flight: 50 identical concurrent cold 4096×1024 JSON requests ($SF_OK × 200, $SF_SIZES distinct body size, $(mib "$(awk 'NR == 1 {print $2}' "$OUT/single-flight.out")") each; $((jn1 - jn0)) joined, $((h1 - h0)) hits; all 50 bodies delivered in $SF_MS ms)" \
	"posenc_jobs_total +$SF_JOBS" "one cold request of the same table (another offset) $(fmt_s "$SF_ONE")" "—" "exactly +1" \
	"$([ "$SF_JOBS" -eq 1 ] && [ "$SF_OK" -eq 50 ] && echo met || echo '**missed**')"

cold_json "$PE" full
cold_json_row fresh "cold 512×768 JSON end to end on a fresh posencd" "≥ 10× faster"
cold_json_row fresh-nowarm "cold 512×768 JSON end to end on a fresh posencd without its warm reserve (--warm-bytes 0; diagnostic)" "—"
cold_json_row full "cold 512×768 JSON end to end on the HTTP section's daemon, its cache full of small entries (diagnostic)" "—"
# A 32 MiB npy POST round trip to /v1/rope/apply, beside PyTorch's in-process apply (kernel rows).
# The body: a [1, 32, 2048, 128] float32 npy whose data are a (finite) 65536×128 table from posencd.
# curl receives the answer and drops it (-o /dev/null), as the cold JSON rows do: PyTorch's side
# writes its result nowhere, and writing 32 MiB into a file costs curl ~20 ms on the Intel VM.
if [ -n "$(skipped rope_apply "$K")" ]; then
	row "RoPE apply over HTTP: 32 MiB npy POST round trip" "skipped: $(skipped rope_apply "$K")" "PyTorch in-process apply" "—" "beat PyTorch" "—"
else
	hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (1, 32, 2048, 128), }"
	pad=$(((64 - (10 + ${#hdr} + 1) % 64) % 64))
	{
		printf '\x93NUMPY\x01\x00'
		printf "\\x$(printf %02x $(((${#hdr} + pad + 1) % 256)))\\x$(printf %02x $(((${#hdr} + pad + 1) / 256)))"
		printf '%s%*s\n' "$hdr" "$pad" ''
		curl -sf "$PE/v1/sinusoidal?len=65536&dim=128&format=bin"
	} >"$OUT/apply-body.npy"
	: >"$OUT/apply-http.txt"
	: >"$OUT/apply-torch.txt"
	for i in $(seq "$ROUNDS"); do
		curl -s -o /dev/null -w '%{time_total} %{http_code} %{size_download}\n' -H 'Content-Type: application/x-npy' \
			--data-binary @"$OUT/apply-body.npy" "$PE/v1/rope/apply?offset=$i" >>"$OUT/apply-http.txt"
		if [ -n "$TORCH_APPLY_S" ]; then
			"$PY" tests/bench/bench_py.py 1 apply >>"$OUT/apply-torch.txt" 2>>"$OUT/bench_py.err" || true
		fi
	done
	if [ -n "$TORCH_APPLY_S" ]; then
		TORCH_APPLY_S=$(median torch_rope_apply "$OUT/apply-torch.txt" | cut -d' ' -f1)
	fi
	AH=$(col "$OUT/apply-http.txt" 1)
	AH_OK=$(awk '$2 == 200' "$OUT/apply-http.txt" | wc -l)
	if [ -n "$TORCH_APPLY_S" ]; then
		R=$(div "$TORCH_APPLY_S" "$AH")
		row "RoPE apply over HTTP: 32 MiB npy POST round trip, curl, answer received and dropped ($AH_OK/$(wc -l <"$OUT/apply-http.txt") × 200)" "$(fmt_s "$AH") (n=$(wc -l <"$OUT/apply-http.txt"))" \
			"PyTorch in-process apply, alternating with these requests $(fmt_s "$TORCH_APPLY_S") (n=$(median torch_rope_apply "$OUT/apply-torch.txt" | cut -d' ' -f2))" "$(faster "$R")" "beat PyTorch (≥ 1×)" "$(verdict "$R" ">=" 1)"
	else
		row "RoPE apply over HTTP: 32 MiB npy POST round trip" "$(fmt_s "$AH")" "skipped: torch not installed" "—" "beat PyTorch" "—"
	fi
fi
alive "$HTTP_PID" http
CHECK_PID=
stop_pid "$HTTP_PID"
kill "$NGINX_PID" 2>/dev/null || true
NGINX_PID=

# ================================================================ 3. memory
log "memory: one 64 Mi-element table; 10 000 mixed requests with a 64 MiB cache"
start_posencd mem-big --workers 2 --cache-bytes 1Gi --max-elements 67108864
idle=$(status_kb "$PD_PID" VmRSS)
code=$(curl -s -o "$OUT/discard" -w '%{http_code} %{size_download}' "$PD_URL/v1/sinusoidal?len=65536&dim=1024&format=bin")
alive "$PD_PID" mem-big
hwm=$(status_kb "$PD_PID" VmHWM)
TABLE=$((65536 * 1024 * 4))
row "peak RSS (VmHWM), one 65536×1024 f32 bin request (64 Mi elements; HTTP $code B)" "$(mib $((hwm * 1024)))" \
	"the table $(mib $TABLE) + idle RSS $(mib $((idle * 1024)))" "$(div $((hwm * 1024)) $((TABLE + idle * 1024)))× table+idle" "reported" "—"
stop_pid "$PD_PID"

CACHE=$((64 * 1048576))
start_posencd mem-mixed --workers 2 --cache-bytes $CACHE
idle=$(status_kb "$PD_PID" VmRSS)
# 10 000 requests, fixed seed: 5 lengths × 4 widths × 3 variants × 3 formats × offsets 0..199
# (skewed towards small offsets, so some repeat and hit); far more distinct bytes than 64 MiB.
awk -v url="$PD_URL" -v out="$OUT/discard" 'BEGIN {
	srand(42); split("16 64 128 256 512", L); split("16 64 128 256", D);
	split("vaswani concat t2t", V); split("json bin npy", F);
	for (i = 0; i < 10000; i++) {
		o = int(200 * rand() ^ 2);
		printf "url = \"%s/v1/sinusoidal?len=%s&dim=%s&variant=%s&format=%s&offset=%d\"\noutput = \"%s\"\n",
			url, L[1 + int(5 * rand())], D[1 + int(4 * rand())], V[1 + int(3 * rand())], F[1 + int(3 * rand())], o, out
	}}' >"$OUT/mixed.curl"
curl -s --no-progress-meter -Z --parallel-max 16 -K "$OUT/mixed.curl" -w '%{http_code}\n' >"$OUT/mixed.out" || true
alive "$PD_PID" mem-mixed
rss=$(status_kb "$PD_PID" VmRSS)
hwm=$(status_kb "$PD_PID" VmHWM)
cb=$(metric "$PD_URL" posenc_cache_bytes)
ev=$(metric "$PD_URL" posenc_cache_evictions_total)
hits=$(metric "$PD_URL" posenc_cache_hits_total)
ok=$(grep -c '^200$' "$OUT/mixed.out" || true)
OVER=$((32 * 1048576))
BUDGET=$((CACHE + idle * 1024 + OVER))
row "RSS after 10 000 mixed requests (curl -Z, 16 at a time; $ok × 200, $hits hits, $ev evictions; cache_bytes gauge $(mib "$cb"); VmHWM $(mib $((hwm * 1024))))" \
	"VmRSS $(mib $((rss * 1024)))" "cache_bytes $(mib $CACHE) + idle RSS $(mib $((idle * 1024))) + 32 MiB in flight = $(mib $BUDGET)" \
	"$(div $((rss * 1024)) $BUDGET)× budget" "≤ 1× budget" "$(verdict "$(div $((rss * 1024)) $BUDGET)" "<=" 1)"
stop_pid "$PD_PID"

checks_section
cli_section
cold_section

# ================================================================ the table
CPU=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
REV="$(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD -- src include 2>/dev/null || echo '+local changes')"
TORCH=$([ -x "$PY" ] && "$PY" -c 'import torch; print("torch", torch.__version__)' 2>/dev/null || echo "no torch")
NUMPY=$([ -x "$PY" ] && "$PY" -c 'import numpy; print("numpy", numpy.__version__)' 2>/dev/null || echo "no numpy")
{
	echo "## posenc benchmarks"
	echo
	echo "- machine: $CPU, $(nproc) cores, $(uname -sr), $(awk '/MemTotal/ {printf "%.0f GiB RAM", $2 / 1048576}' /proc/meminfo)"
	echo "- date: $(date -u '+%Y-%m-%d %H:%M UTC'); posenc $REV, built -O3 ($BUILD), kernels on $ISA"
	echo "- anchors: $(nginx -v 2>&1 | sed 's/.*: //') (worker_processes $NGINX_WORKERS, sendfile on, access_log off, keepalive_requests 1000000, same headers added), wrk $(dpkg-query -W -f='${Version}' wrk 2>/dev/null || echo '?') (-t$WRK_T), jansson $(pkg-config --modversion jansson), $TORCH, $NUMPY"
	echo "- load average (1, 5, 15 min) at the start: $LOAD0; at the end: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here)"
	echo "- kernel rows: medians of $ROUNDS rounds × 3 runs, posenc and its anchor alternating; HTTP rows: medians of $ROUNDS wrk runs, posencd and nginx alternating, both on 127.0.0.1, posencd --workers 2"
	echo
	echo "| measurement | posenc | anchor (same run) | ratio | target | verdict |"
	echo "|---|---|---|---|---|---|"
	printf '%s\n' "${ROWS[@]}"
	echo
	echo "Took $(($(date +%s) - T_START)) s. Raw outputs: build/bench/."
} >build/bench.md
cat build/bench.md
