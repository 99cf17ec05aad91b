#!/usr/bin/env bash
# Build the libFuzzer targets of tests/fuzz/ with clang under ASan + UBSan and run each for
# FUZZ_SECONDS (default 60). Fails (non-zero) on any finding: a crash, a sanitizer report, a
# failed check inside a target, a leak, a timeout or running out of memory; the input that caused
# it is written to build/fuzz/crashes/<target>-*.
#
#   tests/tools/fuzz.sh                     build and run every target for FUZZ_SECONDS each
#   tests/tools/fuzz.sh npy json_tensor     only these targets
#   FUZZ_SECONDS=0 tests/tools/fuzz.sh      build, then replay the seed corpora once (a regression run)
#   FUZZ_BUILD_ONLY=1 tests/tools/fuzz.sh   build only
#
# The library sources are compiled here with clang and -fsanitize=fuzzer-no-link (coverage for
# the fuzzer, ASan, UBSan): build/libposenc.a is gcc-built without that instrumentation. The
# config target also needs src/daemon/config.c and the embedded defaults (src/daemon/assets.S);
# the framing target the HTTP layer's pure parsers (src/http/framing.c; negotiation is in src/tensor/);
# the multipart target src/http/multipart.c over libmicrohttpd's MHD_PostProcessor.
# Each run starts from the committed seeds (tests/fuzz/corpus/<target>/) plus what earlier runs
# found (build/fuzz/corpus/<target>/, not committed). clang and the compiler-rt runtime come from
# `make deps` (tests/tools/deps.sh fuzz); `make fuzz` runs that first.
set -euo pipefail
cd "$(dirname "$0")/../.."

SECONDS_PER_TARGET=${FUZZ_SECONDS:-60}
OUT=build/fuzz
ALL_TARGETS=(params npy json_tensor config shortest framing segments multipart plan axial timesteps query)
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=("${ALL_TARGETS[@]}")

# ---- toolchain ----
CLANG=${FUZZ_CC:-}
if [ -z "$CLANG" ]; then
	for c in clang clang-14 clang-15 clang-16; do
		if command -v "$c" >/dev/null 2>&1; then CLANG=$c; break; fi
	done
fi
probe() { # can $CLANG build and link a libFuzzer program?
	[ -n "$CLANG" ] || return 1
	local d; d=$(mktemp -d)
	printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { (void)d; (void)n; return 0; }\n' >"$d/p.c"
	"$CLANG" -fsanitize=fuzzer,address,undefined "$d/p.c" -o "$d/p" >/dev/null 2>&1
	local rc=$?
	rm -rf "$d"
	return $rc
}
probe || { echo "fuzz: ${CLANG:-clang} cannot build libFuzzer targets (run 'make deps' as root)" >&2; exit 1; }

# ---- build ----
SAN="-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer"
# The library is compiled as the Makefile compiles it, without -Itests; the fuzz targets see tests/.
CFLAGS="-std=c11 -ffp-contract=off -D_GNU_SOURCE -g -O1 -Wall -Wextra -Wno-unused-parameter -fno-strict-aliasing \
	-Iinclude -Isrc $(pkg-config --cflags jansson) $(pkg-config --cflags libpq) $SAN"
# The core libraries as the Makefile links them (LIBS_CORE), so a new dependency needs no edit here.
LIBS_CORE=$(sed -n 's/^LIBS_CORE *:= *//p' Makefile)
LIBS="$(pkg-config --libs jansson libmicrohttpd) ${LIBS_CORE:--ldeflate -lsleef -lm} -pthread"
mkdir -p "$OUT/obj" "$OUT/crashes"

# Compile src when its object is missing or older than it, any header, this script (flags) or
# the clang shim: cheap, and never a stale object.
newest=$(find include src tests/fuzz/isa_compat.h tests/tools/fuzz.sh -name '*.h' -printf '%T@\n' -o \
	-name fuzz.sh -printf '%T@\n' | sort -n | tail -1)
newest=${newest%.*}
compile() { # src obj extra-flags...
	local src=$1 obj=$2; shift 2
	if [ -f "$obj" ]; then
		local ot st; ot=$(stat -c %Y "$obj"); st=$(stat -c %Y "$src")
		if [ "$ot" -ge "$st" ] && [ "$ot" -ge "$newest" ]; then return 0; fi
	fi
	mkdir -p "$(dirname "$obj")"
	# shellcheck disable=SC2086
	"$CLANG" $CFLAGS "$@" -c "$src" -o "$obj"
}

lib_objs=()
for src in src/core/*.c src/tensor/*.c src/plan/*.c src/cache/*.c src/store/*.c src/daemon/config.c src/http/framing.c src/http/media.c src/http/multipart.c src/http/query.c; do
	obj="$OUT/obj/${src%.c}.o"
	extra=(-fsanitize=fuzzer-no-link)
	case "$src" in
	*_avx2.c) extra+=(-mavx2 -mfma -mf16c) ;;
	*_avx512.c) extra+=(-mavx512f -mavx512dq -mavx512cd -mavx512bw -mavx512vl -mavx2 -mfma -mf16c) ;;
	esac
	[ "$src" != src/core/isa.c ] || extra+=(-include tests/fuzz/isa_compat.h)
	compile "$src" "$obj" "${extra[@]}"
	lib_objs+=("$obj")
done
# The embedded config/posenc.json and openapi.yaml (config.c reads its defaults from them).
assets="$OUT/obj/src/daemon/assets.o"
if [ ! -f "$assets" ] || [ config/posenc.json -nt "$assets" ] || [ openapi.yaml -nt "$assets" ] ||
	[ src/daemon/assets.S -nt "$assets" ]; then
	"$CLANG" -I. -c src/daemon/assets.S -o "$assets"
fi
rm -f "$OUT/libposenc-fuzz.a"
ar rcs "$OUT/libposenc-fuzz.a" "${lib_objs[@]}" "$assets"

for t in "${TARGETS[@]}"; do
	[ -f "tests/fuzz/fuzz_$t.c" ] || { echo "fuzz: no target '$t' (tests/fuzz/fuzz_$t.c)" >&2; exit 2; }
	# shellcheck disable=SC2086
	"$CLANG" $CFLAGS -Itests -Werror -fsanitize=fuzzer "tests/fuzz/fuzz_$t.c" "$OUT/libposenc-fuzz.a" $LIBS \
		-o "$OUT/fuzz_$t"
done
echo "fuzz: built ${TARGETS[*]} with $CLANG into $OUT/"
[ -z "${FUZZ_BUILD_ONLY:-}" ] || exit 0

# ---- run ----
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
pass=0; fail=0; failed=()
for t in "${TARGETS[@]}"; do
	seeds="tests/fuzz/corpus/$t"
	work="$OUT/corpus/$t"
	mkdir -p "$work" "$seeds"
	dict=()
	[ -f "tests/fuzz/$t.dict" ] && dict=(-dict="tests/fuzz/$t.dict")
	gen=()
	if [ "$t" = params ]; then # seeds and a dictionary for every table of the registry
		rm -rf "$OUT/gen/params"; mkdir -p "$OUT/gen/params/seeds"
		PE_FUZZ_WRITE_SEEDS="$OUT/gen/params" "$OUT/fuzz_params" >/dev/null 2>&1
		dict=(-dict="$OUT/gen/params/params.dict")
		gen=("$OUT/gen/params/seeds")
	fi
	log="$OUT/$t.log"
	if [ "$SECONDS_PER_TARGET" -eq 0 ]; then
		mapfile -t files < <(find "$seeds" "${gen[@]}" -type f | sort)
		echo "fuzz: $t: replaying ${#files[@]} seeds"
		[ ${#files[@]} -gt 0 ] || { pass=$((pass + 1)); continue; }
		args=("${files[@]}")
	else
		echo "fuzz: $t: fuzzing for ${SECONDS_PER_TARGET}s (log $log)"
		args=(-max_total_time="$SECONDS_PER_TARGET" -print_final_stats=1 "$work" "$seeds" "${gen[@]}")
	fi
	if "$OUT/fuzz_$t" -timeout=10 -rss_limit_mb=2560 -malloc_limit_mb=2048 -max_len=65536 \
		-artifact_prefix="$OUT/crashes/$t-" "${dict[@]}" "${args[@]}" >"$log" 2>&1; then
		pass=$((pass + 1))
		grep -E '^(stat::number_of_executed_units|stat::peak_rss_mb|#[0-9]+.*DONE)' "$log" | tr '\n' ' ' | sed 's/^/  /' || true
		echo
	else
		fail=$((fail + 1)); failed+=("$t")
		echo "fuzz: $t: FINDING (see $log; inputs in $OUT/crashes/):"
		grep -E 'ERROR|SUMMARY|fuzz_[a-z_]+:|runtime error|Test unit written|artifact' "$log" | head -20 | sed 's/^/  /' || true
	fi
done
[ ${#failed[@]} -eq 0 ] || printf 'fuzz: FAILED: %s\n' "${failed[*]}"
printf 'fuzz: %d passed, %d failed\n' "$pass" "$fail"
[ "$fail" -eq 0 ]
