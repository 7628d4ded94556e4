import pg from 'pg';
import {
  aheadReason,
  columnMap,
  headOf,
  KEPT_PAYLOAD_BYTES,
  MAX_PAYLOAD_BYTES,
  PayloadTooLarge,
  type CdiColumn,
  type SourceRow,
} from './rows.js';

/**
 * A PostgreSQL table (or view) as a Cloud Data Ingestion source, reached with the connection string an environment
 * variable names (read when the sync runs, never stored or logged). Rows are read in one ordered query, through a
 * cursor fetched a few megabytes at a time as the sync asks: those with UPDATED_AT at or after the integration's
 * watermark, in (UPDATED_AT, row hash) order, the ones already synced left out by their hash. A row's hash is md5 over
 * every column the sync reads, so an identical row is one row, and a row changed in place with the same UPDATED_AT is a
 * new one.
 */

/** The source cannot be read as configured: the run ends as `config_error`, with this message. */
export class SourceConfigError extends Error {}

/**
 * What PostgreSQL answers when the source is not as configured, which no retry mends: no privilege (42501), no such
 * table, column or schema (42P01, 42703, 3F000), the login or the database refused (28000, 28P01, 3D000). Anything
 * else (a connection refused, reset or timed out; the server shutting down; a deadlock) is a passing fault: thrown
 * as it is, so that the job is retried with backoff and resumes where it stopped.
 */
const CONFIG_STATES = new Set(['42501', '42P01', '42703', '3F000', '28000', '28P01', '3D000']);

/** A source's error as the run should take it: a SourceConfigError (the run ends at once) or the error itself. */
export function sourceError(err: unknown, context: string): unknown {
  const code = (err as { code?: unknown } | null)?.code;
  if (typeof code === 'string' && CONFIG_STATES.has(code))
    return new SourceConfigError(`${context}: ${(err as Error).message}`);
  return err;
}

/** Where a read starts: the watermark, and whether the rows at its exact time are read again (and left out by hash). */
export interface ReadStart {
  watermark: string | null;
  inclusive: boolean;
}

/** The rows at one time, summed up: how many (distinct), and md5 over their hashes in byte order (null for none). */
export interface WatermarkDigest {
  n: number;
  digest: string | null;
}

export interface TableRow {
  row: SourceRow;
  /** UPDATED_AT to the microsecond, as PostgreSQL prints it in UTC: the watermark keeps this exact value. */
  ts: string;
  hash: string;
  /**
   * Why the row is refused before it is read further: an UPDATED_AT too far ahead of the clock, or infinite. Such a
   * row never moves the watermark nor is recorded as taken: it is read (and refused) again until its time comes.
   */
  refused?: string;
}

const quoteIdent = (name: string) => `"${name.replaceAll('"', '""')}"`;

/** Bytes of source rows one FETCH asks for (see `batches`), and the most rows one asks for. */
const FETCH_BYTES = 4 * 1024 * 1024;
const MAX_FETCH_ROWS = 1_000;
/** The first FETCH knows no row's size yet: a few rows, whatever their size. */
const FIRST_FETCH_ROWS = 16;
/** What a row costs besides its payload, counted against the limits (identifiers, time, hash, their objects). */
const ROW_OVERHEAD_BYTES = 256;

export class TableSource {
  private constructor(
    private readonly client: pg.Client,
    private readonly relation: string,
    private readonly columns: Map<CdiColumn, string>,
  ) {}

  /** Connects and checks the table: it exists, has UPDATED_AT and PAYLOAD (or DELETED), and names a user somehow. */
  static async open(urlEnv: string, table: string, env: NodeJS.ProcessEnv = process.env): Promise<TableSource> {
    const url = env[urlEnv];
    if (!url)
      throw new SourceConfigError(`the environment variable ${urlEnv} (the source's connection string) is not set`);
    const client = new pg.Client({
      connectionString: url,
      application_name: 'ces-cdi',
      connectionTimeoutMillis: 10_000,
    });
    // A lost source connection fails the run's current read, which retries; it must not crash the process.
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (err) {
      await client.end().catch(() => {});
      throw sourceError(err, `the source named by ${urlEnv} refused the connection`);
    }
    try {
      await client.query(`SET TIME ZONE 'UTC'`);
      const rel = await client.query<{ name: string; oid: number }>(
        `SELECT to_regclass($1)::text AS name, to_regclass($1)::oid AS oid`,
        [table],
      );
      const found = rel.rows[0];
      if (!found?.name)
        throw new SourceConfigError(`the source has no table or view ${table} (or this user may not see it)`);
      const cols = await client.query<{ attname: string }>(
        `SELECT attname FROM pg_attribute WHERE attrelid = $1 AND attnum > 0 AND NOT attisdropped ORDER BY attnum`,
        [found.oid],
      );
      const columns = columnMap(cols.rows.map((c) => c.attname));
      if (!columns.has('updated_at')) throw new SourceConfigError(`${table} has no UPDATED_AT column`);
      if (!columns.has('payload') && !columns.has('deleted'))
        throw new SourceConfigError(`${table} has neither a PAYLOAD nor a DELETED column`);
      const identifiers: CdiColumn[] = ['external_id', 'alias_name', 'service_id', 'braze_id', 'email', 'phone'];
      if (!identifiers.some((c) => columns.has(c)))
        throw new SourceConfigError(
          `${table} has no identifier column (EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, SERVICE_ID, EMAIL or PHONE)`,
        );
      const source = new TableSource(client, found.name, columns);
      await source.probe();
      return source;
    } catch (err) {
      await client.end().catch(() => {});
      throw sourceError(err, `${table} cannot be read`);
    }
  }

  /**
   * Reads no row, but checks what the sync will read: the columns, with this login's privileges. A table it may not
   * read fails here (42501) rather than at the first batch, where it would be retried as a passing fault.
   */
  private async probe(): Promise<void> {
    const columns = [...this.columns.values()].map(quoteIdent).join(', ');
    await this.client.query(`SELECT ${columns} FROM ${this.relation} LIMIT 0`);
  }

  /** A row's hash: md5 over every column the sync reads (see the class). */
  private hashExpression(): string {
    const hashed = [...this.columns.values()].map((theirs) => `coalesce(${quoteIdent(theirs)}::text, chr(30))`);
    return `md5(concat_ws(chr(31), ${hashed.join(', ')}))`;
  }

  /**
   * The distinct rows the source holds at exactly `watermark`: how many, and md5 over their hashes in byte order (null
   * when none), what `watermarkDigest` gives of the hashes kept for that time when every one of them was taken. Reads
   * only the rows at that time (by the index on UPDATED_AT, if the table has one) and sends two values back.
   */
  async rowsAt(watermark: string): Promise<WatermarkDigest> {
    const updated = quoteIdent(this.columns.get('updated_at')!);
    try {
      const { rows } = await this.client.query<WatermarkDigest>(
        `SELECT count(*)::int AS n, md5(string_agg(hash, '' ORDER BY hash)) AS digest
           FROM (SELECT DISTINCT ${this.hashExpression()} COLLATE "C" AS hash
                   FROM ${this.relation} WHERE ${updated} = $1::timestamptz) s`,
        [watermark],
      );
      return rows[0]!;
    } catch (err) {
      throw sourceError(err, `${this.relation} cannot be read`);
    }
  }

  /**
   * The ordered query from `start.watermark` (inclusive, or exclusive when every row at its time was taken), or from
   * the start. `latest` is the latest UPDATED_AT a row may
   * have (latestRowTime): each row says whether it is past it, compared by PostgreSQL, whatever the time's range. Each
   * row says its PAYLOAD's size too (`octet_length` of its text, whatever its type): one over the cap is not sent, only
   * its first kilobyte, so no row larger than the cap is ever read into this process.
   */
  private query(start: ReadStart, latest: string): { sql: string; params: unknown[] } {
    const { watermark } = start;
    const cols = [...this.columns.entries()];
    const select = cols
      .map(([ours, theirs]) => (ours === 'updated_at' ? null : `${quoteIdent(theirs)} AS ${ours}`))
      .filter(Boolean);
    const updated = quoteIdent(this.columns.get('updated_at')!);
    const ts = `to_char(${updated}::timestamptz, 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
    const tooLarge = `r.payload_bytes > ${MAX_PAYLOAD_BYTES}`;
    const outer = [
      ...cols
        .filter(([ours]) => ours !== 'updated_at')
        .map(([ours]) =>
          ours === 'payload' ? `CASE WHEN ${tooLarge} THEN NULL ELSE r.payload END AS payload` : `r.${ours}`,
        ),
      'r.ts',
      'r.hash',
      'r.ahead',
      'r.payload_bytes',
      this.columns.has('payload')
        ? `CASE WHEN ${tooLarge} THEN left(r.payload::text, ${KEPT_PAYLOAD_BYTES}) END AS payload_head`
        : 'NULL AS payload_head',
    ];
    const payload = this.columns.get('payload');
    const bytes = payload ? `coalesce(octet_length(${quoteIdent(payload)}::text), 0)` : '0';
    // The ordering time stays in the subquery: read out, it would be parsed into a Date for every row, unused.
    const at = `${updated}::timestamptz`;
    const ahead = `(${at} > $1::timestamptz OR NOT isfinite(${at})) AS ahead`;
    const inner = [...select, `${ts} AS ts`, `${this.hashExpression()} AS hash`, ahead, `${bytes} AS payload_bytes`];
    const sql = `SELECT ${outer.join(', ')} FROM (SELECT ${inner.join(', ')}, ${updated} AS order_at
                   FROM ${this.relation} WHERE ${updated} IS NOT NULL ${watermark ? `AND ${updated} ${start.inclusive ? '>=' : '>'} $2::timestamptz` : ''}) r
                  ORDER BY r.order_at, r.hash`;
    return { sql, params: watermark ? [latest, watermark] : [latest] };
  }

  /** A row as the query gave it, or null when its hash says it was taken already. */
  private tableRow(raw: Record<string, unknown>, synced: ReadonlySet<string>): TableRow | null {
    const hash = raw.hash as string;
    if (synced.has(hash)) return null;
    // NULL for an infinite time (refused below); named so, it sorts after every time in the rejects' order.
    const ts = (raw.ts as string | null) ?? 'infinity';
    const row: SourceRow = {};
    for (const key of this.columns.keys()) if (key !== 'updated_at') row[key] = raw[key];
    if (raw.payload_head !== null && raw.payload_head !== undefined)
      row.payload = new PayloadTooLarge(headOf(raw.payload_head as string));
    row.updated_at = ts;
    if (raw.ahead !== true) return { row, ts, hash };
    return { row, ts, hash, refused: raw.ts === null ? 'UPDATED_AT is not a finite time' : aheadReason(ts) };
  }

  /**
   * The rows from the watermark on, in batches of at most `limits.rows` rows and about `limits.bytes` bytes, leaving
   * out those whose hash is in `synced` (rows at the watermark's exact time already taken, and rows past it that a lane
   * of an unfinished batch committed). One query, read through a cursor: the caller applies each batch before asking
   * for the next, and nothing is fetched meanwhile. Each FETCH asks for as many rows as FETCH_BYTES holds at the size
   * of the largest row of the one before, so a table of large payloads is read a few rows at a time, and one of small
   * rows a thousand at a time. (A run of large rows right after small ones makes one fetch larger than that: at most
   * MAX_FETCH_ROWS rows of the cap each.)
   */
  async *batches(
    start: ReadStart,
    synced: ReadonlySet<string>,
    limits: { rows: number; bytes: number },
    latest: string,
  ): AsyncGenerator<TableRow[]> {
    const { sql, params } = this.query(start, latest);
    try {
      yield* this.fetched(sql, params, synced, limits);
    } catch (err) {
      // A privilege revoked, or the table dropped, while the run reads it: no retry mends that either.
      throw sourceError(err, `${this.relation} cannot be read`);
    }
  }

  /** `batches`' reading, through a cursor of its own in a read-only transaction of the source connection. */
  private async *fetched(
    sql: string,
    params: unknown[],
    synced: ReadonlySet<string>,
    limits: { rows: number; bytes: number },
  ): AsyncGenerator<TableRow[]> {
    await this.client.query('BEGIN READ ONLY');
    try {
      await this.client.query(`DECLARE ces_cdi_rows NO SCROLL CURSOR FOR ${sql}`, params);
      let fetch = FIRST_FETCH_ROWS;
      let batch: TableRow[] = [];
      let bytes = 0;
      for (;;) {
        const { rows } = await this.client.query<Record<string, unknown>>(`FETCH ${fetch} FROM ces_cdi_rows`);
        let largest = 0;
        for (const raw of rows) {
          const size = ROW_OVERHEAD_BYTES + Math.min(Number(raw.payload_bytes), MAX_PAYLOAD_BYTES);
          largest = Math.max(largest, size);
          const row = this.tableRow(raw, synced);
          if (row === null) continue;
          batch.push(row);
          bytes += size;
          if (batch.length >= limits.rows || bytes >= limits.bytes) {
            yield batch;
            batch = [];
            bytes = 0;
          }
        }
        if (rows.length < fetch) break;
        fetch = Math.max(1, Math.min(MAX_FETCH_ROWS, Math.floor(FETCH_BYTES / largest)));
      }
      if (batch.length > 0) yield batch;
    } finally {
      await this.client.query('ROLLBACK').catch(() => {});
    }
  }

  async close(): Promise<void> {
    await this.client.end().catch(() => {});
  }
}
