#!/usr/bin/env bash
# The whole suite: services up, type check, lint, then every test against real Redis, PostgreSQL, s3rver and the
# GCS emulator. Arguments go to vitest (e.g. a file name).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
if [ -f tools/gcs-emulator/package.json ] && [ ! -d tools/gcs-emulator/node_modules ]; then
  echo "test: installing the GCS emulator (once)"
  npm ci --prefix tools/gcs-emulator --no-audit --no-fund >/dev/null
fi
npx tsc --noEmit -p .
npx eslint .
npx vitest run "$@"
