import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { expect } from 'vitest';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { waitFor } from './cli.js';
import type { TestEnv } from './context.js';
import { bearer, type SeededWorkspace } from './seed.js';

/** What tests of Cloud Data Ingestion share: triggering a run and waiting for it, files in the store, rejects files. */

export type RunStatus = Record<string, unknown> & { job_status: string };

/** POST .../sync through the API: 202 expected. Returns when the run is recorded. */
export async function triggerSync(env: TestEnv, ws: SeededWorkspace, integration: string): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: `/cdi/integrations/${integration}/sync`,
    headers: bearer(ws.apiKey),
  });
  expect(res.statusCode, res.body).toBe(202);
}

/** The newest run of the integration, as GET .../job_sync_status answers it. */
export async function latestRun(env: TestEnv, ws: SeededWorkspace, integration: string): Promise<RunStatus> {
  const res = await env.app.inject({
    method: 'GET',
    url: `/cdi/integrations/${integration}/job_sync_status`,
    headers: bearer(ws.apiKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json().results as RunStatus[])[0]!;
}

/**
 * Waits until the newest run has ended (read in cdi_sync_jobs, so as not to spend the status endpoint's rate limit),
 * and returns it as the API answers it.
 */
export async function waitForRun(
  env: TestEnv,
  ws: SeededWorkspace,
  integration: string,
  timeoutMs = 60_000,
): Promise<RunStatus> {
  await waitFor(
    async () => {
      const job = await jobRow(env, integration);
      return job !== undefined && job.status !== 'running';
    },
    timeoutMs,
    100,
  );
  return latestRun(env, ws, integration);
}

/** Triggers a run and waits for it to end. */
export async function syncOnce(env: TestEnv, ws: SeededWorkspace, integration: string): Promise<RunStatus> {
  await triggerSync(env, ws, integration);
  return waitForRun(env, ws, integration);
}

/** Writes a file into the workspace's built-in store (no bucket declared), under `key`. */
export async function putLocal(env: TestEnv, ws: SeededWorkspace, key: string, body: string | Buffer): Promise<void> {
  const file = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), key);
  await mkdir(path.dirname(file), { recursive: true });
  await writeFile(file, body);
}

/** The newest run's row in cdi_sync_jobs (what the API does not show: attempts, the rejects file, the error). */
export async function jobRow(env: TestEnv, integration: string): Promise<Record<string, unknown>> {
  const { rows } = await env.ctx.pool.query(
    `SELECT * FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC, id DESC LIMIT 1`,
    [integration],
  );
  return rows[0] as Record<string, unknown>;
}

/** The lines of the newest run's rejects file in the built-in store, parsed. */
export async function rejectsOf(
  env: TestEnv,
  ws: SeededWorkspace,
  integration: string,
): Promise<Array<Record<string, unknown>>> {
  const key = (await jobRow(env, integration)).rejects_key as string | null;
  if (!key) return [];
  const text = await readFile(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), key), 'utf8');
  return text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l) as Record<string, unknown>);
}

/** A profile's custom attributes by external id, or null when there is no such profile. */
export async function attributesOf(
  env: TestEnv,
  ws: SeededWorkspace,
  externalId: string,
): Promise<Record<string, unknown> | null> {
  const { rows } = await env.ctx.pool.query(
    `SELECT custom_attributes FROM profiles WHERE workspace_id = $1 AND external_id = $2`,
    [ws.workspaceId, externalId],
  );
  return (rows[0]?.custom_attributes ?? null) as Record<string, unknown> | null;
}
