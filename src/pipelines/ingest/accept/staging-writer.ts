import type { Pool } from '../../../platform/db/pool.js';
import type { ClaimedKey } from '../../../platform/idempotency/keys.js';
import { splitByPartition } from '../apply/partitions.js';
import type { TrackObjects } from '../../../profiles/tracked-types.js';

/**
 * The accepting side of the staging log (../apply/drain-staging.ts drains it): a /users/track request's objects, or a
 * user-data request's commands (../apply/commands.ts), committed to ingest_staging before the answer, grouped with
 * other requests' rows into one INSERT and one commit.
 */

export interface StagedRow {
  part: number;
  count: number;
  payload: string;
}

interface PendingStage {
  workspaceId: string;
  rows: StagedRow[];
  /** The request's Idempotency-Key, answered by the same statement that stages its rows. */
  answer?: StagedAnswer;
  resolve: (ids: number[]) => void;
  reject: (err: unknown) => void;
}

/** An Idempotency-Key's answer, recorded with the rows of its request. */
export interface StagedAnswer {
  key: ClaimedKey;
  status: number;
  body: unknown;
}

/**
 * Group commit for staged requests: while an insert is in flight, the requests that arrive meanwhile wait and then
 * go together in one multi-row INSERT and one commit. A commit waits for PostgreSQL to flush the log, which a
 * concurrent batch of profile updates fills quickly; one commit per request would make every acknowledgement pay
 * for that flush and hold a pool connection meanwhile.
 */
class StagingWriter {
  private readonly pending: PendingStage[] = [];
  private inflight = 0;

  constructor(
    private readonly pool: Pool,
    private readonly maxInflight = 2,
    private readonly maxRows = 500,
  ) {}

  stage(workspaceId: string, rows: StagedRow[], answer?: StagedAnswer): Promise<number[]> {
    return new Promise((resolve, reject) => {
      this.pending.push({ workspaceId, rows, answer, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inflight < this.maxInflight && this.pending.length > 0) {
      const group = this.pending.splice(0, this.maxRows);
      this.inflight++;
      this.insert(group)
        .then(
          (ids) => {
            let next = 0;
            for (const g of group) {
              if (g.answer) g.answer.key.answered = true;
              g.resolve(ids.slice(next, (next += g.rows.length)));
            }
          },
          (err: unknown) => group.forEach((g) => g.reject(err)),
        )
        .finally(() => {
          this.inflight--;
          this.pump();
        });
    }
  }

  private async insert(group: PendingStage[]): Promise<number[]> {
    // One parameter per payload rather than a text[]: quoting every '"' of the JSON into an array literal, and
    // sending the grown string, was a large share of the API's time per request (BENCHMARKS.md).
    const rows = group.flatMap((g) => g.rows.map((r) => [g.workspaceId, r.part, r.count, r.payload]));
    const values = rows.map(
      (_, i) => `($${4 * i + 1}::uuid, $${4 * i + 2}::smallint, $${4 * i + 3}::int, $${4 * i + 4}::text)`,
    );
    const params: unknown[] = rows.flat();
    let sql = `INSERT INTO ingest_staging (workspace_id, part, objects, payload) VALUES ${values.join(', ')} RETURNING id`;
    const answers = group.flatMap((g) => (g.answer ? [g.answer] : []));
    if (answers.length > 0) {
      // Idempotency-Keys are answered by this same statement: staged and answered together, or neither.
      const keyValues = answers.map((a) => {
        params.push(
          a.key.claim.workspaceId,
          a.key.claim.key,
          a.key.claim.requestHash,
          a.status,
          JSON.stringify(a.body),
        );
        const n = params.length;
        return `($${n - 4}::uuid, $${n - 3}::text, $${n - 2}::bytea, $${n - 1}::int, $${n}::jsonb)`;
      });
      sql = `WITH staged AS (${sql}),
                  answered AS (UPDATE idempotency_keys k SET status_code = v.status, response = v.response, completed_at = now()
                                 FROM (VALUES ${keyValues.join(', ')}) AS v(workspace_id, key, request_hash, status, response)
                                WHERE k.workspace_id = v.workspace_id AND k.key = v.key AND k.request_hash = v.request_hash AND k.status_code IS NULL)
             SELECT id FROM staged`;
    }
    const inserted = await this.pool.query<{ id: number }>(sql, params);
    // Identity values are drawn in the order of the VALUES rows.
    return inserted.rows.map((r) => r.id).sort((a, b) => a - b);
  }
}

const writers = new WeakMap<Pool, StagingWriter>();

/**
 * What a staged row keeps of the objects: what the apply reads. Event and purchase properties and app ids are not
 * persisted on the profile (as the spec has it) but go into the event log (docs/events.md), so they are staged too;
 * absent ones are left out rather than written as null.
 */
export function stagedForm(objects: TrackObjects): TrackObjects {
  return {
    events: objects.events.map((e) => ({
      identity: e.identity,
      create: e.create,
      name: e.name,
      time: e.time,
      ...(e.app_id === undefined ? {} : { app_id: e.app_id }),
      ...(e.properties === undefined ? {} : { properties: e.properties }),
    })),
    purchases: objects.purchases.map((p) => ({
      identity: p.identity,
      create: p.create,
      product_id: p.product_id,
      currency: p.currency,
      price: p.price,
      quantity: p.quantity,
      time: p.time,
      ...(p.app_id === undefined ? {} : { app_id: p.app_id }),
      ...(p.properties === undefined ? {} : { properties: p.properties }),
    })),
    attributes: objects.attributes,
  };
}

/**
 * Commits one request's accepted objects (possibly in one commit with other requests'), a row per ingestion
 * partition; returns the staged rows' ids.
 */
export async function stageObjects(
  pool: Pool,
  workspaceId: string,
  objects: TrackObjects,
  partitions = 1,
  answer?: StagedAnswer,
): Promise<number[]> {
  const rows = splitByPartition(stagedForm(objects), partitions).map(({ part, objects: o }) => ({
    part,
    count: o.events.length + o.attributes.length + o.purchases.length,
    payload: JSON.stringify(o),
  }));
  return stageRows(pool, workspaceId, rows, answer);
}

/**
 * Commits rows of one request (possibly in one commit with other requests'), all in one INSERT: the request is
 * staged whole or not at all; returns the rows' ids in order.
 */
export async function stageRows(
  pool: Pool,
  workspaceId: string,
  rows: StagedRow[],
  answer?: StagedAnswer,
): Promise<number[]> {
  let writer = writers.get(pool);
  if (!writer) writers.set(pool, (writer = new StagingWriter(pool)));
  return writer.stage(workspaceId, rows, answer);
}
