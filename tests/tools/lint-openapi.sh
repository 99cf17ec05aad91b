#!/usr/bin/env bash
# Lint openapi.yaml with Redocly CLI, the exact version pinned in tests/package.json and locked in
# tests/package-lock.json, which `make deps` (tests/tools/deps.sh lint) installs into
# tests/node_modules; fails when it is missing or not the pinned version. tests/redocly.yaml extends recommended-strict, so every problem Redocly
# reports is an error and fails this script. Needs node and npm (make deps installs Debian's).
set -euo pipefail
tests=$(cd "$(dirname "$0")/.." && pwd)
cd "$tests"

for tool in node npm; do
	command -v "$tool" >/dev/null || { echo "lint-openapi: $tool not found (run 'make deps' as root)" >&2; exit 1; }
done

# The installed version must be the one package.json pins; otherwise reinstall from the lockfile.
pinned=$(node -p 'require("./package.json").devDependencies["@redocly/cli"]')
installed=$(node -p 'try { require("./node_modules/@redocly/cli/package.json").version } catch (e) { "" }')
if [ "$installed" != "$pinned" ] || [ ! -x node_modules/.bin/redocly ]; then
	echo "lint-openapi: @redocly/cli $pinned is not in tests/node_modules (run 'make deps')" >&2
	exit 1
fi

# No usage telemetry and no update check: the result must depend on the repository only.
export REDOCLY_TELEMETRY=off REDOCLY_SUPPRESS_UPDATE_NOTICE=true
exec node_modules/.bin/redocly lint --config redocly.yaml ../openapi.yaml
