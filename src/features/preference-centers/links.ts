import { createHmac, timingSafeEqual } from 'node:crypto';
import { z } from 'zod';
import type { Config } from '../../platform/config.js';
import type { Pool } from '../../platform/db/pool.js';
import { AppError, notFound } from '../../platform/errors.js';

/**
 * A user's preference center URL (GET /preference_center/v1/{id}/url/{userID}): signed, not stored, like the export
 * download links (src/pipelines/exports/finish/download.ts), so any API process with the same secret serves it. The
 * token names the workspace, the center's row and the profile by internal ids (no personal data in the address), and
 * when it stops working. The page and its form share the address: the form posts back to the URL it came from.
 */

type LinkConfig = Pick<
  Config,
  'PREFERENCE_CENTER_URL_SECRET' | 'DOWNLOAD_URL_SECRET' | 'PREFERENCE_CENTER_URL_TTL_SECONDS'
>;

/** The path of the public pages; a token follows. */
export const PAGE_PATH = '/pages/preference_center';

const Payload = z.strictObject({
  w: z.uuid(),
  c: z.uuid(),
  p: z.number().int().positive(),
  /** Expiry, Unix seconds. */
  e: z.number().int().positive(),
});
export type PageLink = z.infer<typeof Payload>;

const secretOf = (config: LinkConfig) => config.PREFERENCE_CENTER_URL_SECRET ?? config.DOWNLOAD_URL_SECRET;

// The kind of link goes into the signed text, so that a signature of another kind (a download's) is never one of these.
const sign = (config: LinkConfig, payload: string) =>
  createHmac('sha256', secretOf(config)).update(`preference-center-page\0${payload}`).digest('base64url');

export function signPageLink(config: LinkConfig, link: Omit<PageLink, 'e'>, now = new Date()): string {
  const payload = Buffer.from(
    JSON.stringify({ ...link, e: Math.floor(now.getTime() / 1000) + config.PREFERENCE_CENTER_URL_TTL_SECONDS }),
  ).toString('base64url');
  return `${payload}.${sign(config, payload)}`;
}

/**
 * The link a token names, or the refusal: 403 for a token that is not one of ours (altered, cut, signed with another
 * secret) or whose time is up. Nothing is read from the database before the signature holds.
 */
export function verifyPageLink(config: LinkConfig, token: string, now = new Date()): PageLink {
  const invalid = new AppError('forbidden', 'This preference center link is invalid: it was altered or cut');
  const [payload, signature, ...rest] = token.split('.');
  if (!payload || !signature || rest.length > 0 || !/^[A-Za-z0-9_-]{43}$/.test(signature)) throw invalid;
  // Compared as text: decoding would let the last character's two spare bits vary, and an altered link must fail.
  if (!timingSafeEqual(Buffer.from(sign(config, payload)), Buffer.from(signature))) throw invalid;
  let decoded: unknown;
  try {
    decoded = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8'));
  } catch {
    throw invalid;
  }
  const link = Payload.safeParse(decoded);
  if (!link.success) throw invalid;
  if (link.data.e * 1000 <= now.getTime())
    throw new AppError('forbidden', 'This preference center link has expired: ask for a new one');
  return link.data;
}

/**
 * The signed URL of a center for the user with this external id; an unknown center (or another workspace's) or user
 * is a 404 naming which.
 */
export async function preferenceCenterUrl(
  pool: Pool,
  config: LinkConfig,
  baseUrl: string,
  workspaceId: string,
  apiId: string,
  externalId: string,
): Promise<string> {
  const { rows } = await pool.query<{ center_id: string | null; profile_id: string | null }>(
    `SELECT (SELECT id FROM preference_centers WHERE workspace_id = $1 AND api_id = $2) AS center_id,
            (SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = $3) AS profile_id`,
    [workspaceId, apiId, externalId],
  );
  const { center_id, profile_id } = rows[0]!;
  if (!center_id) throw notFound(`Preference center not found: ${JSON.stringify(apiId)}`);
  if (!profile_id) throw notFound(`User not found: no user has the external_id ${JSON.stringify(externalId)}`);
  const token = signPageLink(config, { w: workspaceId, c: center_id, p: Number(profile_id) });
  return `${baseUrl}${PAGE_PATH}/${token}`;
}
