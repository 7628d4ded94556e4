import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { attributesOf, jobRow, putLocal, rejectsOf, syncOnce, triggerSync, waitForRun } from '../helpers/cdi.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';

/**
 * Every identifier of every kind of row (a DELETED row, a PHONE row, EMAIL, an alias, SERVICE_ID) is held to the rules
 * EXTERNAL_ID is held to: a value PostgreSQL cannot store (NUL, an unpaired surrogate) or one too long refuses its row,
 * and never fails the batch (which would fail every retry, and every later run, on the same row). One integration's
 * bad rows never hold up another's run.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const BAD = randomUUID();
const GOOD = randomUUID();

beforeAll(async () => {
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 5);
  await env.ctx.pool.query(
    `UPDATE profiles SET phone = '+1555000' || substr(external_id, 5), email = external_id || '@example.com' WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
  for (const [id, prefix] of [
    [BAD, 'cdi/bad/'],
    [GOOD, 'cdi/good/'],
  ] as const)
    await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
      id,
      env.ws.workspaceId,
      prefix,
      JSON.stringify({ type: 'bucket', prefix, format: 'ndjson' }),
    ]);
  env.startWorkers([cdiSyncJob]);
});

const long = 'x'.repeat(513);
// Each line as JSON.stringify writes it: NUL as \u0000, an unpaired surrogate as \ud800 (both valid JSON).
const badRows: Array<[Record<string, unknown>, string]> = [
  [{ EXTERNAL_ID: 'nul\u0000id', DELETED: true }, "'EXTERNAL_ID' contains a NUL character (U+0000)"],
  [{ EXTERNAL_ID: long, DELETED: true }, "'EXTERNAL_ID' may be at most 512 characters"],
  [{ EXTERNAL_ID: 'lone\ud800', DELETED: true }, "'EXTERNAL_ID' contains an unpaired UTF-16 surrogate (U+D800)"],
  [{ PHONE: '+1555\u00000001', PAYLOAD: { tier: 'x' } }, "'PHONE' contains a NUL character (U+0000)"],
  [{ PHONE: `+1${'5'.repeat(600)}`, PAYLOAD: { tier: 'x' } }, "'PHONE' may be at most 512 characters"],
  [{ PHONE: '+1555\udc00', DELETED: true }, "'PHONE' contains an unpaired UTF-16 surrogate (U+DC00)"],
  [{ EMAIL: 'nul\u0000@example.com', DELETED: true }, "'EMAIL' contains a NUL character (U+0000)"],
  [{ EMAIL: '\ud800@example.com', PAYLOAD: { tier: 'x' } }, "'EMAIL' contains an unpaired UTF-16 surrogate"],
  [{ ALIAS_NAME: 'n\u0000', ALIAS_LABEL: 'crm', DELETED: true }, "'ALIAS_NAME' contains a NUL character (U+0000)"],
  [{ ALIAS_NAME: 'n', ALIAS_LABEL: long, PAYLOAD: { tier: 'x' } }, "'ALIAS_LABEL' may be at most 512 characters"],
  [{ SERVICE_ID: 's\u0000', DELETED: true }, "'SERVICE_ID' contains a NUL character (U+0000)"],
  [{ EXTERNAL_ID: '', DELETED: true }, "'EXTERNAL_ID' must not be empty"],
];

describe('CDI identifiers', () => {
  it('refuses a row whose identifier cannot be stored or is too long, whatever its kind, and syncs the rest', async () => {
    const lines = [
      { external_id: 'ext-1', payload: { tier: 'before' } },
      ...badRows.map(([row]) => row),
      { phone: '+15550002', payload: { tier: 'by-phone' } },
      { external_id: 'ext-3', deleted: true },
      { email: 'ext-4@example.com', payload: { tier: 'by-email' } },
    ];
    await putLocal(env, env.ws, 'cdi/bad/a.ndjson', lines.map((l) => JSON.stringify(l)).join('\n'));
    await putLocal(
      env,
      env.ws,
      'cdi/good/a.ndjson',
      JSON.stringify({ external_id: 'ext-5', payload: { tier: 'good' } }),
    );
    // The bad integration's run first, then the good one's, on the same (single) worker.
    await triggerSync(env, env.ws, BAD);
    await triggerSync(env, env.ws, GOOD);
    expect(await waitForRun(env, env.ws, GOOD)).toMatchObject({ job_status: 'success', rows_synced: 1 });
    expect(await attributesOf(env, env.ws, 'ext-5')).toMatchObject({ tier: 'good' });
    // By then the bad one has ended too, in its first attempt: its bad rows refused, none retried.
    const bad = await waitForRun(env, env.ws, BAD, 5_000);
    expect(bad).toMatchObject({ job_status: 'partial', rows_synced: 4, rows_failed_with_errors: badRows.length });
    expect(await jobRow(env, BAD)).toMatchObject({ attempts: 1, error: null });
    expect(await attributesOf(env, env.ws, 'ext-1')).toMatchObject({ tier: 'before' });
    expect(await attributesOf(env, env.ws, 'ext-2')).toMatchObject({ tier: 'by-phone' });
    expect(await attributesOf(env, env.ws, 'ext-3')).toBeNull();
    expect(await attributesOf(env, env.ws, 'ext-4')).toMatchObject({ tier: 'by-email' });
    const rejects = await rejectsOf(env, env.ws, BAD);
    expect(rejects).toHaveLength(badRows.length);
    rejects.forEach((r, n) => {
      expect(r.reason).toContain(badRows[n]![1]);
      expect(r.line).toBe(n + 2);
    });
    // The next run has nothing left to do: the refused rows were taken (refused), not left to fail again.
    expect(await syncOnce(env, env.ws, BAD)).toMatchObject({ job_status: 'success', rows_synced: 0 });
  });
});
