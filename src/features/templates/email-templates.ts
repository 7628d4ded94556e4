import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import type { Pool } from '../../platform/db/pool.js';
import { badRequest, notFound } from '../../platform/errors.js';

/**
 * Email templates: create, update, read and list. Requests are parsed here rather than by the route so that the
 * spec's refusal messages ("Template name is required", ...) are what a client reads whatever went wrong.
 */

export const EMAIL_TEMPLATE_LIMITS = {
  templateName: 255,
  subject: 1_000,
  preheader: 1_000,
  /** Characters of body and of plaintext_body. */
  body: 1_000_000,
  tags: 100,
  tag: 255,
} as const;

export const MESSAGES = {
  nameRequired: 'Template name is required',
  tagsArray: 'Tags must be an array',
  tagsStrings: 'All tags must be strings',
  tagsNotFound: 'Some tags could not be found',
  contentBlocks: 'Email must have valid content block names',
  inlineCss: 'Invalid value for should_inline_css; expected true or false',
} as const;

const L = EMAIL_TEMPLATE_LIMITS;
const text = (field: string, max: number, required: string) =>
  z
    .string({ error: (i) => (i.input == null ? required : `${field} must be a string`) })
    .min(1, required)
    .max(max, `${field} must be at most ${max.toLocaleString('en')} characters`);
const optionalText = (field: string, max: number) =>
  z
    .string({ error: `${field} must be a string` })
    .max(max, `${field} must be at most ${max.toLocaleString('en')} characters`)
    .optional();

const Fields = {
  template_name: text('template_name', L.templateName, MESSAGES.nameRequired),
  subject: text('subject', L.subject, 'Subject is required'),
  body: text('body', L.body, 'Body is required'),
  plaintext_body: optionalText('plaintext_body', L.body),
  preheader: optionalText('preheader', L.preheader),
  tags: z
    .array(z.string({ error: MESSAGES.tagsStrings }).max(L.tag, `A tag is at most ${L.tag} characters`), {
      error: MESSAGES.tagsArray,
    })
    .max(L.tags, `At most ${L.tags} tags`)
    .optional(),
  should_inline_css: z.boolean({ error: MESSAGES.inlineCss }).optional(),
};

const objectError = {
  error: (i: { code: string; keys?: string[] }) =>
    i.code === 'unrecognized_keys'
      ? `Unknown field: ${(i.keys ?? []).join(', ')}`
      : 'Request body must be a JSON object',
};

export const EmailTemplateCreateBody = z.strictObject(Fields, objectError);

export const EmailTemplateUpdateBody = z.strictObject(
  {
    email_template_id: text('email_template_id', 255, 'email_template_id is required'),
    template_name: Fields.template_name.optional(),
    subject: Fields.subject.optional(),
    body: Fields.body.optional(),
    plaintext_body: Fields.plaintext_body,
    preheader: Fields.preheader,
    tags: Fields.tags,
    should_inline_css: Fields.should_inline_css,
  },
  objectError,
);

/** Parses with the schema and refuses with its first message (fields are checked in the spec's order). */
function parseOrRefuse<S extends z.ZodType>(schema: S, input: unknown): z.infer<S> {
  const parsed = schema.safeParse(input ?? {});
  if (parsed.success) return parsed.data;
  throw badRequest(parsed.error.issues[0]?.message ?? 'Invalid request body');
}

// Liquid reference to a content block: {{content_blocks.${name}}}, spaces allowed inside the braces.
const CONTENT_BLOCK_REF = /\{\{\s*content_blocks\.\$\{\s*([^}]*?)\s*\}\s*\}\}/g;

/** Names of the content blocks a template's text refers to. */
export function contentBlockNames(...texts: (string | undefined)[]): string[] {
  const names = new Set<string>();
  for (const t of texts) if (t) for (const m of t.matchAll(CONTENT_BLOCK_REF)) names.add(m[1] ?? '');
  return [...names];
}

async function checkReferences(
  pool: Pool,
  workspaceId: string,
  tags: string[] | undefined,
  texts: (string | undefined)[],
): Promise<void> {
  const wanted = tags ? [...new Set(tags)] : [];
  const blocks = contentBlockNames(...texts);
  if (wanted.length === 0 && blocks.length === 0) return;
  const { rows } = await pool.query<{ tags_found: number; blocks_found: number }>(
    `SELECT (SELECT count(*) FROM tags WHERE workspace_id = $1 AND name = ANY($2::text[]))::int AS tags_found,
            (SELECT count(*) FROM content_blocks WHERE workspace_id = $1 AND name = ANY($3::text[]))::int AS blocks_found`,
    [workspaceId, wanted, blocks],
  );
  if (rows[0]!.tags_found < wanted.length) throw badRequest(MESSAGES.tagsNotFound);
  if (rows[0]!.blocks_found < blocks.length) throw badRequest(MESSAGES.contentBlocks);
}

export async function createEmailTemplate(
  pool: Pool,
  workspaceId: string,
  input: unknown,
): Promise<{ email_template_id: string }> {
  const t = parseOrRefuse(EmailTemplateCreateBody, input);
  await checkReferences(pool, workspaceId, t.tags, [t.subject, t.body, t.plaintext_body, t.preheader]);
  const id = randomUUID();
  await pool.query(
    `INSERT INTO email_templates (workspace_id, api_id, template_name, subject, body, plaintext_body, preheader, tags, should_inline_css)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
    [
      workspaceId,
      id,
      t.template_name,
      t.subject,
      t.body,
      t.plaintext_body ?? null,
      t.preheader ?? null,
      t.tags ? [...new Set(t.tags)] : [],
      t.should_inline_css ?? null,
    ],
  );
  return { email_template_id: id };
}

export async function updateEmailTemplate(
  pool: Pool,
  workspaceId: string,
  input: unknown,
): Promise<{ email_template_id: string }> {
  const t = parseOrRefuse(EmailTemplateUpdateBody, input);
  const { email_template_id: id, ...changes } = t;
  if (Object.values(changes).every((v) => v === undefined)) {
    throw badRequest('At least one field other than email_template_id must be given');
  }
  await checkReferences(pool, workspaceId, changes.tags, [
    changes.subject,
    changes.body,
    changes.plaintext_body,
    changes.preheader,
  ]);
  // Absent fields keep their value: COALESCE over the new values, with a flag per nullable field that was sent.
  const { rowCount } = await pool.query(
    `UPDATE email_templates SET
        template_name     = COALESCE($3, template_name),
        subject           = COALESCE($4, subject),
        body              = COALESCE($5, body),
        plaintext_body    = CASE WHEN $6::boolean THEN $7 ELSE plaintext_body END,
        preheader         = CASE WHEN $8::boolean THEN $9 ELSE preheader END,
        tags              = COALESCE($10::text[], tags),
        should_inline_css = CASE WHEN $11::boolean THEN $12 ELSE should_inline_css END,
        updated_at        = now()
      WHERE workspace_id = $1 AND api_id = $2`,
    [
      workspaceId,
      id,
      changes.template_name ?? null,
      changes.subject ?? null,
      changes.body ?? null,
      changes.plaintext_body !== undefined,
      changes.plaintext_body ?? null,
      changes.preheader !== undefined,
      changes.preheader ?? null,
      changes.tags ? [...new Set(changes.tags)] : null,
      changes.should_inline_css !== undefined,
      changes.should_inline_css ?? null,
    ],
  );
  if (rowCount === 0) throw notFound(`No email template with email_template_id ${JSON.stringify(id.slice(0, 64))}`);
  return { email_template_id: id };
}

export interface EmailTemplateInfo {
  email_template_id: string;
  template_name: string;
  subject: string;
  preheader: string | null;
  body: string;
  plaintext_body: string | null;
  should_inline_css: boolean;
  tags: string[];
  created_at: string;
  updated_at: string;
}

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/**
 * One template. `should_inline_css` shows the workspace default (the workspace file's
 * settings.should_inline_css, true when unset) for templates created without it, as the spec says the default applies.
 */
export async function getEmailTemplate(pool: Pool, workspaceId: string, id: string): Promise<EmailTemplateInfo> {
  const { rows } = await pool.query<EmailTemplateInfo>(
    `SELECT t.api_id AS email_template_id, t.template_name, t.subject, t.preheader, t.body, t.plaintext_body,
            COALESCE(t.should_inline_css, (w.settings ->> 'should_inline_css')::boolean, true) AS should_inline_css,
            t.tags, ${iso('t.created_at')} AS created_at, ${iso('t.updated_at')} AS updated_at
       FROM email_templates t JOIN workspaces w ON w.id = t.workspace_id
      WHERE t.workspace_id = $1 AND t.api_id = $2`,
    [workspaceId, id],
  );
  const row = rows[0];
  if (!row) throw notFound(`No email template with email_template_id ${JSON.stringify(id.slice(0, 64))}`);
  return row;
}

export interface EmailTemplateListEntry {
  email_template_id: string;
  template_name: string;
  created_at: string;
  updated_at: string;
  tags: string[];
}

export interface EmailTemplateListQuery {
  modifiedAfter?: Date;
  modifiedBefore?: Date;
  limit: number;
  offset: number;
}

/** A page of templates by last modification (oldest first, ties by id, so offset paging never repeats). */
export async function listEmailTemplates(
  pool: Pool,
  workspaceId: string,
  q: EmailTemplateListQuery,
): Promise<EmailTemplateListEntry[]> {
  const { rows } = await pool.query<EmailTemplateListEntry>(
    `SELECT api_id AS email_template_id, template_name, ${iso('created_at')} AS created_at, ${iso('updated_at')} AS updated_at, tags
       FROM email_templates
      WHERE workspace_id = $1
        AND ($2::timestamptz IS NULL OR updated_at > $2)
        AND ($3::timestamptz IS NULL OR updated_at < $3)
      ORDER BY updated_at, id
      LIMIT $4 OFFSET $5`,
    [workspaceId, q.modifiedAfter ?? null, q.modifiedBefore ?? null, q.limit, q.offset],
  );
  return rows;
}
