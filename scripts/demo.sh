#!/usr/bin/env bash
# The main job (`npm ci && npm run demo`): Redis and PostgreSQL up, the service built and migrated, the demo
# workspace applied, synthetic users generated, the service started, a segment export of "All users" written to the
# built-in local bucket and its location printed; then the service keeps running until Ctrl-C.
# Safe to re-run: the workspace apply changes nothing the second time, users are only topped up to DEMO_USERS, and
# every export gets a new object prefix.
set -euo pipefail
cd "$(dirname "$0")/.."

export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/ces}
export PORT=${PORT:-3000}
export LOCAL_STORE_DIR=${LOCAL_STORE_DIR:-./data/bucket}
export LOG_LEVEL=${LOG_LEVEL:-warn}
DEMO_USERS=${DEMO_USERS:-100000}
# The queue dashboard (/admin/queues) on, with a password made for this run unless one is given.
export ADMIN_USER=${ADMIN_USER:-demo}
export ADMIN_PASSWORD=${ADMIN_PASSWORD:-$(node -e 'process.stdout.write(require("crypto").randomBytes(12).toString("base64url"))')}
# The demo key's secret is published in workspace/demo.yaml: for this demo only, never for a real install.
DEMO_KEY=ces_key_demo_0000000000000000000000000000
BASE="http://127.0.0.1:${PORT}"
CES=(node dist/src/cli.js)

step() { printf '\n\033[1m==> %s\033[0m\n' "$*"; }
# Reads one field of the JSON document on stdin (no jq needed).
json_field() { node -e 'let s="";process.stdin.on("data",d=>s+=d).on("end",()=>{const v=JSON.parse(s)[process.argv[1]];process.stdout.write(v===undefined?"":String(v))})' "$1"; }

step "Redis and PostgreSQL"
bash scripts/services.sh

step "Build"
npm run build --silent

step "Migrate"
"${CES[@]}" migrate

step "Apply workspace/demo.yaml"
"${CES[@]}" workspace apply workspace/demo.yaml --no-migrate

step "Synthetic users (up to ${DEMO_USERS})"
"${CES[@]}" users generate --count "$DEMO_USERS" --seed 42 --workspace "Demo Workspace" --company "Demo Company" --top-up

step "Start the service (API and workers) on ${BASE}"
if curl -fsS -o /dev/null "${BASE}/healthz" 2>/dev/null; then
  echo "Something already answers on ${BASE} (an earlier demo still running?). Stop it, or run with PORT=<another port>." >&2
  exit 1
fi
"${CES[@]}" start &
SERVICE_PID=$!
stop_service() {
  if kill -0 "$SERVICE_PID" 2>/dev/null; then
    echo "stopping the service (pid ${SERVICE_PID})"
    kill -TERM "$SERVICE_PID" 2>/dev/null || true
    wait "$SERVICE_PID" 2>/dev/null || true
  fi
}
# Whatever ends the demo stops the service: Ctrl-C, and a SIGTERM or SIGINT sent to `npm run demo` (npm passes it to
# this shell, which package.json's `exec` makes its direct child: a `sh -c` between them would die of it and leave
# this shell, and the service, running), or the terminal closing.
trap stop_service EXIT
trap 'exit 130' INT TERM HUP

for i in $(seq 1 120); do
  if ! kill -0 "$SERVICE_PID" 2>/dev/null; then echo "the service exited before becoming ready (port ${PORT} taken?)" >&2; exit 1; fi
  # Ready, and still ours: a process that lost the port to another one exits right after starting.
  if curl -fsS -o /dev/null "${BASE}/readyz" 2>/dev/null && sleep 0.5 && kill -0 "$SERVICE_PID" 2>/dev/null; then break; fi
  if [ "$i" = 120 ]; then echo "the service did not become ready within 60 s" >&2; exit 1; fi
  sleep 0.5
done
echo "ready"

step "Export the \"All users\" segment"
REQUEST='{"segment_id":"seg-all-users","fields_to_export":["external_id","service_id","first_name","last_name","email","phone","country","language","time_zone","created_at","random_bucket","total_revenue","custom_attributes","custom_events","purchases","devices","push_tokens","apps","user_aliases"]}'
RESPONSE=$(curl -sS -X POST "${BASE}/users/export/segment" -H "Authorization: Bearer ${DEMO_KEY}" -H 'Content-Type: application/json' -d "$REQUEST")
PREFIX=$(printf '%s' "$RESPONSE" | json_field object_prefix)
if [ -z "$PREFIX" ]; then echo "export request refused: ${RESPONSE}" >&2; exit 1; fi
echo "object_prefix: ${PREFIX}"

STATUS_URL="${BASE}/users/export/status?object_prefix=${PREFIX}"
SHOWN=""
while true; do
  STATUS_BODY=$(curl -sS "$STATUS_URL" -H "Authorization: Bearer ${DEMO_KEY}")
  STATUS=$(printf '%s' "$STATUS_BODY" | json_field status)
  LINE=$(printf '%-8s %s users written' "$STATUS" "$(printf '%s' "$STATUS_BODY" | json_field users_done)")
  if [ "$LINE" != "$SHOWN" ]; then
    if [ -t 1 ]; then printf '\r%s' "$LINE"; else echo "$LINE"; fi
    SHOWN=$LINE
  fi
  case "$STATUS" in
    ready) [ -t 1 ] && echo; break ;;
    failed) echo; echo "export failed: $(printf '%s' "$STATUS_BODY" | json_field error)" >&2; exit 1 ;;
    queued | running) sleep 1 ;;
    *) echo; echo "unexpected status response: ${STATUS_BODY}" >&2; exit 1 ;;
  esac
done

KEY_PREFIX=$(printf '%s' "$STATUS_BODY" | json_field key_prefix)
# The built-in store keeps each workspace's objects under LOCAL_STORE_DIR/local/<company id>/<workspace id>/
# (src/platform/storage/local-store.ts); the key prefix is unique, so the one directory ending with it is this export's.
EXPORT_DIR="$(find "$(cd "$LOCAL_STORE_DIR" && pwd)/local" -type d -path "*/${KEY_PREFIX}" | head -n 1)"
step "Export ready"
echo "files:        ${EXPORT_DIR}/ ($(find "$EXPORT_DIR" -type f -name '*.zip' 2>/dev/null | wc -l | tr -d ' ') parts and manifest.json)"
echo "manifest:     $(printf '%s' "$STATUS_BODY" | json_field manifest_key)"
echo "download url: $(printf '%s' "$STATUS_BODY" | json_field url)"
echo
echo "Try the API with the demo key:"
echo "  curl -H 'Authorization: Bearer ${DEMO_KEY}' ${BASE}/segments/list"
echo
echo "API reference:   ${BASE}/docs"
echo "Queue dashboard: ${BASE}/admin/queues (user ${ADMIN_USER}, password ${ADMIN_PASSWORD})"
echo
echo "The service keeps running (pid ${SERVICE_PID}); Ctrl-C stops it."
wait "$SERVICE_PID"
