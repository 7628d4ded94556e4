#!/usr/bin/env bash
# The whole suite: services up, type check, lint, then every test against real Redis, PostgreSQL, s3rver and the
# GCS emulator. Arguments go to vitest (e.g. a file name).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
if [ -f tools/gcs-emulator/package.json ] && [ ! -d tools/gcs-emulator/node_modules ]; then
  # firebase-tools is large: about 4 minutes on a 2-core machine, once. A line every 30 s says it is still going.
  echo "test: installing the GCS emulator (once; about 4 minutes)"
  started=$SECONDS
  ( while sleep 30; do echo "test: still installing the GCS emulator ($((SECONDS - started)) s)"; done ) &
  ticker=$!
  install_log=$(mktemp)
  if ! npm ci --prefix tools/gcs-emulator --no-audit --no-fund >"$install_log" 2>&1; then
    kill "$ticker" 2>/dev/null || true
    cat "$install_log" >&2
    exit 1
  fi
  kill "$ticker" 2>/dev/null || true
  rm -f "$install_log"
  echo "test: GCS emulator installed in $((SECONDS - started)) s"
fi
if [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then
  # The /docs page is checked in a real headless browser; Debian's chromium is the one this machine kind can get.
  echo "test: installing chromium (once)"
  apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }
fi
npx tsc --noEmit -p .
# One format for the code (Prettier, 120 columns: .prettierrc.json); `npm run format` rewrites it.
npx prettier --check . --log-level warn
npx eslint .
# No function in src/ over 80 lines: a reader skims named steps (scripts/function-lengths.ts --all lists the longest).
npx tsx scripts/function-lengths.ts
# No import cycle (type-only and dynamic imports count) and no import from a lower layer to a higher one: the layers
# are written down once, in scripts/import-graph.ts (docs/architecture.md shows them).
npx tsx scripts/import-graph.ts
# No dead code: no unused file, dependency or export (one used only inside its own file aside), by knip (knip.json).
npx knip --no-progress
npx vitest run "$@"
# A whole run (no file named) also runs the named part of the suite that covers every queue and Lua script on a
# 3-master Redis Cluster the run starts on free ports (package.json "test:cluster").
if [ $# -eq 0 ]; then
  npm run --silent test:cluster
fi
