import type { Pool } from '../../platform/db/pool.js';
import { notFound } from '../../platform/errors.js';

export interface PreferenceCenterSummary {
  name: string;
  preference_center_api_id: string;
  created_at: string;
  updated_at: string;
}

export interface PreferenceCenterDetail extends PreferenceCenterSummary {
  preference_center_title: string;
  preference_center_page_html: string;
  confirmation_page_html: string;
  redirect_page_html: string | null;
  preference_center_options: { 'meta-viewport-content': string } & Record<string, unknown>;
  state: string;
}

/**
 * The spec says the options always contain `meta-viewport-content`; a center defined without one gets the viewport
 * that a page without the meta tag would render with.
 */
export const DEFAULT_META_VIEWPORT = 'width=device-width, initial-scale=1';

interface SummaryRow {
  name: string;
  api_id: string;
  created_at: Date;
  updated_at: Date;
}

const summary = (r: SummaryRow): PreferenceCenterSummary => ({
  name: r.name,
  preference_center_api_id: r.api_id,
  created_at: r.created_at.toISOString(),
  updated_at: r.updated_at.toISOString(),
});

/** Every preference center of a workspace, oldest first (the spec gives the list no paging). */
export async function listPreferenceCenters(pool: Pool, workspaceId: string): Promise<PreferenceCenterSummary[]> {
  const { rows } = await pool.query<SummaryRow>(
    `SELECT name, api_id, created_at, updated_at FROM preference_centers WHERE workspace_id = $1 ORDER BY created_at, id`,
    [workspaceId],
  );
  return rows.map(summary);
}

/** One preference center by its API id; unknown ids (or another workspace's) are a 404. */
export async function getPreferenceCenter(
  pool: Pool,
  workspaceId: string,
  apiId: string,
): Promise<PreferenceCenterDetail> {
  const { rows } = await pool.query<
    SummaryRow & {
      title: string;
      page_html: string;
      confirmation_page_html: string;
      redirect_page_html: string | null;
      options: Record<string, unknown>;
      state: string;
    }
  >(
    `SELECT name, api_id, created_at, updated_at, title, page_html, confirmation_page_html, redirect_page_html, options, state
       FROM preference_centers WHERE workspace_id = $1 AND api_id = $2`,
    [workspaceId, apiId],
  );
  const r = rows[0];
  if (!r) throw notFound(`Preference center not found: ${JSON.stringify(apiId)}`);
  const viewport = r.options['meta-viewport-content'];
  return {
    ...summary(r),
    preference_center_title: r.title,
    preference_center_page_html: r.page_html,
    confirmation_page_html: r.confirmation_page_html,
    redirect_page_html: r.redirect_page_html,
    preference_center_options: {
      ...r.options,
      'meta-viewport-content': typeof viewport === 'string' ? viewport : DEFAULT_META_VIEWPORT,
    },
    state: r.state,
  };
}
