# Sourced by the A/B tools (ab-builds.sh, ab-cold-json.sh): a posencd started for a side by side
# run. The caller owns $tmp (a scratch folder) and the pids array its exit trap kills.
# ab_start NAME BINARY ENV ARGS...: BINARY on 127.0.0.1 port 0 (--workers 2, a data_dir of its
# own under $tmp, ENV added to its environment, ARGS after), its log in $tmp/NAME.log; sets
# PID_NAME and PORT_NAME, or exits when it does not start.
ab_start() {
	local name=$1 bin=$2 env=$3 port= i
	shift 3
	mkdir -p "$tmp/$name"
	env $env "$bin" --port 0 --bind 127.0.0.1 --workers 2 --data-dir "$tmp/$name" --log-level info "$@" \
		>"$tmp/$name.log" 2>&1 &
	pids+=($!)
	for i in $(seq 200); do
		port=$(grep -o '"port":[0-9]*' "$tmp/$name.log" 2>/dev/null | head -1 | cut -d: -f2)
		[ -n "$port" ] && break
		sleep 0.05
	done
	[ -n "$port" ] || { echo "$(basename "$0"): $bin did not start: $(cat "$tmp/$name.log")" >&2; exit 1; }
	printf -v "PID_$name" %s "$!"
	printf -v "PORT_$name" %s "$port"
}
