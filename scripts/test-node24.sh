#!/usr/bin/env bash
# The part of the suite that covers every route family (and the command line), run under Node 24 LTS while the
# machine's Node runs everything else: the service must work on Node 20, 22 and 24. Services must be up (npm test
# starts them). Pass test files to run others.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE24=$(bash scripts/node24.sh)
echo "test:node24: $("$NODE24" --version)"
FILES=(
  test/auth-every-route.test.ts test/platform-http.test.ts test/ingest-track.test.ts test/ingest-import.test.ts
  test/alias-update.test.ts test/email-status.test.ts test/export-local.test.ts test/segments-list.test.ts
  test/catalog-item.test.ts test/catalog-batch.test.ts test/email-templates.test.ts test/live-activities.test.ts
  test/canvas-schedules.test.ts test/canvas-list.test.ts test/feed-list.test.ts test/kpi.test.ts
  test/deliverability.test.ts test/records.test.ts test/preference-centers.test.ts test/scim-users.test.ts
  test/scim-patch.test.ts test/scim-discovery.test.ts test/cli-export.test.ts
)
if [ $# -gt 0 ]; then FILES=("$@"); fi
"$NODE24" node_modules/vitest/vitest.mjs run "${FILES[@]}"
