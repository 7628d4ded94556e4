import type { Pool } from '../../platform/db/pool.js';
import { notFound } from '../../platform/errors.js';
import { describeFilter } from './describe.js';
import { SegmentFilterSchema } from './filter.js';

/** GET /segments/details: what a segment is, in the public API's shape. */
export interface SegmentDetails {
  name: string;
  /** The filter in words (generated, ./describe.ts). */
  description: string;
  /** The description the workspace file gives the segment; empty when it gives none. */
  text_description: string;
  tags: string[];
  teams: string[];
  created_at: string;
  updated_at: string;
}

/** The refusal of a segment id the workspace does not have (unknown, or another workspace's): a 404. */
export const unknownSegment = (apiId: string) =>
  notFound(`segment_id ${JSON.stringify(apiId)} does not name a segment of this workspace`);

/** A segment's details by its API id, archived or not (its id still names it); a 404 when the workspace has none. */
export async function segmentDetails(pool: Pool, workspaceId: string, apiId: string): Promise<SegmentDetails> {
  const { rows } = await pool.query<{
    name: string;
    filter: unknown;
    description: string | null;
    tags: string[];
    teams: string[];
    created_at: Date;
    updated_at: Date;
  }>(
    `SELECT name, filter, description, tags, teams, created_at, updated_at
       FROM segments WHERE workspace_id = $1 AND api_id = $2`,
    [workspaceId, apiId],
  );
  const row = rows[0];
  if (!row) throw unknownSegment(apiId);
  // Filters are validated when declared; one stored before a rule tightened is described as unreadable, not a 500.
  const filter = SegmentFilterSchema.safeParse(row.filter);
  return {
    name: row.name,
    description: filter.success ? describeFilter(filter.data) : 'A filter this version cannot read.',
    text_description: row.description ?? '',
    tags: row.tags,
    teams: row.teams,
    created_at: row.created_at.toISOString(),
    updated_at: row.updated_at.toISOString(),
  };
}
