#!/usr/bin/env bash
# An A/B of Cloud Data Ingestion's first rewrites (BENCHMARKS.md, Cloud Data Ingestion): two identical schemas,
# bench_a and bench_b, made by `BENCH_PREPARE_ONLY=1 npm run bench:cdi` (1,000,000 generated users each, and a source
# table), then syncs of the next CHUNK_ROWS rows taken in turn, A on bench_a and B on bench_b, so that a slower moment
# of the machine falls on both. Each sync is every profile's first rewrite after the bulk load. Prints rows/s (the
# run's own figure), the whole machine's CPU per row (from /proc/stat, over the sync's process, its start included)
# and the part of it the sync's own process used (user and system time, by /usr/bin/time).
#
#   bench/cdi-ab.sh <code dir A> <code dir B> [chunks] [chunk rows]
#   A_ENV='CDI_APPLY_LANES=2' B_ENV='CDI_APPLY_LANES=3' bench/cdi-ab.sh . .     # one code, two settings
#   A_CLI='--import tsx src/cli.ts' bench/cdi-ab.sh . .    # the sources run through tsx against the build
#   AFTER_PREPARE='scripts/bench-postgres.sh stop && scripts/bench-postgres.sh start' bench/cdi-ab.sh <A> <B>
#                                               # both schemas equally cold in shared_buffers (see below)
#   A_SQL='ALTER TABLE profiles SET (fillfactor = 80); VACUUM FULL profiles' B_SQL='VACUUM FULL profiles' \
#     bench/cdi-ab.sh . .                       # migration 0270's fillfactor against the one before it
#
# A code dir is a checkout with node_modules (a `git worktree` of another commit, node_modules linked); each is built
# first and runs `node dist/src/cli.js` unless A_CLI or B_CLI names other arguments. DATABASE_URL
# defaults to the tuned server of scripts/bench-postgres.sh; PREPARE=0 reuses schemas an earlier call made (START is
# then the first chunk not yet synced).
set -euo pipefail
A_DIR=$(cd "$1" && pwd)
B_DIR=$(cd "$2" && pwd)
CHUNKS=${3:-6}
ROWS=${4:-100000}
DB=${DATABASE_URL:-postgres://postgres@127.0.0.1:5433/ces}
INTEGRATION=b7c2d1e0-0000-4000-8000-00000000cd10
P=(psql -X -q "$DB" -v ON_ERROR_STOP=1)
cd "$(dirname "$0")/.."

# Each side runs its build, as an install does (`npm run build`; the CLI of the demo and the README).
for dir in "$A_DIR" "$B_DIR"; do (cd "$dir" && npx tsc -p tsconfig.build.json); done

if [ "${PREPARE:-1}" = 1 ]; then
  for x in a b; do
    DATABASE_URL=$DB BENCH_SCHEMA=bench_$x BENCH_PREPARE_ONLY=1 npx tsx bench/cdi.ts
  done
  # Through stdin, one statement at a time (VACUUM refuses to run in the transaction that one -c string makes).
  if [ -n "${A_SQL:-}" ]; then "${P[@]}" <<<"SET search_path = bench_a; $A_SQL"; fi
  if [ -n "${B_SQL:-}" ]; then "${P[@]}" <<<"SET search_path = bench_b; $B_SQL"; fi
  # shared_buffers that cannot hold both tables hold more of the one prepared last: the first chunks of bench_a ran up
  # to 40% slower than bench_b's whatever the code (2026-11-26). A restart of the server starts both equally cold.
  if [ -n "${AFTER_PREPARE:-}" ]; then bash -c "$AFTER_PREPARE"; fi
fi

cpu_ticks() { awk '/^cpu /{print $2 + $3 + $4 + $7 + $8}' /proc/stat; }
for k in $(seq "${START:-1}" "$CHUNKS"); do
  for x in a b; do
    if [ $x = a ]; then dir=$A_DIR extra=${A_ENV:-} cli=${A_CLI:-dist/src/cli.js}; else dir=$B_DIR extra=${B_ENV:-} cli=${B_CLI:-dist/src/cli.js}; fi
    "${P[@]}" -c "CREATE OR REPLACE VIEW bench_${x}_source.user_updates_view AS
                  SELECT * FROM bench_${x}_source.user_updates ORDER BY \"UPDATED_AT\" LIMIT $((k * ROWS))" -c CHECKPOINT
    before=$(cpu_ticks)
    (cd "$dir" && env $extra DATABASE_URL="$DB" DATABASE_SCHEMA=bench_$x LOG_LEVEL=warn BENCH_CDI_SOURCE_URL="$DB" \
      /usr/bin/time -f '%U %S' -o /tmp/cdi-ab-time node $cli cdi sync $INTEGRATION --wait \
      >/tmp/cdi-ab-last.log 2>&1) ||
      { cat /tmp/cdi-ab-last.log; exit 1; }
    after=$(cpu_ticks)
    read -r rows rate < <("${P[@]}" -Atc "SELECT rows_synced, round(rows_synced / extract(epoch FROM finished_at - started_at))
      FROM bench_$x.cdi_sync_jobs WHERE integration_id = '$INTEGRATION' ORDER BY started_at DESC LIMIT 1" | tr '|' ' ')
    own=$(awk -v rows="$rows" '{printf "%d", ($1 + $2) * 1000000 / rows}' /tmp/cdi-ab-time)
    echo "$(echo $x | tr ab AB) chunk $k: $rate rows/s ($rows rows), $(((after - before) * 1000000 / $(getconf CLK_TCK) / rows)) us of CPU a row, $own us of it the sync process's"
  done
done
