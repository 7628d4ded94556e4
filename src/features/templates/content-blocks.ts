import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';
import { contentBlockNames } from './email-templates.js';
import { liquidIsWellFormed } from './liquid.js';

/**
 * Content blocks: create, update, read and list, with Braze's refusal messages (its troubleshooting tables, newest
 * English pages), which the requests are parsed here to produce whatever went wrong. A block is referenced from
 * templates as `{{content_blocks.${name}}}` (its `liquid_tag`); an email template naming a block the workspace does
 * not have is refused (src/features/templates/email-templates.ts).
 */

export const CONTENT_BLOCK_MESSAGES = {
  contentBlank: 'Content cannot be blank',
  contentString: 'Content must be a string',
  contentSize: 'Content must be smaller than 50kb',
  liquid: 'Content contains malformed liquid',
  selfReference: 'Content Block cannot be referenced within itself',
  descriptionBlank: 'Content Block description cannot be blank',
  descriptionString: 'Content Block description must be a string',
  descriptionLength: 'Content Block description must be shorter than 250 characters',
  nameBlank: 'Content Block name cannot be blank',
  nameLength: 'Content Block name must be shorter than 100 characters',
  nameCharacters: 'Content Block name can only contain alphanumeric characters',
  nameTaken: 'Content Block with this name already exists',
  nameActive: 'Content Block name cannot be updated for active Content Blocks',
  state: 'Content Block state must be either active or draft',
  activeToDraft: 'Active Content Block can not be updated to Draft. Create a new Content Block.',
  tagsArray: 'Tags must be an array',
  tagsStrings: 'All tags must be strings',
  tagsNotFound: 'Some tags could not be found',
  idBlank: 'Content Block ID cannot be blank',
  idInvalid: 'Content Block ID is invalid for this workspace',
  inclusionData: 'Include Inclusion Data—error',
} as const;
const M = CONTENT_BLOCK_MESSAGES;

/** 50 KB of content, in UTF-8 bytes ("smaller than"). */
export const CONTENT_BLOCK_MAX_BYTES = 50 * 1024;

const Name = z
  .string({ error: (i) => (i.input == null ? M.nameBlank : M.nameCharacters) })
  .min(1, M.nameBlank)
  .max(99, M.nameLength)
  .regex(/^[A-Za-z0-9_-]+$/, M.nameCharacters);
const Fields = {
  name: Name,
  description: z.string({ error: M.descriptionString }).min(1, M.descriptionBlank).max(249, M.descriptionLength),
  content: z
    .string({ error: (i) => (i.input == null ? M.contentBlank : M.contentString) })
    .min(1, M.contentBlank)
    .refine((c) => Buffer.byteLength(c, 'utf8') < CONTENT_BLOCK_MAX_BYTES, M.contentSize)
    .refine(liquidIsWellFormed, M.liquid),
  state: z.enum(['active', 'draft'], { error: M.state }),
  tags: z
    .array(z.string({ error: M.tagsStrings }).max(255, 'A tag is at most 255 characters'), { error: M.tagsArray })
    .max(100, 'At most 100 tags'),
};
const objectError = {
  error: (i: { code: string; keys?: string[] }) =>
    i.code === 'unrecognized_keys'
      ? `Unknown field: ${(i.keys ?? []).join(', ')}`
      : 'Request body must be a JSON object',
};

export const ContentBlockCreateBody = z.strictObject(
  {
    name: Fields.name,
    description: Fields.description.optional(),
    content: Fields.content,
    state: Fields.state.optional(),
    tags: Fields.tags.optional(),
  },
  objectError,
);
export const ContentBlockUpdateBody = z.strictObject(
  {
    content_block_id: z.string({ error: M.idBlank }).min(1, M.idBlank).max(255, M.idInvalid),
    name: Fields.name.optional(),
    description: Fields.description.optional(),
    content: Fields.content.optional(),
    state: Fields.state.optional(),
    tags: Fields.tags.optional(),
  },
  objectError,
);

function parseOrRefuse<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw badRequest(parsed.error.issues[0]?.message ?? 'Invalid request body');
}

/** The Liquid that includes a block: `{{content_blocks.${name}}}`. */
export const liquidTag = (name: string) => `{{content_blocks.\${${name}}}}`;

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

export interface ContentBlockSaved {
  content_block_id: string;
  liquid_tag: string;
  created_at: string;
}

async function checkTags(client: PoolClient | Pool, workspaceId: string, tags: string[] | undefined): Promise<void> {
  const wanted = tags ? [...new Set(tags)] : [];
  if (wanted.length === 0) return;
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM tags WHERE workspace_id = $1 AND name = ANY($2::text[])`,
    [workspaceId, wanted],
  );
  if (rows[0]!.n < wanted.length) throw badRequest(M.tagsNotFound);
}

/** The write of a block, refused with Braze's message when the name is taken (the unique key of the table). */
async function saving<T>(write: () => Promise<T>): Promise<T> {
  try {
    return await write();
  } catch (err) {
    if ((err as { code?: string }).code === '23505') throw badRequest(M.nameTaken);
    throw err;
  }
}

/** POST /content_blocks/create */
export async function createContentBlock(pool: Pool, workspaceId: string, input: unknown): Promise<ContentBlockSaved> {
  const b = parseOrRefuse(ContentBlockCreateBody, input);
  if (contentBlockNames(b.content).includes(b.name)) throw badRequest(M.selfReference);
  await checkTags(pool, workspaceId, b.tags);
  const { rows } = await saving(() =>
    pool.query<{ id: string; created_at: string }>(
      `INSERT INTO content_blocks (workspace_id, name, content, description, state, tags)
       VALUES ($1, $2, $3, $4, $5, $6)
       RETURNING id, ${iso('created_at')} AS created_at`,
      [workspaceId, b.name, b.content, b.description ?? null, b.state ?? 'active', [...new Set(b.tags ?? [])]],
    ),
  );
  return { content_block_id: rows[0]!.id, liquid_tag: liquidTag(b.name), created_at: rows[0]!.created_at };
}

/**
 * POST /content_blocks/update: fields not sent keep their value (the state too: Braze's page says it "defaults to
 * active", which would activate a draft on any edit; we keep it). A draft may be renamed and activated; an active
 * block keeps its name and cannot go back to draft.
 */
export async function updateContentBlock(pool: Pool, workspaceId: string, input: unknown): Promise<ContentBlockSaved> {
  const b = parseOrRefuse(ContentBlockUpdateBody, input);
  return withTransaction(pool, async (client) => {
    const { rows } = UUID.test(b.content_block_id)
      ? await client.query<{ name: string; content: string; state: string }>(
          `SELECT name, content, state FROM content_blocks WHERE workspace_id = $1 AND id = $2 FOR UPDATE`,
          [workspaceId, b.content_block_id],
        )
      : { rows: [] };
    const current = rows[0];
    if (!current) throw badRequest(M.idInvalid);
    if (b.name !== undefined && b.name !== current.name && current.state === 'active') throw badRequest(M.nameActive);
    if (b.state === 'draft' && current.state === 'active') throw badRequest(M.activeToDraft);
    const name = b.name ?? current.name;
    if (contentBlockNames(b.content ?? current.content).includes(name)) throw badRequest(M.selfReference);
    await checkTags(client, workspaceId, b.tags);
    const updated = await saving(() =>
      client.query<{ created_at: string }>(
        `UPDATE content_blocks SET
            name = $3, content = COALESCE($4, content),
            description = CASE WHEN $5::boolean THEN $6 ELSE description END,
            state = COALESCE($7, state), tags = COALESCE($8::text[], tags), updated_at = now()
          WHERE workspace_id = $1 AND id = $2
          RETURNING ${iso('created_at')} AS created_at`,
        [
          workspaceId,
          b.content_block_id,
          name,
          b.content ?? null,
          b.description !== undefined,
          b.description ?? null,
          b.state ?? null,
          b.tags ? [...new Set(b.tags)] : null,
        ],
      ),
    );
    return {
      content_block_id: b.content_block_id,
      liquid_tag: liquidTag(name),
      created_at: updated.rows[0]!.created_at,
    };
  });
}
