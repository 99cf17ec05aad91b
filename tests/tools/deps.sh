#!/usr/bin/env bash
# The one place that installs what posenc needs to build, test, fuzz and benchmark: Debian packages
# (apt-get, as root) and the pinned npm packages of tests/package.json (npm ci into
# tests/node_modules). Installs only what is missing; with nothing missing it changes nothing. As a
# user other than root it says which packages are missing and fails; the npm step needs no root.
#
#   tests/tools/deps.sh [GROUP...]    GROUP: build test ops lint browser fuzz bench, or all (default)
#   DEPS_DRY_RUN=1 tests/tools/deps.sh ...   only print what would be installed
#
# The Makefile names the groups each target needs (make test: build test ops lint browser; make
# asan: build test; make bench: build bench; make fuzz: fuzz); `make deps` installs all of them. The
# scripts that use these tools (fuzz.sh, bench.sh, lint-openapi.sh, browser/run.sh) only check them.
set -euo pipefail
cd "$(dirname "$0")/../.."

groups=("$@")
[ ${#groups[@]} -gt 0 ] || groups=(all)
[[ " ${groups[*]} " != *" all "* ]] || groups=(build test ops lint browser fuzz bench)
pkgs=() npm=0 clang=0
for g in "${groups[@]}"; do
	case $g in
	build) pkgs+=(build-essential pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev libsleef-dev libdeflate-dev
		libpng-dev zlib1g-dev nettle-dev libpq-dev) ;;
	# postgresql: the learned_pg and replica tests run a private cluster (initdb, pg_ctl, psql)
	test) pkgs+=(check libsubunit-dev libcurl4-openssl-dev curl openssl python3 iproute2 postgresql) ;;
	ops) pkgs+=(nginx python3-yaml curl postgresql) ;;
	lint) npm=1 ;;
	browser) npm=1 pkgs+=(chromium) ;;
	fuzz) clang=1 pkgs+=(libjansson-dev libsleef-dev libdeflate-dev nettle-dev libpng-dev pkg-config) ;;
	# python3-numpy, python3-torch: the anchors of the kernel and CLI rows (the seeds' NumPy/PyTorch code)
	bench) pkgs+=(nginx wrk curl python3 python3-numpy python3-torch) ;;
	*) echo "deps: unknown group '$g' (build test ops lint browser fuzz bench all)" >&2; exit 2 ;;
	esac
done

installed() { dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q "install ok installed"; }
# Can clang build and link a libFuzzer program with ASan and UBSan?
clang_fuzzer_ok() {
	local c d rc=1
	d=$(mktemp -d)
	printf '#include <stdint.h>\n#include <stddef.h>\nint LLVMFuzzerTestOneInput(const uint8_t *p, size_t n) { (void)p; (void)n; return 0; }\n' >"$d/p.c"
	for c in ${FUZZ_CC:-clang clang-14 clang-15 clang-16}; do
		command -v "$c" >/dev/null 2>&1 && "$c" -fsanitize=fuzzer,address,undefined "$d/p.c" -o "$d/p" >/dev/null 2>&1 &&
			{ rc=0; break; }
	done
	rm -rf "$d"
	return $rc
}

missing=()
for p in $(printf '%s\n' "${pkgs[@]}" | sort -u); do
	case $p in
	# Commands rather than packages where other sources are fine (NodeSource's nodejs ships npm;
	# any nginx flavour; a chromium named by PE_CHROMIUM).
	nginx) command -v nginx >/dev/null 2>&1 || missing+=(nginx) ;;
	chromium) [ -x "${PE_CHROMIUM:-/usr/bin/chromium}" ] || missing+=(chromium) ;;
	*) installed "$p" || missing+=("$p") ;;
	esac
done
if [ "$npm" = 1 ]; then
	command -v node >/dev/null 2>&1 || missing+=(nodejs)
	command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ "$clang" = 1 ] && ! clang_fuzzer_ok; then missing+=(clang libclang-rt-14-dev); fi

if [ ${#missing[@]} -gt 0 ]; then
	if [ -n "${DEPS_DRY_RUN:-}" ]; then
		echo "deps: would apt-get install ${missing[*]}"
	elif [ "$(id -u)" -ne 0 ]; then
		echo "posenc: missing packages: ${missing[*]} (run 'make deps' as root)" >&2
		exit 1
	else
		echo "posenc: installing ${missing[*]}"
		export DEBIAN_FRONTEND=noninteractive
		apt-get update -qq
		apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
		if [ "$clang" = 1 ] && ! clang_fuzzer_ok; then echo "deps: clang cannot build libFuzzer targets" >&2; exit 1; fi
	fi
fi

# The npm packages (Redocly CLI for the lint, playwright-core for the browser tests) at the exact
# versions tests/package.json pins, from tests/package-lock.json.
npm_current() {
	(cd tests && node -e '
		const p = require("./package.json").devDependencies;
		for (const n of Object.keys(p)) {
			let v = "";
			try { v = require("./node_modules/" + n + "/package.json").version; } catch (e) {}
			if (v !== p[n]) process.exit(1);
		}') && [ -x tests/node_modules/.bin/redocly ]
}
if [ "$npm" = 1 ] && ! { command -v node >/dev/null 2>&1 && npm_current; }; then
	if [ -n "${DEPS_DRY_RUN:-}" ]; then
		echo "deps: would npm ci in tests/"
	else
		echo "posenc: installing the npm packages of tests/package.json into tests/node_modules"
		(cd tests && npm ci --no-audit --no-fund --include=dev --loglevel=error)
	fi
fi
exit 0
