#!/usr/bin/env bash
# Static checks of the deployment files in docker/: the YAML parses (Debian's python3-yaml when
# present, else a simple structural check), the Kubernetes manifests and compose.yaml say what the
# daemon and the Dockerfile need (probes on /readyz and /healthz, grace period longer than preStop +
# shutdown_timeout, selectors that match, no Service-link POSENC_PORT, the image's uid and data
# directory), every POSENC_* variable they set is a real posencd key with a value posencd accepts
# (it starts with them), the health-check script is valid bash, and nginx -t accepts the
# load-balancer config as shipped. Prints "manifests: N passed, M failed".
set -uo pipefail

repo=$(cd "$(dirname "$0")/../.." && pwd)
daemon=${POSENCD:-$repo/build/posencd}
tmp=$(mktemp -d /tmp/posenc-manifests.XXXXXX)
pid=
cleanup() {
	[ -n "$pid" ] && { kill -KILL "$pid"; wait "$pid"; } 2>/dev/null
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "manifests: ok - $*"; }
bad() { failed=$((failed + 1)); echo "manifests: FAIL - $*"; }

yaml_files=("$repo/docker/compose.yaml" "$repo"/docker/k8s/*.yaml)
keys=$(sed -n 's/^[[:space:]]*"\([a-z_]*\)":.*/\1/p' "$repo/config/posenc.json")
uid=$(sed -n 's/^USER[[:space:]]*\([0-9]*\).*/\1/p' "$repo/Dockerfile" | tail -1)
data_dir=$(grep -o 'POSENC_DATA_DIR=[^[:space:]\\]*' "$repo/Dockerfile" | head -1 | cut -d= -f2)
default_shutdown=$(sed -n 's/^[[:space:]]*"shutdown_timeout":[[:space:]]*\([0-9]*\).*/\1/p' "$repo/config/posenc.json")

if /usr/bin/python3 -c 'import yaml' 2>/dev/null; then
	# One line per result: "ok <text>" / "FAIL <text>", and "ENV <file> NAME=VALUE" for each variable.
	/usr/bin/python3 - "$uid" "$data_dir" "$default_shutdown" "$keys" "${yaml_files[@]}" >"$tmp/py.out" 2>&1 <<-'EOF'
	import os, re, sys, yaml
	uid, data_dir, default_shutdown, keys = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), set(sys.argv[4].split())
	files = sys.argv[5:]
	def res(cond, text):
	    print(("ok " if cond else "FAIL ") + text)
	docs = {}
	for f in files:
	    name = os.path.relpath(f, os.path.dirname(os.path.dirname(f)))
	    try:
	        with open(f) as fh:
	            d = [x for x in yaml.safe_load_all(fh) if x is not None]
	        res(bool(d), f"{name}: valid YAML ({len(d)} document{'s' if len(d) != 1 else ''})")
	        docs[os.path.basename(f)] = d
	    except yaml.YAMLError as e:
	        res(False, f"{name}: {str(e).splitlines()[0]} {getattr(e, 'problem_mark', '')}")
	def env_of(items, where):
	    out = {}
	    for e in items or []:
	        if "value" in e:
	            out[e["name"]] = str(e["value"])
	            print(f"ENV {where} {e['name']}={e['value']}")
	    return out
	def check_env_names(env, where):
	    bad = [k for k in env if k.startswith("POSENC_") and k[7:].lower() not in keys]
	    res(not bad, f"{where}: every POSENC_* variable is a posencd key" + (f" (unknown: {bad})" if bad else ""))
	def sleep_seconds(pre):
	    if "sleep" in pre:
	        return int(pre["sleep"]["seconds"])
	    cmd = pre.get("exec", {}).get("command", [])
	    return int(cmd[1]) if len(cmd) == 2 and cmd[0].endswith("sleep") else 0
	k8s = {}
	for f, ds in docs.items():
	    for d in ds:
	        if isinstance(d, dict) and "kind" in d:
	            k8s[d["kind"]] = d
	if "deployment.yaml" in docs:
	    dep = k8s["Deployment"]
	    spec = dep["spec"]["template"]["spec"]
	    labels = dep["spec"]["template"]["metadata"]["labels"]
	    sel = dep["spec"]["selector"]["matchLabels"]
	    res(all(labels.get(k) == v for k, v in sel.items()), "Deployment: selector matches the pod labels")
	    c = spec["containers"][0]
	    env = env_of(c.get("env"), "k8s")
	    check_env_names(env, "Deployment")
	    res(c["readinessProbe"]["httpGet"]["path"] == "/readyz", "Deployment: readinessProbe GET /readyz")
	    res(c["livenessProbe"]["httpGet"]["path"] == "/healthz", "Deployment: livenessProbe GET /healthz")
	    r = c.get("resources", {})
	    res(all(k in r.get(w, {}) for w in ("requests", "limits") for k in ("cpu", "memory")),
	        "Deployment: cpu and memory requests and limits")
	    pre = c.get("lifecycle", {}).get("preStop", {})
	    pre_s = sleep_seconds(pre)
	    res(pre_s > 0, f"Deployment: preStop sleeps {pre_s} s so endpoints update before SIGTERM")
	    shutdown = int(env.get("POSENC_SHUTDOWN_TIMEOUT", default_shutdown))
	    grace = int(spec.get("terminationGracePeriodSeconds", 30))
	    res(grace > pre_s + shutdown,
	        f"Deployment: terminationGracePeriodSeconds {grace} > preStop {pre_s} + shutdown_timeout {shutdown}")
	    res(spec.get("enableServiceLinks") is False,
	        "Deployment: enableServiceLinks false (a Service named posenc would set POSENC_PORT=tcp://...)")
	    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
	    res(str(ports.get("http")) == env.get("POSENC_PORT", "8080"), f"Deployment: containerPort {ports.get('http')} is POSENC_PORT")
	    sc = {**spec.get("securityContext", {}), **c.get("securityContext", {})}
	    res(sc.get("runAsNonRoot") is True and sc.get("runAsUser") == uid,
	        f"Deployment: runAsNonRoot, runAsUser {sc.get('runAsUser')} is the Dockerfile's USER {uid}")
	    mounts = [m["mountPath"] for m in c.get("volumeMounts", [])]
	    res(data_dir in mounts, f"Deployment: a volume at the data directory {data_dir}")
	    svc = k8s.get("Service")
	    res(svc is not None and all(labels.get(k) == v for k, v in svc["spec"]["selector"].items())
	        and all(p["targetPort"] in ports or p["targetPort"] in ports.values() for p in svc["spec"]["ports"]),
	        "Service: selector and targetPort match the Deployment")
	    hpa = k8s.get("HorizontalPodAutoscaler")
	    ref = hpa and hpa["spec"]["scaleTargetRef"]
	    res(hpa is not None and ref["kind"] == "Deployment" and ref["name"] == dep["metadata"]["name"]
	        and 2 <= hpa["spec"]["minReplicas"] <= hpa["spec"]["maxReplicas"],
	        "HorizontalPodAutoscaler: targets the Deployment, 2 <= minReplicas <= maxReplicas")
	    pdb = k8s.get("PodDisruptionBudget")
	    res(pdb is not None and all(labels.get(k) == v for k, v in pdb["spec"]["selector"]["matchLabels"].items())
	        and int(pdb["spec"].get("maxUnavailable", 0)) < hpa["spec"]["minReplicas"],
	        "PodDisruptionBudget: selects the pods and leaves replicas up")
	    refs = {e["name"]: e.get("valueFrom", {}).get("secretKeyRef") for e in c.get("env") or []}
	    res(refs.get("POSENC_STORE_URL") is not None and "POSENC_STORE_URL" not in env,
	        "Deployment: POSENC_STORE_URL (it holds a password) comes from a Secret, never a literal")
	    kus = k8s.get("Kustomization")
	    res(kus is None or all(r in docs for r in kus["resources"]), "kustomization.yaml: lists files that exist")
	if "compose.yaml" in docs:
	    comp = docs["compose.yaml"][0]
	    s = comp["services"]
	    pe, cl = s.get("posencd", {}), s.get("client", {})
	    env = {k: str(v) for k, v in (pe.get("environment") or {}).items()}
	    for k, v in env.items():
	        print(f"ENV compose {k}={v}")
	    check_env_names(env, "compose.yaml")
	    res(cl.get("network_mode") == "service:posencd", "compose.yaml: the client shares posencd's network (sidecar)")
	    res((cl.get("depends_on") or {}).get("posencd", {}).get("condition") == "service_healthy",
	        "compose.yaml: the client waits for the image's HEALTHCHECK")
	    g = re.fullmatch(r"(\d+)s", str(pe.get("stop_grace_period", "10s")))
	    shutdown = int(env.get("POSENC_SHUTDOWN_TIMEOUT", default_shutdown))
	    res(g is not None and int(g.group(1)) > shutdown, f"compose.yaml: stop_grace_period > shutdown_timeout {shutdown}")
	    res(any(str(v).endswith(":" + data_dir) for v in pe.get("volumes", [])), f"compose.yaml: a volume at {data_dir}")
	    shared = {n: v for n, v in s.items() if "shared-store" in (v.get("profiles") or [])}
	    pg = shared.get("postgres", {})
	    res("healthcheck" in pg, "compose.yaml: profile shared-store has a postgres service with a health check")
	    reps = [n for n, v in shared.items() if n != "postgres"]
	    for n in reps:
	        e = {k: str(v) for k, v in (shared[n].get("environment") or {}).items()}
	        check_env_names(e, f"compose.yaml {n}")
	        res(e.get("POSENC_STORE_URL", "").startswith("postgresql://") and
	            (shared[n].get("depends_on") or {}).get("postgres", {}).get("condition") == "service_healthy",
	            f"compose.yaml {n}: store_url postgresql://, started once postgres is healthy")
	    res(len(reps) >= 2, f"compose.yaml: profile shared-store runs {len(reps)} replicas on the shared store")
	EOF
	while IFS= read -r line; do
		case $line in
		"ok "*) ok "${line#ok }" ;;
		"FAIL "*) bad "${line#FAIL }" ;;
		"ENV "*) echo "${line#ENV }" >>"$tmp/env" ;;
		*) bad "python: $line" ;;
		esac
	done <"$tmp/py.out"
else
	echo "manifests: python3-yaml not available: simple YAML checks only"
	for f in "${yaml_files[@]}"; do
		if grep -q $'\t' "$f"; then bad "${f#"$repo"/}: tab characters"; else ok "${f#"$repo"/}: no tabs"; fi
	done
	for f in "$repo"/docker/k8s/*.yaml; do
		grep -q '^apiVersion:' "$f" && grep -q '^kind:' "$f" && ok "${f#"$repo"/}: apiVersion and kind" ||
			bad "${f#"$repo"/}: apiVersion/kind missing"
	done
	grep -q 'path: /readyz' "$repo/docker/k8s/deployment.yaml" && grep -q 'path: /healthz' "$repo/docker/k8s/deployment.yaml" &&
		ok "deployment.yaml: probes on /readyz and /healthz" || bad "deployment.yaml: probes on /readyz and /healthz"
fi

# posencd accepts every variable the manifests set: start it with each file's environment.
if [ -x "$daemon" ] && [ -s "$tmp/env" ]; then
	for where in k8s compose; do
		mapfile -t envs < <(awk -v w="$where" '$1 == w { print $2 }' "$tmp/env")
		env -i "${envs[@]}" POSENC_DATA_DIR="$tmp" "$daemon" --port 0 --bind 127.0.0.1 >"$tmp/d.out" 2>"$tmp/d.err" &
		pid=$!
		started=
		for _ in $(seq 100); do
			grep -q '"event":"start"' "$tmp/d.out" 2>/dev/null && { started=1; break; }
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.05
		done
		if [ -n "$started" ]; then ok "posencd starts with the $where environment (${envs[*]})"; else bad "posencd rejects the $where environment: $(cat "$tmp/d.err")"; fi
		{ kill -TERM "$pid"; wait "$pid"; } 2>/dev/null
		pid=
	done
fi

bash -n "$repo/docker/healthcheck.sh" && ok "docker/healthcheck.sh is valid bash" || bad "docker/healthcheck.sh: bash -n fails"

# nginx -t on the load-balancer config as shipped (paths moved into a temporary prefix).
if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then
	ngx=$(command -v nginx || echo /usr/sbin/nginx)
	sed -e "s|/var/cache/nginx/posenc|$tmp/cache|" -e "s|/var/log/nginx/|$tmp/|" "$repo/docker/nginx/posenc-lb.conf" >"$tmp/lb.conf"
	printf 'pid %s/nginx.pid;\nerror_log %s/error.log;\nevents {}\nhttp {\n include %s/lb.conf;\n}\n' "$tmp" "$tmp" "$tmp" >"$tmp/nginx.conf"
	if "$ngx" -t -q -p "$tmp" -c "$tmp/nginx.conf" 2>"$tmp/nginx.err"; then
		ok "nginx -t accepts docker/nginx/posenc-lb.conf"
	else
		bad "nginx -t rejects docker/nginx/posenc-lb.conf: $(cat "$tmp/nginx.err")"
	fi
else
	bad "nginx is not installed (make deps should install nginx-light)"
fi

echo "manifests: $pass passed, $failed failed"
[ "$failed" -eq 0 ]
