#!/usr/bin/env bash
# Scale-out: three posencd replicas behind a real nginx (Debian's) running docker/nginx/posenc-lb.conf,
# all on loopback in a temporary prefix. Checks that
#   - every replica, and nginx, give identical bytes and ETags, and an ETag from one replica is a
#     304 on another (so caches in front can mix replicas);
#   - one replica SIGKILLed in the middle of a stream of requests through nginx loses none (nginx
#     sends the failed idempotent GETs to the next replica);
#   - a SIGTERMed replica drains: /readyz turns 503 (or new connections fail) while a slow
#     request is still in flight, that request completes with 200 and every byte, the daemon exits
#     0, and requests through nginx meanwhile all succeed;
#   - learned tables, with the replicas sharing one PostgreSQL store (store_url; a private cluster
#     made with initdb in the temporary prefix, on a free loopback port): a table PUT through nginx
#     is served by every replica within a second with the same bytes and ETag, and so are its
#     replacement and its deletion.
# Everything it starts is stopped by the EXIT trap, also on failure or interrupt. Needs nginx,
# curl, python3 and PostgreSQL's initdb/pg_ctl (Debian's postgresql; as root they run as the
# postgres user); uses build/posencd (POSENCD=path to override; SCALEOUT_KEEP=1 keeps the logs in
# /tmp). Prints "scaleout: N passed, M failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
daemon=${POSENCD:-$repo/build/posencd}
lbconf=$repo/docker/nginx/posenc-lb.conf
nginx_bin=$(command -v nginx || echo /usr/sbin/nginx)
tmp=$(mktemp -d /tmp/posenc-scaleout.XXXXXX)
pass=0 failed=0
replica_pid=() replica_port=() bg_pids=()
nginx_started=0 pg_started=0
pg_bin=${PE_PG_BINDIR:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1)}
as_pg() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else "$@"; fi; }

cleanup() {
	local p
	for p in "${bg_pids[@]}" "${replica_pid[@]}"; do
		[ -n "$p" ] && { kill -KILL "$p"; wait "$p"; } 2>/dev/null
	done
	if [ "$nginx_started" = 1 ] && [ -s "$tmp/nginx.pid" ]; then
		kill -QUIT "$(cat "$tmp/nginx.pid")" 2>/dev/null
		for _ in $(seq 50); do [ -e "$tmp/nginx.pid" ] || break; sleep 0.05; done
		[ -s "$tmp/nginx.pid" ] && kill -KILL "$(cat "$tmp/nginx.pid")" 2>/dev/null
	fi
	if [ "$pg_started" = 1 ]; then
		as_pg "$pg_bin/pg_ctl" -D "$tmp/pg/data" -m immediate -w stop >/dev/null 2>&1
	fi
	wait 2>/dev/null
	exec 3>&- 2>/dev/null
	if [ -n "${SCALEOUT_KEEP:-}" ]; then echo "scaleout: kept $tmp"; else rm -rf "$tmp"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

ok() { pass=$((pass + 1)); echo "scaleout: ok - $*"; }
bad() { failed=$((failed + 1)); echo "scaleout: FAIL - $*"; }
check() { local what=$1; shift; if "$@"; then ok "$what"; else bad "$what"; fi; }
finish() {
	echo "scaleout: $pass passed, $failed failed"
	[ "$failed" -eq 0 ]
	exit
}

for tool in "$daemon" "$nginx_bin" curl sha256sum python3 "$pg_bin/initdb" "$pg_bin/pg_ctl"; do
	command -v "$tool" >/dev/null 2>&1 || { bad "$tool is missing (make all; make deps installs nginx, curl, postgresql)"; finish; }
done

# ---- the shared store: a private PostgreSQL cluster on a free loopback port ----
start_pg() {
	mkdir -p "$tmp/pg"
	[ "$(id -u)" = 0 ] && chown postgres "$tmp/pg"
	as_pg "$pg_bin/initdb" -D "$tmp/pg/data" -U posenc --auth=trust -N -E UTF8 --locale=C >"$tmp/pg/initdb.out" 2>&1 ||
		return 1
	for _ in 1 2 3 4 5; do
		pgport=$((20000 + RANDOM % 40000))
		if as_pg "$pg_bin/pg_ctl" -D "$tmp/pg/data" -l "$tmp/pg/log" -w -t 60 \
			-o "-p $pgport -k $tmp/pg -c listen_addresses=127.0.0.1 -c fsync=off" start >/dev/null 2>&1; then
			pg_started=1
			store_url="postgresql://posenc@127.0.0.1:$pgport/postgres"
			return 0
		fi
	done
	return 1
}
chmod 0755 "$tmp"
start_pg || { bad "PostgreSQL did not start: $(tail -3 "$tmp/pg/initdb.out" "$tmp/pg/log" 2>/dev/null)"; finish; }
ok "PostgreSQL on 127.0.0.1:$pgport, the replicas' shared store of learned tables"

# ---- three replicas on free loopback ports: the port comes from the JSON start line ----
start_replica() { # start_replica INDEX
	local i=$1 port=
	"$daemon" --port 0 --bind 127.0.0.1 --data-dir "$tmp/data$i" --store-url "$store_url" --workers 1 \
		--shutdown-timeout 20 --log-level info \
		>"$tmp/r$i.out" 2>"$tmp/r$i.err" &
	replica_pid[$i]=$!
	for _ in $(seq 100); do
		port=$(sed -n 's/.*"event":"start".*"port":\([0-9]*\).*/\1/p' "$tmp/r$i.out" 2>/dev/null | head -1)
		[ -n "$port" ] && break
		kill -0 "${replica_pid[$i]}" 2>/dev/null || break
		sleep 0.05
	done
	replica_port[$i]=$port
	[ -n "$port" ]
}
for i in 1 2 3; do
	start_replica "$i" || { bad "replica $i did not start: $(head -3 "$tmp/r$i.err")"; finish; }
done
ok "three replicas on 127.0.0.1 ports ${replica_port[*]}"

# ---- nginx with the shipped config: only the replicas, listen and cache-path lines rewritten ----
chmod 0755 "$tmp" # nginx workers run as nobody
start_nginx() {
	lbport=$1
	awk -v ports="${replica_port[*]}" -v lbport="$lbport" -v tmp="$tmp" '
	/# replicas$/ {
		if (!done) { n = split(ports, p, " "); for (i = 1; i <= n; i++)
			printf "    server 127.0.0.1:%s max_fails=1 fail_timeout=5s;\n", p[i] }
		done = 1; next }
	/# listen$/ { print "    listen 127.0.0.1:" lbport ";"; next }
	/# cache path$/ { sub(/proxy_cache_path [^ ]+/, "proxy_cache_path " tmp "/cache") }
	{ gsub(/\/var\/log\/nginx\//, tmp "/") ; print }' "$lbconf" >"$tmp/posenc-lb.conf"
	cat >"$tmp/nginx.conf" <<-EOF
	worker_processes 2;
	pid $tmp/nginx.pid;
	error_log $tmp/error.log info;
	events { worker_connections 1024; }
	http {
	    client_body_temp_path $tmp/client_body;
	    proxy_temp_path $tmp/proxy_temp;
	    fastcgi_temp_path $tmp/fastcgi_temp;
	    uwsgi_temp_path $tmp/uwsgi_temp;
	    scgi_temp_path $tmp/scgi_temp;
	    include $tmp/posenc-lb.conf;
	}
	EOF
	"$nginx_bin" -t -q -p "$tmp" -c "$tmp/nginx.conf" 2>"$tmp/nginx-t.err" || return 2
	"$nginx_bin" -p "$tmp" -c "$tmp/nginx.conf" 2>>"$tmp/error.log" || return 1
	nginx_started=1
	for _ in $(seq 100); do
		[ "$(curl -s -o "$tmp/discard" -w '%{http_code}' "http://127.0.0.1:$lbport/lb-healthz")" = 200 ] && return 0
		sleep 0.05
	done
	kill -QUIT "$(cat "$tmp/nginx.pid" 2>/dev/null)" 2>/dev/null
	for _ in $(seq 50); do [ -e "$tmp/nginx.pid" ] || break; sleep 0.05; done
	nginx_started=0
	return 1
}
lb=
for _ in 1 2 3 4 5; do
	cand=$((20000 + RANDOM % 40000))
	start_nginx "$cand"
	case $? in
	0) lb=$cand; break ;;
	2) bad "nginx -t rejects the generated config: $(cat "$tmp/nginx-t.err")"; finish ;;
	esac
done
[ -n "$lb" ] || { bad "nginx did not start: $(tail -3 "$tmp/error.log")"; finish; }
ok "nginx $("$nginx_bin" -v 2>&1 | sed 's/.*\///') on 127.0.0.1:$lb in front of them (docker/nginx/posenc-lb.conf)"

# ---- identical bytes and ETags everywhere ----
get() { # get URL NAME [curl args...]: body in $tmp/NAME.body, headers in $tmp/NAME.hdr; prints status
	local url=$1 name=$2; shift 2
	curl -sS -o "$tmp/$name.body" -D "$tmp/$name.hdr" -w '%{http_code}' "$@" "$url" 2>>"$tmp/curl.err" || true
}
header() { sed -n "s/^$2: *//Ip" "$tmp/$1.hdr" | tr -d '\r' | head -1; }
urls=(
	"/v1/sinusoidal?len=128&dim=64"
	"/v1/sinusoidal?len=256&dim=96&dtype=f64&format=npy&offset=1000"
	"/v1/sinusoidal?len=100&dim=32&format=bin&compat=hf"
	"/v1/sinusoidal?len=64&dim=33&variant=t2t&format=bin"
	"/v1/sinusoidal?len=50&dim=16&variant=concat&format=csv"
)
same_everywhere() {
	local u=$1 i ref_sum= ref_etag= sum etag code k
	for i in 1 2 3; do
		code=$(get "http://127.0.0.1:${replica_port[$i]}$u" "r$i")
		[ "$code" = 200 ] || { echo "  replica $i: status $code for $u"; return 1; }
		sum=$(sha256sum <"$tmp/r$i.body") etag=$(header "r$i" ETag)
		[ -n "$etag" ] || { echo "  replica $i: no ETag for $u"; return 1; }
		if [ -z "$ref_sum" ]; then ref_sum=$sum ref_etag=$etag
		elif [ "$sum" != "$ref_sum" ] || [ "$etag" != "$ref_etag" ]; then
			echo "  replica $i differs from replica 1 for $u ($etag vs $ref_etag)"; return 1
		fi
	done
	for k in 1 2; do # through nginx: a miss, then (cache on) a hit, both the same bytes and ETag
		code=$(get "http://127.0.0.1:$lb$u" "lb$k")
		[ "$code" = 200 ] && [ "$(sha256sum <"$tmp/lb$k.body")" = "$ref_sum" ] && [ "$(header "lb$k" ETag)" = "$ref_etag" ] ||
			{ echo "  nginx ($k) differs for $u: status $code, ETag $(header "lb$k" ETag)"; return 1; }
	done
	[ "$(header lb2 X-Cache-Status)" = HIT ] || { echo "  second request through nginx not a cache HIT: $(header lb2 X-Cache-Status)"; return 1; }
	# An ETag from replica 1 revalidates on replica 3 and through nginx.
	code=$(get "http://127.0.0.1:${replica_port[3]}$u" inm -H "If-None-Match: $ref_etag")
	[ "$code" = 304 ] || { echo "  replica 3 answered $code to replica 1's ETag for $u"; return 1; }
	code=$(get "http://127.0.0.1:$lb$u" inm -H "If-None-Match: $ref_etag")
	[ "$code" = 304 ] || { echo "  nginx answered $code to If-None-Match for $u"; return 1; }
}
for u in "${urls[@]}"; do
	check "same bytes and ETag from replicas 1-3 and nginx (miss, then HIT), 304 across replicas: $u" same_everywhere "$u"
done

# ---- learned tables: written through nginx, read from every replica ----
npy() { # npy FILE ROWS COLS SEED: a float32 table, and the sha256 of its elements on stdout
	python3 - "$@" <<-'PY'
	import hashlib, math, struct, sys
	path, rows, cols, seed = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
	data = struct.pack("<%df" % (rows * cols), *[seed + math.sin(i * 0.37) for i in range(rows * cols)])
	head = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
	head += " " * ((64 - (10 + len(head) + 1) % 64) % 64) + "\n"
	with open(path, "wb") as f:
	    f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(head)) + head.encode() + data)
	print(hashlib.sha256(data).hexdigest())
	PY
}
put_lb() { # put_lb NAME FILE: the status of a PUT through nginx
	curl -sS -o "$tmp/put.body" -w '%{http_code}' -X PUT -H 'Content-Type: application/x-npy' \
		--data-binary "@$2" "http://127.0.0.1:$lb/v1/learned/$1" 2>>"$tmp/curl.err" || true
}
# every_replica NAME WANT [SHA]: within a second, every replica answers WANT for the table (and,
# for 200, the elements with SHA); the same ETag everywhere. The ETag in $learned_etag.
every_replica() {
	local name=$1 want=$2 sha=${3:-} i=1 code= etag= t0 ok_all
	t0=$(date +%s%N)
	while :; do # a round started within the second counts, however long a loaded machine takes
		[ $((($(date +%s%N) - t0) / 1000000)) -gt 1000 ] && { echo "  replica $i: $code for $name after 1 s"; return 1; }
		ok_all=1 learned_etag=
		for i in 1 2 3; do
			code=$(get "http://127.0.0.1:${replica_port[$i]}/v1/learned/$name?format=bin&dtype=f32" "l$i")
			[ "$code" = "$want" ] || { ok_all=0; break; }
			[ "$want" = 200 ] || continue
			[ "$(sha256sum <"$tmp/l$i.body" | cut -d' ' -f1)" = "$sha" ] || { ok_all=0; break; }
			etag=$(header "l$i" ETag)
			[ -z "$learned_etag" ] && learned_etag=$etag
			[ "$etag" = "$learned_etag" ] || { ok_all=0; break; }
		done
		[ "$ok_all" = 1 ] && return 0
		sleep 0.02
	done
}
sha1=$(npy "$tmp/t1.npy" 16 8 1) sha2=$(npy "$tmp/t2.npy" 32 8 2)
check "a learned table PUT through nginx: 201" test "$(put_lb shared "$tmp/t1.npy")" = 201
check "every replica serves it within 1 s, the same bytes and ETag" every_replica shared 200 "$sha1"
etag1=$learned_etag
check "replaced through nginx: 200" test "$(put_lb shared "$tmp/t2.npy")" = 200
check "every replica serves the replacement within 1 s, with a new ETag" \
	eval 'every_replica shared 200 "$sha2" && [ "$learned_etag" != "$etag1" ]'
code=$(curl -sS -o "$tmp/discard" -w '%{http_code}' -X DELETE "http://127.0.0.1:$lb/v1/learned/shared" 2>>"$tmp/curl.err")
check "deleted through nginx: $code" test "$code" = 204
check "every replica answers 404 within 1 s" every_replica shared 404

# ---- SIGKILL one replica in the middle of a request stream through nginx ----
# Three concurrent clients, 100 GETs each, every URL distinct so the cache never answers.
stream() { # stream CLIENT COUNT OUTFILE
	local c=$1 n=$2 out=$3 i
	for ((i = 0; i < n; i++)); do
		curl -s -o "$tmp/discard" -w '%{http_code} %{size_download} %{time_total}\n' \
			"http://127.0.0.1:$lb/v1/sinusoidal?len=64&dim=64&format=bin&offset=$((c * 100000 + i))" || echo "000 0 0"
	done >"$out"
}
kill_start=$(wc -l <"$tmp/posenc-access.log")
for c in 1 2 3; do stream "$c" 100 "$tmp/stream$c" & bg_pids+=($!); done
for _ in $(seq 200); do
	[ "$(cat "$tmp"/stream? 2>/dev/null | wc -l)" -ge 100 ] && break
	sleep 0.02
done
done_before=$(cat "$tmp"/stream? | wc -l)
{ kill -KILL "${replica_pid[2]}"; wait "${replica_pid[2]}"; } 2>/dev/null
replica_pid[2]=
for p in "${bg_pids[@]}"; do wait "$p"; done
bg_pids=()
total=$(cat "$tmp"/stream? | wc -l)
bad_lines=$(cat "$tmp"/stream? | awk '$1 != 200 || $2 != 16384' | wc -l)
check "replica 2 SIGKILLed after $done_before of $total requests through nginx: all 200 with 16384 bytes ($bad_lines failed)" \
	test "$total" = 300 -a "$bad_lines" = 0
# nginx's log shows the retries: requests whose upstream list starts at the dead replica.
retried=$(tail -n +"$((kill_start + 1))" "$tmp/posenc-access.log" | grep -c "upstream=127.0.0.1:${replica_port[2]}, " || true)
served2=$(tail -n +"$((kill_start + 1))" "$tmp/posenc-access.log" | grep -c "upstream=127.0.0.1:${replica_port[2]} " || true)
check "replica 2 served $served2 of the stream before it died; nginx retried $retried requests on another replica" \
	test "$served2" -gt 0 -a "$retried" -gt 0
slowest=$(cat "$tmp"/stream? | sort -k3 -n | tail -1 | cut -d' ' -f3)
echo "scaleout: slowest request of the stream: ${slowest}s"

# ---- SIGTERM replica 3 with a slow request in flight ----
p3=${replica_port[3]}
http_on_fd3() { # a GET on the kept-alive connection in fd 3; prints the status (000 if closed)
	local line status=000 len=0 body
	printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n' "$1" >&3 2>/dev/null || { echo 000; return; }
	IFS= read -r -t 3 line <&3 || { echo 000; return; }
	status=$(cut -d' ' -f2 <<<"$line")
	while IFS= read -r -t 3 line <&3; do
		line=${line%$'\r'}
		[ -z "$line" ] && break
		[[ ${line,,} == content-length:* ]] && len=${line#*: }
	done
	[ "$len" -gt 0 ] && IFS= read -r -t 3 -N "$len" body <&3
	echo "$status"
}
exec 3<>"/dev/tcp/127.0.0.1/$p3"
check "replica 3: /readyz 200 on a kept-alive connection before SIGTERM" test "$(http_on_fd3 /readyz)" = 200
big="/v1/sinusoidal?len=65536&dim=512&dtype=f64&format=bin"
big_bytes=$((65536 * 512 * 8))
curl -s --limit-rate 64M -o "$tmp/big.bin" -w '%{http_code} %{size_download}' "http://127.0.0.1:$p3$big" >"$tmp/big.result" &
big_pid=$!
bg_pids+=("$big_pid")
for _ in $(seq 200); do # wait until the response is streaming
	[ -s "$tmp/big.bin" ] && break
	sleep 0.02
done
# Requests through nginx while replica 3 drains: none may fail.
stream 4 40 "$tmp/stream-drain" &
drain_stream=$!
bg_pids+=("$drain_stream")
sleep 0.1
kill -0 "$big_pid" 2>/dev/null && in_flight_at_term=yes || in_flight_at_term=no
kill -TERM "${replica_pid[3]}"
sleep 0.2
ready_after=$(http_on_fd3 /readyz)
kill -0 "$big_pid" 2>/dev/null && in_flight=$in_flight_at_term || in_flight=no
new_how=$(curl -s -o "$tmp/discard" -m 1 -w '%{http_code} after %{time_total}s %{errormsg}' "http://127.0.0.1:$p3/readyz" 2>/dev/null || true)
new_conn=${new_how%% *}
exec 3>&-
check "replica 3 after SIGTERM, big request still in flight ($in_flight): /readyz $ready_after on the open connection; a new connection: $new_how" \
	eval '[ "$in_flight" = yes ] && { [ "$ready_after" = 503 ] || [ "$new_conn" != 200 ]; }'
wait "$big_pid"
read -r big_code big_size <"$tmp/big.result"
check "the in-flight request completed: status $big_code, $big_size of $big_bytes bytes" \
	test "$big_code" = 200 -a "$big_size" = "$big_bytes" -a "$(stat -c %s "$tmp/big.bin")" = "$big_bytes"
rc=
for _ in $(seq 250); do
	kill -0 "${replica_pid[3]}" 2>/dev/null || { wait "${replica_pid[3]}"; rc=$?; break; }
	sleep 0.1
done
check "replica 3 exited ${rc:-(still running after 25 s)} after draining (want 0; log: $(grep -o '"event":"[a-z]*"' "$tmp/r3.out" | grep -v request | cut -d'"' -f4 | tr '\n' ' '))" \
	test "${rc:-x}" = 0
[ -n "$rc" ] && replica_pid[3]=
wait "$drain_stream"
bad_drain=$(awk '$1 != 200 || $2 != 16384' "$tmp/stream-drain" | wc -l)
slowest=$(sort -k3 -n "$tmp/stream-drain" | tail -1 | cut -d' ' -f3)
to3=$(grep 'offset=4000' "$tmp/posenc-access.log" | grep -c "upstream=[^ ]*127.0.0.1:$p3" || true)
check "40 requests through nginx during the drain: $bad_drain failed (slowest ${slowest}s; $to3 went to replica 3 first)" test "$bad_drain" = 0
# The drained response is the table, bit for bit: the same request on replica 1.
curl -s -o "$tmp/big1.bin" "http://127.0.0.1:${replica_port[1]}$big"
check "the drained response equals replica 1's bytes" cmp -s "$tmp/big.bin" "$tmp/big1.bin"
rm -f "$tmp/big.bin" "$tmp/big1.bin"
finish
