/**
 * How to record which profiles changed, priced on the write path (`npm run bench:change-log`).
 *
 * Incremental exports need, per write, something a delta can find by transaction id without reading the segment
 * (BENCHMARKS.md, "Recording changes"). Each candidate is set up inside a transaction (DDL is transactional in
 * PostgreSQL), timed on the same set-based rewrite the ingestion ceiling uses (`UPDATE profiles SET updated_at = now()`
 * of BENCH_ROWS random profiles among the first BENCH_SPAN, as ingestion's apply does per batch), and rolled back, so
 * the table is left as it was:
 *  - `stamp only`: the changed_xid stamp alone (migration 0170; what a delta had before the log: a scan of the segment);
 *  - `statement log`: the stamp and the change log written by statement-level triggers with transition tables;
 *  - `row log`: the stamp and the same log written by migration 0240's row-level trigger, one INSERT per profile;
 *  - `stamp index`: the stamp and an index on (workspace_id, changed_xid) instead of a log, which a delta could range
 *    over; every update then changes an indexed column, so no update is HOT;
 *  - `app log` (chosen): the stamp, and the writing statement itself inserts the log rows (`WITH u AS (UPDATE ...
 *    RETURNING workspace_id, id, random_bucket) INSERT INTO profile_changes ...`), as ingestion's apply does
 *    (src/profiles/change-log.ts); the row trigger stays for every other write, quieted for this statement by a
 *    transaction-local setting (`ces.profile_changes = 'logged'`);
 *  - `app log, arrays`: as `app log`, but one log row per statement and workspace holding the ids as arrays.
 * Rounds alternate the candidates (BENCH_ROUNDS, default 5); medians are printed with each one's ratio to `stamp only`.
 * Runs over the 1,000,000 users of bench:export's schema (`bench_export`; run bench:export once first).
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import pg from 'pg';

const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_export';
const ROWS = Number(process.env.BENCH_ROWS ?? 50_000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** Profiles the random ones are drawn from (the first of the table): a working set that stays in PostgreSQL's cache, as bench:ingest's 100,000 do. */
const SPAN = Number(process.env.BENCH_SPAN ?? 100_000);

const UPDATE = 'UPDATE profiles SET updated_at = now() WHERE id = ANY($1::bigint[])';
const DROP_LOG = ['DROP TRIGGER profiles_log_change ON profiles'];
const STATEMENT_LOG_FUNCTION = `CREATE FUNCTION pg_temp.log_statement() RETURNS trigger LANGUAGE plpgsql AS $$
     BEGIN
       INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket) SELECT c.workspace_id, pg_current_xact_id(), c.id, c.random_bucket FROM changed c;
       RETURN NULL;
     END $$`;
const QUIET_TRIGGER = `SELECT set_config('ces.profile_changes', 'logged', true)`;

/** Each candidate: statements that set it up (in the timed statement's transaction) and, if not the plain UPDATE, the timed statement. */
const CANDIDATES: Record<string, string[] | { setup: string[]; statement: string }> = {
  'stamp only': DROP_LOG,
  'statement log': [
    ...DROP_LOG,
    STATEMENT_LOG_FUNCTION,
    'CREATE TRIGGER log_inserts AFTER INSERT ON profiles REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_statement()',
    'CREATE TRIGGER log_updates AFTER UPDATE ON profiles REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION pg_temp.log_statement()',
  ],
  // Migration 0240's row trigger, as every write but ingestion's set-based ones meets it.
  'row log': [],
  'stamp index': [...DROP_LOG, 'CREATE INDEX profiles_changed_xid ON profiles (workspace_id, changed_xid)'],
  // What ingestion's apply does (src/profiles/change-log.ts): the row trigger stays, quieted for the statement.
  'app log': {
    setup: [QUIET_TRIGGER],
    statement: `WITH u AS (${UPDATE} RETURNING workspace_id, id, random_bucket)
                INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket) SELECT workspace_id, pg_current_xact_id(), id, random_bucket FROM u`,
  },
  'app log, arrays': {
    setup: [
      QUIET_TRIGGER,
      'CREATE TABLE change_sets (workspace_id uuid NOT NULL, xid xid8 NOT NULL, profile_ids bigint[] NOT NULL, buckets integer[] NOT NULL)',
      'CREATE INDEX ON change_sets (workspace_id, xid)',
    ],
    statement: `WITH u AS (${UPDATE} RETURNING workspace_id, id, random_bucket)
                INSERT INTO change_sets (workspace_id, xid, profile_ids, buckets)
                SELECT workspace_id, pg_current_xact_id(), array_agg(id), array_agg(random_bucket) FROM u GROUP BY workspace_id`,
  },
};

async function rewriteRate(
  client: pg.Client,
  candidate: string[] | { setup: string[]; statement: string },
  lo: number,
  hi: number,
): Promise<number> {
  const { setup, statement } = Array.isArray(candidate) ? { setup: candidate, statement: UPDATE } : candidate;
  const ids = [
    ...new Set(Array.from({ length: ROWS }, () => lo + Math.floor(Math.random() * Math.min(SPAN, hi - lo + 1)))),
  ];
  await client.query('BEGIN');
  try {
    await client.query('SET LOCAL synchronous_commit = off');
    for (const statement of setup) await client.query(statement);
    const started = performance.now();
    await client.query(statement, [ids]);
    return ids.length / ((performance.now() - started) / 1000);
  } finally {
    await client.query('ROLLBACK');
    // The rolled-back versions would make the next round's updates find less free space on their pages.
    await client.query('VACUUM profiles');
  }
}

async function main(): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(`SET search_path = ${SCHEMA}, public`);
    const { rows } = await client.query<{ lo: number; hi: number; n: number }>(
      'SELECT min(id)::int AS lo, max(id)::int AS hi, count(*)::int AS n FROM profiles',
    );
    const { lo, hi, n } = rows[0]!;
    if (!n) throw new Error(`no profiles in schema ${SCHEMA}: run npm run bench:export once first`);
    console.log(
      `${n.toLocaleString('en-US')} profiles in ${SCHEMA}; rewriting ${ROWS.toLocaleString('en-US')} random ones per statement, ${ROUNDS} alternating rounds`,
    );
    const rates = new Map<string, number[]>(Object.keys(CANDIDATES).map((k) => [k, []]));
    for (let round = 0; round < ROUNDS; round++) {
      for (const [name, setup] of Object.entries(CANDIDATES))
        rates.get(name)!.push(await rewriteRate(client, setup, lo, hi));
    }
    const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
    const base = median(rates.get('stamp only')!);
    for (const [name, xs] of rates) {
      console.log(
        `${name.padEnd(14)} ${Math.round(median(xs)).toLocaleString('en-US').padStart(9)} rows/s  cost ${(base / median(xs)).toFixed(3)} of stamp only  (rounds: ${xs.map(Math.round).join(', ')})`,
      );
    }
  } finally {
    await client.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
