#!/usr/bin/env bash
# file_cycles.py must fail on two object files that call each other, and pass when only one calls
# the other (planted in a temp build tree).
set -u
here=$(cd "$(dirname "$0")" && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/obj/src/x"
printf 'int b(void);\nint a(void) { return b(); }\n' >"$tmp/a.c"
printf 'int a(void);\nint b(void) { return 1; }\nint c(void) { return a(); }\n' >"$tmp/b.c"
printf 'int b(void) { return 1; }\n' >"$tmp/b1.c"
pass=0 fail=0
ok() { echo "file-cycles-test: ok: $*"; pass=$((pass + 1)); }
bad() { echo "file-cycles-test: FAIL: $*"; fail=$((fail + 1)); }
cc -c "$tmp/a.c" -o "$tmp/obj/src/x/a.o" && cc -c "$tmp/b.c" -o "$tmp/obj/src/x/b.o" || exit 1
if "$here/file_cycles.py" "$tmp" >/dev/null; then bad "a <-> b passed"; else ok "a <-> b fails"; fi
cc -c "$tmp/b1.c" -o "$tmp/obj/src/x/b.o" || exit 1
if "$here/file_cycles.py" "$tmp" >/dev/null; then ok "a -> b alone passes"; else bad "a -> b alone failed"; fi
echo "file-cycles-test: $pass passed, $fail failed"
[ "$fail" -eq 0 ]
