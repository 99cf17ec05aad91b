#!/usr/bin/env bash
# Install the Debian packages posenc needs to build, test and benchmark, when any is missing.
# Runs apt-get as root (after apt-get update); as another user it only says what is missing.
set -euo pipefail
pkgs=(build-essential pkg-config libmicrohttpd-dev libjansson-dev libuv1-dev check libsubunit-dev
      libsleef-dev libdeflate-dev libcurl4-openssl-dev curl openssl libpng-dev zlib1g-dev nginx python3-yaml
      nettle-dev iproute2)
missing=()
for p in "${pkgs[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js and npm (for the OpenAPI lint) may come from elsewhere than Debian (NodeSource ships npm
# inside its nodejs package): the commands are what matters.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ]; then
	echo "posenc: missing packages: ${missing[*]} (run 'make deps' as root)" >&2
	exit 1
fi
echo "posenc: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
