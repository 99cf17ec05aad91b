#!/bin/bash
# Container health check: GET /healthz over bash's /dev/tcp, so the slim image needs no curl.
# Exit 0 when posencd answers 200, 1 otherwise (refused, closed, timed out, other status).
# The port is POSENC_PORT (the image sets 8080); the address is loopback, which reaches a daemon
# bound to 0.0.0.0 or 127.0.0.1. Usage: posenc-healthcheck [PATH]   (default /healthz)
port=${POSENC_PORT:-8080}
path=${1:-/healthz}
exec 3<>"/dev/tcp/127.0.0.1/$port" || exit 1
printf 'GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n' "$path" >&3 || exit 1
IFS= read -r -t 2 status <&3 || exit 1
exec 3<&-
case $status in
"HTTP/1."?" 200 "*) exit 0 ;;
*) echo "posenc-healthcheck: ${status%$'\r'}" >&2; exit 1 ;;
esac
