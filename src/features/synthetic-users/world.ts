// The world a seed's users live in: the workspace's apps, canvases and cards, and per-seed constants.
import { createHash } from 'node:crypto';
import type { PoolClient } from '../../platform/db/pool.js';
import { copyJson } from './copy-text.js';
import { hex8 } from './format.js';
import { fmix32 } from './rng.js';
import * as D from './synthetic-data.js';

export interface World {
  workspaceId: string;
  seed: number;
  seedHash: number;
  seedHex: string;
  seedTag: string;
  now: number;
  // JSON fragments below are escaped for COPY already: workspace names are free text.
  apps: { platform: string; nameJson: string; platformJson: string }[];
  /** `json`: `"name":..,"api_canvas_id":..`; steps: `"name":..,"api_canvas_step_id":..` each. */
  canvases: { json: string; steps: string[] }[];
  /** `{"name":..}` each. */
  cards: string[];
  /** `json`: `"name":..,"api_campaign_id":..`; variations: `"variation_name":..,"variation_api_id":..` each. */
  campaigns: { json: string; controlId: string; variations: string[] }[];
  /** Each country `weight` times over, so that one pick draws countries by weight. */
  countryTable: D.Country[];
}

export async function loadWorld(client: PoolClient, workspaceId: string, seed: number, now: number): Promise<World> {
  const apps = await client.query<{ name: string; platform: string }>(
    'SELECT name, platform FROM apps WHERE workspace_id = $1 ORDER BY name',
    [workspaceId],
  );
  const canvases = await client.query<{ name: string; api_id: string }>(
    'SELECT name, api_id FROM canvases WHERE workspace_id = $1 ORDER BY api_id',
    [workspaceId],
  );
  const cards = await client.query<{ title: string }>(
    'SELECT title FROM feed_cards WHERE workspace_id = $1 AND NOT archived ORDER BY api_id',
    [workspaceId],
  );
  const seedHash = seedHashOf(seed);
  const countryTable: D.Country[] = [];
  for (const c of D.COUNTRIES) for (let w = 0; w < c.weight; w++) countryTable.push(c);
  const j = (v: unknown) => copyJson(JSON.stringify(v));
  return {
    workspaceId,
    seed,
    seedHash,
    seedHex: hex8(seedHash),
    seedTag: seed.toString(36),
    now,
    apps: (apps.rows.length > 0 ? apps.rows : D.APP_FALLBACK).map((a) => ({
      platform: a.platform,
      nameJson: j(a.name),
      platformJson: j(a.platform),
    })),
    canvases: (canvases.rows.length > 0 ? canvases.rows : D.CANVAS_FALLBACK).map((c) => ({
      json: `"name":${j(c.name)},"api_canvas_id":${j(c.api_id)}`,
      steps: D.CANVAS_STEPS.map((s) => `"name":${j(s)},"api_canvas_step_id":"${stableUuid(`${c.api_id}/${s}`)}"`),
    })),
    cards: (cards.rows.length > 0 ? cards.rows.map((r) => r.title) : D.CARD_FALLBACK).map(
      (title) => `{"name":${j(title)}}`,
    ),
    campaigns: D.CAMPAIGN_NAMES.map((c) => {
      const id = stableUuid(`campaign/${c.name}`);
      return {
        json: `"name":${j(c.name)},"api_campaign_id":"${id}"`,
        controlId: stableUuid(`control/${c.name}`),
        variations: (c.variations ?? []).map(
          (v) => `"variation_name":${j(v)},"variation_api_id":"${stableUuid(`variation/${c.name}/${v}`)}"`,
        ),
      };
    }),
    countryTable,
  };
}

function stableUuid(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

const seedHashOf = (seed: number) => fmix32(seed ^ 0x5bd1e995);

/** The first 8 hex characters of every service_id a seed generates; the next 8 are the user's index. */
export const seedServiceIdPrefix = (seed: number) => hex8(seedHashOf(seed));
