#!/usr/bin/env bash
# The part of the suite that covers every route family (and the command line), run under Node 24 LTS while the
# machine's Node runs everything else: the service must work on Node 20, 22 and 24. Services must be up (npm test
# starts them). Pass test files to run others.
set -euo pipefail
cd "$(dirname "$0")/.."
NODE24=$(bash scripts/node24.sh)
echo "test:node24: $("$NODE24" --version)"
FILES=(
  test/http/auth-every-route.test.ts test/http/platform-http.test.ts test/ingest/ingest-track.test.ts test/ingest/ingest-import.test.ts
  test/user-data/alias-update.test.ts test/endpoints/email-status.test.ts test/exports/export-local.test.ts test/endpoints/segments-list.test.ts
  test/catalogs/catalog-item.test.ts test/catalogs/catalog-batch.test.ts test/endpoints/email-templates.test.ts test/endpoints/live-activities.test.ts
  test/endpoints/canvas-schedules.test.ts test/endpoints/canvas-list.test.ts test/endpoints/feed-list.test.ts test/endpoints/kpi.test.ts
  test/endpoints/deliverability.test.ts test/user-data/records.test.ts test/endpoints/preference-centers.test.ts test/scim/scim-users.test.ts
  test/scim/scim-patch.test.ts test/scim/scim-discovery.test.ts test/exports/cli-export.test.ts
  test/catalogs/catalog-management.test.ts test/catalogs/catalog-async.test.ts test/endpoints/analytics-lists.test.ts
  test/endpoints/analytics-series.test.ts test/endpoints/content-blocks.test.ts test/endpoints/custom-attributes.test.ts
  test/endpoints/segment-details.test.ts test/endpoints/segment-series.test.ts test/endpoints/subscription-groups.test.ts
  test/endpoints/suppressions.test.ts test/ingest/track-sync.test.ts test/endpoints/preference-center-writes.test.ts
)
if [ $# -gt 0 ]; then FILES=("$@"); fi
"$NODE24" node_modules/vitest/vitest.mjs run --project shared --project isolated "${FILES[@]}"
