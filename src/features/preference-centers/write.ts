import { z } from 'zod';
import { lockForTransaction, lockNames } from '../../platform/db/advisory-locks.js';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { badRequest, notFound } from '../../platform/errors.js';

/**
 * Preference centers created and updated through the API (POST /preference_center/v1, PUT
 * /preference_center/v1/{id}), as Braze's newest English reference pages describe them; docs/preference-centers.md
 * says where we had to choose. The body is parsed here, so that every malformed request gets one message naming
 * what is wrong, and a refused request writes nothing.
 */

/** Limits Braze does not give; ours, those of the workspace file (src/features/workspace/schema.ts). */
export const PREFERENCE_CENTER_LIMITS = {
  name: 255,
  title: 1000,
  html: 500_000,
  viewport: 1000,
  linkTags: 20,
  href: 2048,
  centersPerWorkspace: 1000,
} as const;
const L = PREFERENCE_CENTER_LIMITS;

/** Braze: "If a title is not specified, the title of the pages will default to 'Preference Center'". */
export const DEFAULT_TITLE = 'Preference Center';

export const PREFERENCE_CENTER_MESSAGES = {
  body: 'Request body must be a JSON object',
  nameRequired: 'name is required: letters, numbers, hyphens and underscores',
  nameCharacters: 'name can only contain letters, numbers, hyphens, and underscores, and cannot have spaces',
  nameLength: `name must be at most ${L.name} characters`,
  nameTaken: 'A preference center with this name already exists',
  nameFixed: "The preference center name can't be edited after it's created",
  pageHtml: 'preference_center_page_html is required: a string',
  confirmationHtml: 'confirmation_page_html is required: a string',
  htmlLength: `HTML may be at most ${L.html.toLocaleString('en-US')} characters`,
  title: `preference_center_title must be a string of at most ${L.title} characters`,
  state: 'state must be either active or draft',
  options: 'options must be an object with meta-viewport-content (a string) and links-tags (an array)',
  viewport: `meta-viewport-content must be a string of at most ${L.viewport} characters`,
  linkTags: `links-tags must be an array of at most ${L.linkTags} objects`,
  rel: 'links-tags rel is required: icon, shortcut icon or apple-touch-icon',
  type: 'links-tags type must be one of image/png, image/svg, image/gif, image/x-icon, image/svg+xml, mask-icon',
  href: `links-tags href is required: an http(s) or data:image address of at most ${L.href} characters`,
  attribute: 'links-tags sizes and color must be strings of at most 100 characters',
  tooMany: `A workspace may have at most ${L.centersPerWorkspace.toLocaleString('en-US')} preference centers`,
} as const;
const M = PREFERENCE_CENTER_MESSAGES;

const Html = (required: string) =>
  z
    .string({ error: required })
    .max(L.html, M.htmlLength)
    .refine((h) => !h.includes('\0'), 'HTML cannot contain NUL characters');

const LinkTag = z.strictObject(
  {
    rel: z.enum(['icon', 'shortcut icon', 'apple-touch-icon'], { error: M.rel }),
    type: z
      .enum(['image/png', 'image/svg', 'image/gif', 'image/x-icon', 'image/svg+xml', 'mask-icon'], { error: M.type })
      .optional(),
    sizes: z.string({ error: M.attribute }).max(100, M.attribute).optional(),
    color: z.string({ error: M.attribute }).max(100, M.attribute).optional(),
    // A link tag's address is fetched by the browser: other schemes (javascript:, file:) have no business there.
    href: z
      .string({ error: M.href })
      .max(L.href, M.href)
      .regex(/^(https?:\/\/|data:image\/)/i, M.href),
  },
  { error: (i) => (i.code === 'unrecognized_keys' ? `Unknown links-tags field: ${i.keys.join(', ')}` : M.linkTags) },
);

/** `options` as Braze's body shows it (its table says `link-tags`; its body, which clients copy, `links-tags`). */
export const PreferenceCenterOptions = z.strictObject(
  {
    'meta-viewport-content': z.string({ error: M.viewport }).max(L.viewport, M.viewport).optional(),
    'links-tags': z.array(LinkTag, { error: M.linkTags }).max(L.linkTags, M.linkTags).optional(),
  },
  { error: (i) => (i.code === 'unrecognized_keys' ? `Unknown options field: ${i.keys.join(', ')}` : M.options) },
);
export type PreferenceCenterOptions = z.infer<typeof PreferenceCenterOptions>;

const Name = z
  .string({ error: (i) => (i.input == null ? M.nameRequired : M.nameCharacters) })
  .min(1, M.nameRequired)
  .max(L.name, M.nameLength)
  .regex(/^[A-Za-z0-9_-]+$/, M.nameCharacters);

const Fields = {
  name: Name,
  preference_center_title: z.string({ error: M.title }).max(L.title, M.title).optional(),
  preference_center_page_html: Html(M.pageHtml),
  confirmation_page_html: Html(M.confirmationHtml),
  state: z.enum(['active', 'draft'], { error: M.state }).optional(),
  options: PreferenceCenterOptions.optional(),
};
const objectError = {
  error: (i: { code: string; keys?: string[] }) =>
    i.code === 'unrecognized_keys' ? `Unknown field: ${(i.keys ?? []).join(', ')}` : M.body,
};

export const PreferenceCenterCreateBody = z.strictObject(Fields, objectError);
export type PreferenceCenterCreateBody = z.infer<typeof PreferenceCenterCreateBody>;
/** Braze's update example sends `name` too: taken when it is the center's own, refused when it would rename it. */
export const PreferenceCenterUpdateBody = z.strictObject({ ...Fields, name: Name.optional() }, objectError);
export type PreferenceCenterUpdateBody = z.infer<typeof PreferenceCenterUpdateBody>;

function parseOrRefuse<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw badRequest(parsed.error.issues[0]?.message ?? 'Invalid request body');
}

/** The Liquid that links a message to the center: `{{preference_center.${name}}}`. */
export const liquidTag = (name: string) => `{{preference_center.\${${name}}}}`;

export interface PreferenceCenterCreated {
  preference_center_api_id: string;
  liquid_tag: string;
  created_at: string;
}

export interface PreferenceCenterUpdated {
  preference_center_api_id: string;
  created_at: string;
  updated_at: string;
}

/**
 * Names are unique in a workspace (the Liquid tag names the center by it): the check and the write run under one
 * lock per workspace, which the workspace file's apply takes too.
 */
async function lockNamesOf(client: PoolClient, workspaceId: string): Promise<void> {
  await lockForTransaction(client, lockNames.preferenceCenterNames(workspaceId));
}

/** POST /preference_center/v1: a new center, its API id a fresh UUID. */
export async function createPreferenceCenter(
  pool: Pool,
  workspaceId: string,
  input: unknown,
): Promise<PreferenceCenterCreated> {
  const b = parseOrRefuse(PreferenceCenterCreateBody, input);
  return withTransaction(pool, async (client) => {
    await lockNamesOf(client, workspaceId);
    const { rows: seen } = await client.query<{ n: number; taken: boolean }>(
      `SELECT count(*)::int AS n, coalesce(bool_or(name = $2), false) AS taken FROM preference_centers WHERE workspace_id = $1`,
      [workspaceId, b.name],
    );
    if (seen[0]!.taken) throw badRequest(M.nameTaken);
    if (seen[0]!.n >= L.centersPerWorkspace) throw badRequest(M.tooMany);
    const { rows } = await client.query<{ api_id: string; created_at: Date }>(
      `INSERT INTO preference_centers (workspace_id, api_id, name, title, page_html, confirmation_page_html, options, state)
       VALUES ($1, gen_random_uuid()::text, $2, $3, $4, $5, $6, $7)
       RETURNING api_id, created_at`,
      [
        workspaceId,
        b.name,
        b.preference_center_title ?? DEFAULT_TITLE,
        b.preference_center_page_html,
        b.confirmation_page_html,
        JSON.stringify(b.options ?? {}),
        b.state ?? 'active',
      ],
    );
    const r = rows[0]!;
    return {
      preference_center_api_id: r.api_id,
      liquid_tag: liquidTag(b.name),
      created_at: r.created_at.toISOString(),
    };
  });
}

/**
 * PUT /preference_center/v1/{id}: both pages replaced (Braze requires them); the title, state and options the body
 * leaves out keep their values. An unknown id, or another workspace's, is the read endpoint's 404.
 */
export async function updatePreferenceCenter(
  pool: Pool,
  workspaceId: string,
  apiId: string,
  input: unknown,
): Promise<PreferenceCenterUpdated> {
  const b = parseOrRefuse(PreferenceCenterUpdateBody, input);
  return withTransaction(pool, async (client) => {
    const { rows: current } = await client.query<{ name: string }>(
      `SELECT name FROM preference_centers WHERE workspace_id = $1 AND api_id = $2 FOR UPDATE`,
      [workspaceId, apiId],
    );
    if (!current[0]) throw notFound(`Preference center not found: ${JSON.stringify(apiId)}`);
    if (b.name !== undefined && b.name !== current[0].name) throw badRequest(M.nameFixed);
    const { rows } = await client.query<{ created_at: Date; updated_at: Date }>(
      `UPDATE preference_centers
          SET page_html = $3, confirmation_page_html = $4, title = COALESCE($5, title),
              state = COALESCE($6, state), options = COALESCE($7::jsonb, options), updated_at = now()
        WHERE workspace_id = $1 AND api_id = $2
       RETURNING created_at, updated_at`,
      [
        workspaceId,
        apiId,
        b.preference_center_page_html,
        b.confirmation_page_html,
        b.preference_center_title ?? null,
        b.state ?? null,
        b.options === undefined ? null : JSON.stringify(b.options),
      ],
    );
    const r = rows[0]!;
    return {
      preference_center_api_id: apiId,
      created_at: r.created_at.toISOString(),
      updated_at: r.updated_at.toISOString(),
    };
  });
}
