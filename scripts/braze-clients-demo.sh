#!/usr/bin/env bash
# Replays two Python Braze clients' requests (scripts/braze-clients-replay.py) against the running demo
# (`npm run demo`, in another terminal), with identifiers of the demo's own synthetic users: an identified user's
# address for the lookups, users to merge, rename and delete. It changes the demo's data (it deletes and merges users).
# Prints one JSON line per request, and exits 1 if any answer is not what that client needs.
set -euo pipefail
cd "$(dirname "$0")/.."
export DATABASE_URL=${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/ces}
export BASE_URL=${BASE_URL:-http://127.0.0.1:${PORT:-3000}}

# Six identified users of the demo workspace with an address, read from its database (the API lists no users).
mapfile -t USERS < <(node --input-type=module -e '
  import pg from "pg";
  const client = new pg.Client({ connectionString: process.env.DATABASE_URL });
  await client.connect();
  const { rows } = await client.query(
    `SELECT p.external_id, p.email FROM profiles p JOIN workspaces w ON w.id = p.workspace_id
      WHERE w.name = $1 AND p.external_id IS NOT NULL AND p.email IS NOT NULL
        AND NOT EXISTS (SELECT 1 FROM profiles q WHERE q.workspace_id = p.workspace_id AND lower(q.email) = lower(p.email) AND q.id <> p.id)
      ORDER BY p.updated_at DESC, p.id LIMIT 6`,
    ["Demo Workspace"],
  );
  await client.end();
  if (rows.length < 6) { console.error("the demo workspace has fewer than 6 users: run npm run demo first"); process.exit(1); }
  for (const r of rows) console.log(`${r.external_id}\t${r.email}`);
')
ext() { cut -f1 <<<"${USERS[$1]}"; }
email() { cut -f2 <<<"${USERS[$1]}"; }
stamp=$(date +%s)

python3 scripts/braze-clients-replay.py \
  --email "$(email 0)" \
  --alias-emails "$(email 1),new-learner-${stamp}@example.com" \
  --identify "new-learner-${stamp}@example.com=9${stamp}" \
  --unsubscribes-start 2020-01-01 --unsubscribes-end 2030-01-01 \
  --export-external-ids "$(ext 0),$(ext 1)" \
  --delete-external-ids "$(ext 2)" \
  --merge "$(ext 3):$(ext 4)" \
  --merge-aliases "" \
  --rename "$(ext 5):$(ext 5)-renamed-${stamp}" \
  --remove "" \
  "$@"
