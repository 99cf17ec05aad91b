#!/usr/bin/env bash
# docker/check-image.sh: the Dockerfile's steps on plain Debian, for machines without a Docker
# engine (make test runs it). The Dockerfile is the single source of truth: this script parses its
# stages and package lists rather than repeating them.
#
#   1. lint   the things the runtime stage must have: both stages on debian:bookworm-slim, a numeric
#             non-root USER, EXPOSE 8080, HEALTHCHECK, STOPSIGNAL SIGTERM, POSENC_DATA_DIR a VOLUME,
#             no GLIBC_TUNABLES in the image, the Kubernetes Deployment or docker/posencd.service
#             (posencd runs on glibc's defaults: docs/configuration.md, Allocator tuning);
#   2. build  copy the build context with .dockerignore's rules and run the build stage's RUN
#             commands in it (the same `make` line the image runs);
#   3. build list   every system header the compiler read, every library and start file the linker
#             opened and every tool the build ran belongs to a package the build stage's apt-get
#             line installs, directly or as a dependency;
#   4. runtime list every library `ldd` reports for that posencd belongs to a package the runtime
#             stage installs (or a dependency of one); every library the binary names itself
#             (DT_NEEDED) is listed explicitly, and every listed package is needed by one;
#   5. self-test    the checks above really fail when a list misses a package: each runtime package
#             is dropped in turn (each must fail), and so is each build -dev package;
#   6. tree   the runtime list and its dependencies, as `apt-get download` + `dpkg -x`, make a fresh
#             root; posencd runs there as PID 1 of a new PID namespace under the image's USER with the
#             image's ENV and a read-only root (only the VOLUME writable), serves a table equal to
#             the host's, the image's health-check script must pass, and SIGTERM must end it with 0.
#
# Usage: docker/check-image.sh [--self-test] [--no-tree] [--runtime-list "PKGS"] [--build-list "PKGS"]
#   --self-test      steps 1-5 only (no downloads)
#   --no-tree        skip step 6
#   --*-list "PKGS"  check against these packages instead of the Dockerfile's (to see a failure)
# Step 6 needs root (chroot, unshare) and the apt package lists; without them it is skipped with a
# message, not failed. Debs are cached in build/check-image/debs. Exit status non-zero on any failure.
set -euo pipefail

repo=$(cd "$(dirname "$0")/.." && pwd)
dockerfile=$repo/Dockerfile
deb_cache=${CHECK_IMAGE_CACHE:-$repo/build/check-image/debs}
self_test=0 tree=1 runtime_override= build_override= have_runtime_override=0 have_build_override=0
while [ $# -gt 0 ]; do
	case $1 in
	--self-test) self_test=1 tree=0 ;;
	--no-tree) tree=0 ;;
	--runtime-list) runtime_override=$2 have_runtime_override=1; shift ;;
	--build-list) build_override=$2 have_build_override=1; shift ;;
	*) echo "usage: $0 [--self-test] [--no-tree] [--runtime-list PKGS] [--build-list PKGS]" >&2; exit 2 ;;
	esac
	shift
done

pass=0 failed=0
work=$(mktemp -d /tmp/posenc-check-image.XXXXXX)
tree_pid=
cleanup() {
	if [ -n "$tree_pid" ] && kill -0 "$tree_pid" 2>/dev/null; then
		kill -KILL "$(cat "/proc/$tree_pid/task/$tree_pid/children" 2>/dev/null)" "$tree_pid" 2>/dev/null || true
		wait "$tree_pid" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap cleanup EXIT
ok() { pass=$((pass + 1)); echo "check-image: ok - $*"; }
bad() { failed=$((failed + 1)); echo "check-image: FAIL - $*"; }
note() { echo "check-image: $*"; }
SECONDS=0
finish() {
	echo "check-image: $pass passed, $failed failed (${SECONDS}s)"
	[ "$failed" -eq 0 ]
	exit
}

# ---- the Dockerfile, as logical instructions: "stage<TAB>stage-name<TAB>INSTRUCTION<TAB>args" ----
# Continuation lines are joined, comment lines dropped (as Docker does, also inside a continuation).
awk '
function emit(s,   instr, rest) {
	sub(/^[ \t]+/, "", s); sub(/[ \t]+$/, "", s)
	if (s == "") return
	instr = s; sub(/[ \t].*/, "", instr); instr = toupper(instr)
	rest = s; sub(/^[^ \t]+[ \t]*/, "", rest)
	if (instr == "FROM") {
		stage++; name = ""
		if (match(rest, /[ \t][Aa][Ss][ \t]+[^ \t]+$/)) { name = substr(rest, RSTART); sub(/.*[ \t]/, "", name) }
	}
	gsub(/\t/, " ", rest)
	printf "%d\t%s\t%s\t%s\n", stage, name, instr, rest
}
/^[ \t]*#/ { next }
{
	line = $0; sub(/\r$/, "", line)
	if (line ~ /\\[ \t]*$/) { sub(/\\[ \t]*$/, "", line); buf = buf line " "; next }
	emit(buf line); buf = ""
}
END { emit(buf) }' "$dockerfile" >"$work/instr"

nstages=$(cut -f1 "$work/instr" | sort -n | tail -1)
build_stage=$(awk -F'\t' '$3 == "FROM" && $2 == "build" { print $1 }' "$work/instr")
final_stage=$nstages
instr() { # instr STAGE INSTRUCTION: the args of each such instruction in that stage, one per line
	awk -F'\t' -v s="$1" -v i="$2" '$1 == s && $3 == i { print $4 }' "$work/instr"
}
apt_packages() { # apt_packages STAGE: the package words of the stage's apt-get install commands
	local run w prev on
	while IFS= read -r run; do
		read -ra words <<<"$run"
		prev= on=0
		for w in "${words[@]}"; do
			if [ "$on" = 1 ]; then
				case $w in
				'&&' | '||' | ';' | '|') on=0 ;;
				-*) ;;
				*) echo "${w%;}"; [ "${w%;}" = "$w" ] || on=0 ;;
				esac
			elif [ "$w" = install ] && [ "$prev" = apt-get ]; then
				on=1
			fi
			prev=$w
		done
	done < <(instr "$1" RUN)
}
json_words() { # ["a", "b"] -> a b, one per line (exec-form instructions; no escapes needed here)
	sed -e 's/^[[:space:]]*\[//' -e 's/\][[:space:]]*$//' <<<"$1" | tr ',' '\n' |
		sed -e 's/^[[:space:]]*"//' -e 's/"[[:space:]]*$//'
}

# ---- 1. lint ----
[ -n "$build_stage" ] && [ "$nstages" -ge 2 ] && ok "two stages, the first named build" ||
	bad "the Dockerfile needs a stage 'FROM ... AS build' and a runtime stage after it"
build_stage=${build_stage:-1}
bases=$(instr "$build_stage" FROM | awk '{print $1}'; instr "$final_stage" FROM | awk '{print $1}')
[ "$(sort -u <<<"$bases")" = debian:bookworm-slim ] && ok "both stages FROM debian:bookworm-slim" ||
	bad "stages must be FROM debian:bookworm-slim (found: $(echo $bases))"
user=$(instr "$final_stage" USER | tail -1)
uid=${user%%:*} gid=${user#*:}
[ "$gid" = "$user" ] && gid=$uid
if [[ $uid =~ ^[0-9]+$ && $gid =~ ^[0-9]+$ && $uid != 0 ]]; then
	ok "runtime USER $uid:$gid is numeric and not root (Kubernetes runAsNonRoot can verify it)"
else
	bad "runtime USER must be a numeric non-root uid[:gid] (found '${user}')"
	uid=65534 gid=65534
fi
grep -qw 8080 <<<"$(instr "$final_stage" EXPOSE)" && ok "EXPOSE 8080" || bad "runtime stage must EXPOSE 8080"
[ "$(instr "$final_stage" STOPSIGNAL | tail -1)" = SIGTERM ] && ok "STOPSIGNAL SIGTERM" || bad "STOPSIGNAL SIGTERM missing"
healthcheck=$(instr "$final_stage" HEALTHCHECK | tail -1)
hc_cmd=$(sed -n 's/.*CMD[[:space:]]*//p' <<<"$healthcheck")
[ -n "$hc_cmd" ] && ok "HEALTHCHECK CMD $hc_cmd" || bad "runtime stage needs HEALTHCHECK ... CMD"
declare -A image_env=()
while IFS= read -r line; do
	for kv in $line; do [[ $kv == *=* ]] && image_env[${kv%%=*}]=${kv#*=}; done
done < <(instr "$final_stage" ENV)
data_dir=${image_env[POSENC_DATA_DIR]:-}
[ "$data_dir" = /var/lib/posenc ] && ok "ENV POSENC_DATA_DIR=$data_dir" || bad "ENV POSENC_DATA_DIR=/var/lib/posenc missing"
grep -q "\"$data_dir\"\|[[:space:]]$data_dir\b\|^$data_dir\b" <<<"$(instr "$final_stage" VOLUME)" &&
	ok "VOLUME $data_dir" || bad "POSENC_DATA_DIR ($data_dir) is not a VOLUME"
# The allocator: glibc's defaults everywhere posenc ships (a tunable that measured no gain is not set).
[ -z "${image_env[GLIBC_TUNABLES]+x}" ] && ok "no ENV GLIBC_TUNABLES" || bad "the image sets GLIBC_TUNABLES"
for f in docker/k8s/deployment.yaml docker/posencd.service; do
	grep -q GLIBC_TUNABLES "$repo/$f" && bad "$f sets GLIBC_TUNABLES" || ok "$f sets no GLIBC_TUNABLES"
done
mapfile -t entrypoint < <(json_words "$(instr "$final_stage" ENTRYPOINT | tail -1)")
[[ ${entrypoint[0]:-} == */posencd ]] && ok "ENTRYPOINT ${entrypoint[*]} (exec form)" ||
	bad "ENTRYPOINT must be the exec form [\".../posencd\"]"

if [ "$have_build_override" = 1 ]; then read -ra build_pkgs <<<"$build_override"; else mapfile -t build_pkgs < <(apt_packages "$build_stage"); fi
if [ "$have_runtime_override" = 1 ]; then read -ra runtime_pkgs <<<"$runtime_override"; else mapfile -t runtime_pkgs < <(apt_packages "$final_stage"); fi
note "build list:   ${build_pkgs[*]:-(none)}"
note "runtime list: ${runtime_pkgs[*]:-(none)}"

# ---- dpkg: who owns a path, and what a list of packages pulls in ----
dpkg-query -W -f='${db:Status-Abbrev}\t${Package}\t${Provides}\t${Pre-Depends}, ${Depends}\n' >"$work/dpkg.db"
installed() { awk -F'\t' -v p="$1" '$1 ~ /^ii/ && $2 == p { f = 1 } END { exit !f }' "$work/dpkg.db"; }
closure() { # closure PKG...: the packages and their Depends/Pre-Depends, recursively (installed ones)
	printf '%s\n' "$@" | awk -F'\t' '
	NR == FNR { if ($1 !~ /^ii/) next
		inst[$2] = 1; deps[$2] = $4
		n = split($3, pv, /, */); for (i = 1; i <= n; i++) { v = pv[i]; sub(/ .*/, "", v); sub(/:.*/, "", v); if (v != "") prov[v] = prov[v] " " $2 }
		next }
	{ queue[++qn] = $1 }
	END {
		for (q = 1; q <= qn; q++) {
			p = queue[q]; if (p in seen) continue; seen[p] = 1; print p
			n = split(deps[p], terms, /, */)
			for (t = 1; t <= n; t++) {
				m = split(terms[t], alts, / *\| */)
				for (a = 1; a <= m; a++) {  # first alternative that is installed or provided
					x = alts[a]; sub(/^ +/, "", x); sub(/[ (].*/, "", x); sub(/:.*/, "", x)
					if (x == "") continue
					if (x in inst) { queue[++qn] = x; break }
					if (x in prov) { k = split(prov[x], ps, " "); for (j = 1; j <= k; j++) queue[++qn] = ps[j]; break }
				}
			}
		}
	}' "$work/dpkg.db" -
}
declare -A owner=()
owners() { # owners PATH...: fill owner[PATH] with its owning package(s), trying the merged-/usr spellings
	local -a dirs reals cands=()
	local i p c
	mapfile -t dirs < <(for p in "$@"; do printf '%s\n' "${p%/*}"; done | xargs -r realpath -m --)
	mapfile -t reals < <(realpath -m -- "$@")
	local -a paths=("$@")
	for i in "${!paths[@]}"; do
		p=${paths[$i]}
		cands+=("$p" "${dirs[$i]}/${p##*/}" "${reals[$i]}")
		[[ $p =~ ^/usr/(lib|lib64|bin|sbin)/ ]] && cands+=("${p#/usr}")
	done
	declare -A by=()
	while IFS=$'\t' read -r path pkgs; do by[$path]=$pkgs; done < <(dpkg -S "${cands[@]}" 2>/dev/null |
		awk -F': ' '/^[^ ]+: \// { p = $1; gsub(/:[a-z0-9]+/, "", p); gsub(/,/, "", p); print $2 "\t" p }')
	for i in "${!paths[@]}"; do
		p=${paths[$i]}
		owner[$p]=
		for c in "$p" "${dirs[$i]}/${p##*/}" "${reals[$i]}" "${p#/usr}"; do
			[ -n "${by[$c]:-}" ] && { owner[$p]=${by[$c]}; break; }
		done
	done
}
declare -A inset=()
load_set() { # load_set PKG...: the set covered() tests against
	inset=()
	local q
	for q in "$@"; do inset[$q]=1; done
}
covered() { # covered "PKG PKG": some package of this owner list is in the set
	local q
	for q in $1; do [ -n "${inset[$q]:-}" ] && return 0; done
	return 1
}

for p in "${build_pkgs[@]}" "${runtime_pkgs[@]}"; do
	installed "$p" || bad "package $p (in the Dockerfile) is not installed here; run make deps"
done

# ---- 2. build with the build stage's commands, in a copy of the context ----
ctx=$work/ctx
mkdir -p "$ctx"
(cd "$repo" && find . -path ./.git -prune -o \( -type f -o -type l \) -print | sed 's|^\./||') |
	awk -v ignore="$repo/.dockerignore" '
	function glob2re(g,   r, i, c) {
		r = ""
		for (i = 1; i <= length(g); i++) {
			c = substr(g, i, 1)
			if (c == "*" && substr(g, i + 1, 1) == "*") { r = r ".*"; i++ }
			else if (c == "*") r = r "[^/]*"
			else if (c == "?") r = r "[^/]"
			else if (index(".+()^$|{}\\", c)) r = r "\\" c
			else r = r c
		}
		return "^" r "(/.*)?$"
	}
	BEGIN {
		while ((getline line < ignore) > 0) {
			sub(/^[ \t]+/, "", line); sub(/[ \t]+$/, "", line)
			if (line == "" || line ~ /^#/) continue
			neg = line ~ /^!/; sub(/^!/, "", line); sub(/^\/+/, "", line); sub(/\/+$/, "", line)
			n++; re[n] = glob2re(line); inc[n] = neg
		}
	}
	{ keep = 1; for (i = 1; i <= n; i++) if ($0 ~ re[i]) keep = inc[i]; if (keep) print }' >"$work/context.list"
tar -C "$repo" -cf - -T "$work/context.list" | tar -C "$ctx" -xf -
note "context: $(wc -l <"$work/context.list") files (.dockerignore applied)"
workdir=$(instr "$build_stage" WORKDIR | tail -1)
build_ok=1
# RUN lines after "COPY . ." are the build; the apt-get line before it is the package list,
# checked below instead of run.
while IFS= read -r cmd; do
	note "RUN $cmd"
	if ! (cd "$ctx" && sh -c "$cmd") >"$work/build.log" 2>&1; then
		tail -20 "$work/build.log"
		build_ok=0
		break
	fi
done < <(awk -F'\t' -v s="$build_stage" '$1 == s && $3 == "COPY" && $4 ~ /^\. / { c = 1; next }
	$1 == s && $3 == "RUN" && c { print $4 }' "$work/instr")
# Where the runtime stage copies the binary from: COPY --from=build <WORKDIR>/<path> <dest>.
read -r copy_src copy_dst < <(instr "$final_stage" COPY | sed -n 's/^--from=build[[:space:]]*//p' | head -1) || true
binary=$ctx/${copy_src#"$workdir"/}
if [ "$build_ok" = 1 ] && [ -x "$binary" ]; then
	ok "build stage commands built ${copy_src#"$workdir"/} (the file COPY --from=build takes)"
else
	bad "the build stage's commands did not produce ${copy_src:-a COPY --from=build source}"
	finish
fi

# ---- 3. the build list covers every system header, library and tool the build used ----
# The Makefile's -MMD leaves system headers out of its .d files, so the same RUN commands run again
# as a dry run (MAKEFLAGS=nB); each compile line is replayed as a preprocessor-only -M run and the
# link line with -Wl,--trace, which names every library and start file the linker opened.
mkdir -p "$work/deps"
while IFS= read -r cmd; do
	(cd "$ctx" && MAKEFLAGS=nB sh -c "$cmd") 2>/dev/null
done < <(awk -F'\t' -v s="$build_stage" '$1 == s && $3 == "COPY" && $4 ~ /^\. / { c = 1; next }
	$1 == s && $3 == "RUN" && c { print $4 }' "$work/instr") >"$work/dryrun"
i=0
while IFS= read -r line; do
	case " $line " in
	*" -c "*" -o "*)
		i=$((i + 1))
		(cd "$ctx" && eval "$(sed -e 's/ -MMD\| -MP//g' -e 's/ -o [^ ]*/ -M -MF "$work\/deps\/'$i'.d"/' <<<"$line")") ||
			bad "dependency replay failed: $line"
		;;
	*" -o ${copy_src#"$workdir"/} "*)
		(cd "$ctx" && eval "$(sed 's/ -o [^ ]*/ -o "$work\/link.out"/' <<<"$line") -Wl,--trace") |
			grep -v ': mode ' >"$work/deps/link.trace" || bad "link replay failed: $line"
		;;
	esac
done <"$work/dryrun"
mapfile -t build_files < <(cat "$work"/deps/*.d "$work/deps/link.trace" 2>/dev/null | tr ' \\' '\n\n' |
	sed 's/^(\(.*\))$/\1/' | grep '^/' | xargs -r realpath -m -s -- | sort -u)
build_tools=()
for t in cc make ar as ld pkg-config; do
	p=$(command -v "$t") && build_tools+=("$(realpath "$p")")
done
owners "${build_files[@]}" "${build_tools[@]}"
check_build_list() { # check_build_list PKG...: 0 when every header and tool is covered
	local f miss=0
	load_set $(closure "$@")
	for f in "${build_files[@]}" "${build_tools[@]}"; do
		[ -n "${owner[$f]}" ] || { echo "  $f: no package owns it"; miss=1; continue; }
		covered "${owner[$f]}" || { echo "  $f: from ${owner[$f]}, not installed by the build list"; miss=1; }
	done
	return $miss
}
if out=$(check_build_list "${build_pkgs[@]}"); then
	ok "build list covers the ${#build_files[@]} system headers and libraries and ${#build_tools[@]} tools the build used"
else
	bad "build list misses packages:"; echo "$out" | sort -u | head -20
fi

# ---- 4. the runtime list covers every library ldd reports ----
mapfile -t libs < <(ldd "$binary" | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// { print $1 }' | sort -u)
mapfile -t needed < <(objdump -p "$binary" | awk '$1 == "NEEDED" { print $2 }')
owners "${libs[@]}"
check_runtime_list() { # check_runtime_list PKG...: 0 when ldd's libraries are covered and the list is lean
	local l n miss=0 p used
	load_set $(closure "$@")
	for l in "${libs[@]}"; do
		[ -n "${owner[$l]}" ] || { echo "  $l: no package owns it"; miss=1; continue; }
		covered "${owner[$l]}" || { echo "  $l: from ${owner[$l]}, not installed by the runtime list"; miss=1; }
	done
	load_set "$@"
	for n in "${needed[@]}"; do # libraries posencd names itself: their packages must be listed
		for l in "${libs[@]}"; do
			[ "${l##*/}" = "$n" ] || continue
			covered "${owner[$l]}" || { echo "  $n (DT_NEEDED): ${owner[$l]} must be in the runtime list itself"; miss=1; }
		done
	done
	for p in "$@"; do # nothing the binary does not need
		used=0
		for n in "${needed[@]}"; do for l in "${libs[@]}"; do
			[ "${l##*/}" = "$n" ] && [[ " ${owner[$l]} " == *" $p "* ]] && used=1
		done; done
		[ "$used" = 1 ] || { echo "  $p: listed, but no library posencd links directly comes from it"; miss=1; }
	done
	return $miss
}
if out=$(check_runtime_list "${runtime_pkgs[@]}"); then
	ok "runtime list covers all ${#libs[@]} libraries ldd reports (${#needed[@]} linked directly), nothing extra"
else
	bad "runtime list does not match ldd:"; echo "$out"
fi

# ---- 5. self-test: the checks fail when a list misses a package ----
if [ "$have_runtime_override" = 0 ] && [ "$have_build_override" = 0 ]; then
	for drop in "${runtime_pkgs[@]}"; do
		short=(); for p in "${runtime_pkgs[@]}"; do [ "$p" = "$drop" ] || short+=("$p"); done
		if out=$(check_runtime_list "${short[@]}"); then
			bad "self-test: the runtime list without $drop passed the ldd check"
		else
			ok "self-test: the runtime list without $drop fails ($(grep -c . <<<"$out") missing)"
		fi
	done
	for drop in "${build_pkgs[@]}"; do
		[[ $drop == *-dev || $drop == build-essential ]] || continue
		short=(); for p in "${build_pkgs[@]}"; do [ "$p" = "$drop" ] || short+=("$p"); done
		if out=$(check_build_list "${short[@]}"); then
			bad "self-test: the build list without $drop passed the header check"
		else
			ok "self-test: the build list without $drop fails ($(sort -u <<<"$out" | grep -c .) files uncovered)"
		fi
	done
fi

# ---- 6. run posencd in a root made of the runtime list only ----
[ "$tree" = 1 ] || finish
if [ "$(id -u)" != 0 ] || ! command -v unshare >/dev/null || ! command -v chroot >/dev/null; then
	note "SKIP runtime tree: needs root, unshare and chroot"
	finish
fi
mapfile -t tree_pkgs < <(closure "${runtime_pkgs[@]}")
mkdir -p "$deb_cache"
if ! apt-get download --print-uris "${tree_pkgs[@]}" >"$work/uris" 2>"$work/uris.err"; then
	note "SKIP runtime tree: apt-get download --print-uris failed ($(head -1 "$work/uris.err"))"
	finish
fi
debs=() missing=()
while read -r _ file _; do
	[ -s "$deb_cache/$file" ] || missing+=("${file%%_*}")
	debs+=("$deb_cache/$file")
done <"$work/uris"
if [ ${#missing[@]} -gt 0 ] &&
	! (cd "$deb_cache" && apt-get download -o APT::Sandbox::User=root "${missing[@]}" >/dev/null 2>"$work/dl.err"); then
	note "SKIP runtime tree: apt-get download failed ($(tail -1 "$work/dl.err"))"
	finish
fi
rootfs=$work/rootfs
mkdir -p "$rootfs"
for d in "${debs[@]}"; do dpkg -x "$d" "$rootfs"; done
# The runtime stage's COPY lines and its RUN that makes the data directory.
while read -r a b c; do
	if [ "$a" = "--from=build" ]; then src=$binary dst=$c; else src=$repo/$a dst=$b; fi
	mkdir -p "$rootfs$(dirname "$dst")"
	cp "$src" "$rootfs$dst"
done < <(instr "$final_stage" COPY)
mkdir -p "$rootfs/proc" "$rootfs/dev" "$rootfs/tmp" "$rootfs$data_dir"
chmod 1777 "$rootfs/tmp"
chown "$uid:$gid" "$rootfs$data_dir"
note "tree: ${#debs[@]} packages ($(du -sh "$rootfs" | cut -f1)): ${tree_pkgs[*]}"
envs=(PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOSTNAME=posenc)
for k in "${!image_env[@]}"; do envs+=("$k=${image_env[$k]}"); done
# `docker run IMAGE --port 0 --bind 127.0.0.1`: arguments after the image go to the ENTRYPOINT.
# The root is mounted read-only (as Kubernetes' readOnlyRootFilesystem), the data directory
# writable (the VOLUME), /dev bound from the host; all inside a private mount namespace.
unshare --pid --fork --mount --mount-proc="$rootfs/proc" \
	bash -c 'mount --rbind "$1" "$1" && mount --bind /dev "$1/dev" && mount --bind "$1$2" "$1$2" &&
		mount -o remount,bind,ro "$1" && shift 2 && exec "$@"' _ "$rootfs" "$data_dir" \
	env -i "${envs[@]}" chroot --userspec="$uid:$gid" "$rootfs" "${entrypoint[@]}" --port 0 --bind 127.0.0.1 \
	>"$work/tree.out" 2>"$work/tree.err" &
tree_pid=$!
port=
for _ in $(seq 100); do
	port=$(sed -n 's/.*"event":"start".*"port":\([0-9]*\).*/\1/p' "$work/tree.out" 2>/dev/null | head -1)
	[ -n "$port" ] || ! kill -0 "$tree_pid" 2>/dev/null && break
	sleep 0.05
done
if [ -z "$port" ]; then
	bad "posencd did not start in the runtime tree: $(cat "$work/tree.err" "$work/tree.out" | head -5)"
	finish
fi
ok "posencd started in the runtime tree as PID 1, uid $uid, read-only root, port $port"
mapfile -t hc_words < <(json_words "$hc_cmd")
hc=$rootfs${hc_words[0]}
if POSENC_PORT=$port bash "$hc" "${hc_words[@]:1}" && POSENC_PORT=$port bash "$hc" /readyz; then
	ok "the image's health check (${hc#"$rootfs"}) passes: /healthz and /readyz 200"
else
	bad "the image's health check fails against the running daemon"
fi
url="http://127.0.0.1:$port/v1/sinusoidal?len=64&dim=32&dtype=f64&format=bin"
if command -v curl >/dev/null; then
	code=$(curl -s -o "$work/tree.bin" -w '%{http_code}' "$url" || true)
	"$binary" --port 0 --bind 127.0.0.1 >"$work/host.out" 2>/dev/null &
	host_pid=$!
	hport=
	for _ in $(seq 100); do
		hport=$(sed -n 's/.*"event":"start".*"port":\([0-9]*\).*/\1/p' "$work/host.out" 2>/dev/null | head -1)
		[ -n "$hport" ] && break; sleep 0.05
	done
	curl -s -o "$work/host.bin" "${url/:$port/:$hport}" || true
	kill -TERM "$host_pid"; wait "$host_pid" || true
	if [ "$code" = 200 ] && [ -s "$work/tree.bin" ] && cmp -s "$work/tree.bin" "$work/host.bin"; then
		ok "a table from the tree's libraries is byte-identical to the host's ($(stat -c %s "$work/tree.bin") bytes)"
	else
		bad "table from the runtime tree: status $code, differs from the host build"
	fi
fi
inner=$(cat "/proc/$tree_pid/task/$tree_pid/children" 2>/dev/null || true)
kill -TERM "${inner:-$tree_pid}"
rc=0
timeout 10 tail --pid="$tree_pid" -f /dev/null || kill -KILL "${inner:-$tree_pid}" 2>/dev/null || true
wait "$tree_pid" || rc=$?
tree_pid=
if [ "$rc" = 0 ] && grep -q '"event":"stop"' "$work/tree.out"; then
	ok "SIGTERM to PID 1 drained and exited 0"
else
	bad "after SIGTERM posencd exited $rc: $(tail -3 "$work/tree.out" "$work/tree.err")"
fi
if POSENC_PORT=$port bash "$hc" "${hc_words[@]:1}" 2>/dev/null; then bad "the health check passes with no daemon running"; else ok "the health check fails once the daemon is gone"; fi
finish
