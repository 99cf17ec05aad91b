#!/usr/bin/env bash
# Tests of tests/tools/layers.py on small trees in a temp dir: a tree that keeps to the layers
# passes; each planted include that reaches up a layer (or into tests/, or to an unknown layer or
# public header) fails and is named in the output. Ends with "layers-test: N passed, M failed".
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
check=$here/layers.py
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pass=0; fail=0

ok() { echo "layers-test: ok: $*"; pass=$((pass + 1)); }
bad() { echo "layers-test: FAIL: $*"; fail=$((fail + 1)); }

tree() { # tree NAME: a fresh tree with one file per layer, each including only what it may
	local t=$work/$1
	mkdir -p "$t"/src/{core,tensor,plan,cache,store,http,daemon,cli,dashboard} "$t"/include/posenc
	touch "$t"/include/posenc/{core,tensor,cache,store,err,plan}.h
	printf '#include <math.h>\n#include "posenc/core.h"\n#include "core/k.h"\n#include "k.h"\n' >"$t/src/core/a.c"
	printf '#include "posenc/core.h"\n' >"$t/src/core/k.h"
	printf '#include "posenc/tensor.h"\n#include "core/k.h"\n' >"$t/src/tensor/t.c"
	printf '#include "posenc/tensor.h"\n#include "core/k.h"\n#include "plan/p.h"\n' >"$t/src/plan/p.c"
	printf '#include "posenc/cache.h"\n#include "store/s.h"\n#include "tensor/t.h"\n' >"$t/src/cache/lru.c"
	printf '#include "posenc/store.h"\n#include "cache/c.h"\n' >"$t/src/store/s.c"
	printf '#include <microhttpd.h>\n#include "posenc/store.h"\n#include "cache/c.h"\n#include "posenc/plan.h"\n' >"$t/src/http/h.c"
	printf '#include "http/h.h"\n#include "posenc/cache.h"\n' >"$t/src/daemon/main.c"
	printf '#include "posenc/tensor.h"\n#include "core/k.h"\n#include "cli/cli.h"\n#include "posenc/plan.h"\n' >"$t/src/cli/main.c"
	printf '<html></html>\n' >"$t/src/dashboard/index.html"
	echo "$t"
}

clean=$(tree clean)
if out=$(python3 "$check" "$clean" 2>&1); then ok "a tree within its layers passes"; else bad "clean tree refused: $out"; fi

# plant FILE LINE WANT: the line added to FILE must fail the check with WANT in its output.
plant() {
	local name=$1 file=$2 line=$3 want=$4 t out
	t=$(tree "$name")
	printf '%s\n' "$line" >>"$t/$file"
	if out=$(python3 "$check" "$t" 2>&1); then
		bad "$file + '$line' passed"
	elif ! grep -qF -- "$want" <<<"$out"; then
		bad "$file + '$line' failed without naming '$want': $out"
	else
		ok "$file + '$line' fails"
	fi
}
plant core-tensor src/core/a.c '#include "tensor/internal.h"' 'src/core/a.c:5: #include "tensor/internal.h"'
plant core-public src/core/k.h '#include "posenc/tensor.h"' 'src/core/k.h:2'
plant tensor-cache src/tensor/t.c '#include "posenc/cache.h"' 'src/tensor/t.c:3'
plant cache-http src/cache/lru.c '#include "http/http.h"' 'src/cache/lru.c:4'
plant store-http src/store/s.c '#include "http/internal.h"' 'src/store/s.c:3'
plant http-daemon src/http/h.c '#include "daemon/pool.h"' 'src/http/h.c:5'
plant daemon-cli src/daemon/main.c '#include "cli/cli.h"' 'src/daemon/main.c:3'
plant cli-cache src/cli/main.c '#include "posenc/cache.h"' 'src/cli/main.c:5'
plant cli-http src/cli/main.c '#include "http/negotiate.h"' 'src/cli/main.c:5'
plant tensor-plan src/tensor/t.c '#include "posenc/plan.h"' 'src/tensor/t.c:3'
plant core-plan src/core/a.c '#include "plan/cfg.h"' 'src/core/a.c:5'
plant cache-plan src/cache/lru.c '#include "plan/cfg.h"' 'src/cache/lru.c:4'
plant store-plan src/store/s.c '#include "posenc/plan.h"' 'src/store/s.c:3'
plant plan-cache src/plan/p.c '#include "posenc/cache.h"' 'src/plan/p.c:4'
plant plan-http src/plan/p.c '#include "http/h.h"' 'src/plan/p.c:4'
plant relative-up src/core/a.c '#include "../http/h.h"' 'src/core/a.c:5'
plant from-tests src/http/h.c '#include "support/pe_check.h"' 'src/ must not include from tests/'
plant unknown-public src/daemon/main.c '#include "posenc/new.h"' 'unknown public header posenc/new.h'
t=$(tree unknown-layer); mkdir -p "$t/src/extra"; printf 'int x;\n' >"$t/src/extra/x.c"
if out=$(python3 "$check" "$t" 2>&1); then bad "src/extra passed"; else ok "an unknown src/ directory fails"; fi

if out=$(python3 "$check" "$here/../.." 2>&1); then ok "this repository keeps to its layers"; else bad "$out"; fi

echo "layers-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
