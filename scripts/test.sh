#!/usr/bin/env bash
# The whole suite: services up, type check, lint, then every test against real Redis, PostgreSQL, s3rver and the
# GCS emulator. Arguments go to vitest (e.g. a file name).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/services.sh
# The GCS emulator's install (about 1.5 minutes from npm's cache, 4 without) and the static checks (about 1.5 minutes
# of mostly one core) run side by side; the checks then go on beside the tests, which spend much of their time
# waiting. Their output is printed as each finishes; any failure fails the run.
emulator_pid=
if [ -f tools/gcs-emulator/package.json ] && [ ! -f tools/gcs-emulator/node_modules/.installed ]; then
  # firebase-tools is large. A line every 30 s says it is still going.
  echo "test: installing the GCS emulator (once)"
  (
    started=$SECONDS
    ( while sleep 30; do echo "test: still installing the GCS emulator ($((SECONDS - started)) s)"; done ) &
    ticker=$!
    install_log=$(mktemp)
    status=0
    npm ci --prefix tools/gcs-emulator --no-audit --no-fund >"$install_log" 2>&1 || status=$?
    kill "$ticker" 2>/dev/null || true
    if [ "$status" -ne 0 ]; then cat "$install_log" >&2; rm -f "$install_log"; exit "$status"; fi
    rm -f "$install_log"
    touch tools/gcs-emulator/node_modules/.installed
    echo "test: GCS emulator installed in $((SECONDS - started)) s"
  ) &
  emulator_pid=$!
fi
if [ ! -x "${CHROMIUM_PATH:-/usr/bin/chromium}" ]; then
  # The /docs page is checked in a real headless browser; Debian's chromium is the one this machine kind can get.
  echo "test: installing chromium (once)"
  apt-get install -y chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y chromium >/dev/null; }
fi
checks_log=$(mktemp)
# (Each step chained with &&: `set -e` does not apply inside a list whose status is tested.)
{
  npx tsc --noEmit -p . &&
    # One format for the code (Prettier, 120 columns: .prettierrc.json); `npm run format` rewrites it.
    npx prettier --check . --log-level warn &&
    npx eslint . &&
    # No function in src/ over 80 lines: a reader skims named steps (scripts/function-lengths.ts --all lists them).
    npx tsx scripts/function-lengths.ts &&
    # No import cycle (type-only and dynamic imports count) and no import from a lower layer to a higher one: the
    # layers are written down once, in scripts/import-graph.ts (docs/architecture.md shows them).
    npx tsx scripts/import-graph.ts &&
    # No dead code: no unused file, dependency or export (one used only inside its own file aside), by knip.
    npx knip --no-progress
} >"$checks_log" 2>&1 && echo "test: checks passed (tsc, prettier, eslint, function lengths, import graph, knip)" ||
  { cat "$checks_log"; echo "test: CHECKS FAILED (output above)"; exit 1; } &
checks_pid=$!
if [ -n "$emulator_pid" ]; then wait "$emulator_pid"; fi
status=0
if [ $# -eq 0 ]; then
  # Every file, and the files that cover every queue and Lua script again on a 3-master Redis Cluster the run starts
  # on free ports (the vitest project `cluster`: vitest.config.ts, test/cluster-files.ts).
  npx vitest run || status=$?
else
  npx vitest run --project shared --project isolated "$@" || status=$?
fi
wait "$checks_pid" || status=1
rm -f "$checks_log"
exit "$status"
