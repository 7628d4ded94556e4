import { beforeAll, describe, expect, it } from 'vitest';
import { describeFilter } from '../../src/profiles/segments/describe.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, tags, filter, description, teams, archived, created_at, updated_at)
     VALUES ($1, 'us-players', 'US players', ARRAY['growth', 'us'],
             '{"all": [{"attribute": "country", "op": "eq", "value": "US"},
                       {"custom_event": "played", "count": {"gte": 3}, "within_days": 7}]}',
             'Players in the US who came back this week', ARRAY['Growth'], false,
             '2026-01-05T10:30:00Z', '2026-02-01T08:00:00.250Z'),
            ($1, 'everyone', 'Everyone', '{}', '{"all": []}', NULL, '{}', true,
             '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
            ($2, 'foreign', 'Other workspace', '{}', '{"all": []}', NULL, '{}', false, now(), now())`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

async function details(query: string, key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/segments/details${query}`,
    headers: { ...(key ? bearer(key) : {}), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

describe('GET /segments/details', () => {
  it('answers the public API shape, the filter in words as description', async () => {
    const { status, body } = await details('?segment_id=us-players');
    expect(status).toBe(200);
    expect(body).toEqual({
      message: 'success',
      name: 'US players',
      description:
        'Users where country is "US" and custom event "played" done at least 3 times, the last time within the past 7 days.',
      text_description: 'Players in the US who came back this week',
      tags: ['growth', 'us'],
      teams: ['Growth'],
      created_at: '2026-01-05T10:30:00.000Z',
      updated_at: '2026-02-01T08:00:00.250Z',
    });
  });

  it('answers an archived segment too, with an empty text_description when none was declared', async () => {
    const { status, body } = await details('?segment_id=everyone');
    expect(status).toBe(200);
    expect(body).toEqual({
      message: 'success',
      name: 'Everyone',
      description: 'All users.',
      text_description: '',
      tags: [],
      teams: [],
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T00:00:00.000Z',
    });
  });

  it("is a 404 naming the id for an unknown segment or another workspace's", async () => {
    for (const id of ['nope', 'foreign']) {
      const { status, body } = await details(`?segment_id=${id}`);
      expect(status, id).toBe(404);
      expect(body).toEqual({ message: `segment_id "${id}" does not name a segment of this workspace` });
    }
  });

  it.each([
    ['', /segment_id is required/],
    ['?', /segment_id is required/],
    ['?segment_id=', /segment_id must not be empty/],
    [`?segment_id=${'a'.repeat(256)}`, /segment_id is at most 255/],
    ['?segment_id=a&segment_id=b', /segment_id/],
  ])('refuses %s with a 400 naming segment_id', async (query, message) => {
    const { status, body } = await details(query);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('needs a key with segments.details, and counts against the default limit', async () => {
    expect((await details('?segment_id=us-players', null)).status).toBe(401);
    const bare = await details('?segment_id=us-players', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('segments.details');
    const ok = await details('?segment_id=us-players');
    expect(Number(ok.headers['x-ratelimit-limit'])).toBe(250000);
  });
});

describe('a filter in words', () => {
  it.each([
    [{ all: [] }, 'All users.'],
    [{ attribute: 'email', op: 'exists' }, 'Users where email is set.'],
    [{ attribute: 'gender', op: 'in', value: ['F', 'O'] }, 'Users where gender is one of "F", "O".'],
    [{ custom_attribute: 'plan', op: 'neq', value: 'free' }, 'Users where custom attribute "plan" is not "free".'],
    [{ custom_attribute: 'score', op: 'gte', value: 10 }, 'Users where custom attribute "score" is at least 10.'],
    [{ random_bucket: { gte: 0, lt: 5000 } }, 'Users where random bucket is from 0 to 4999.'],
    [{ purchase: 'sku-1' }, 'Users where product "sku-1" purchased at least once.'],
    [
      { custom_event: 'opened', count: { lte: 2 } },
      'Users where custom event "opened" done at most 2 times (never included).',
    ],
    [
      { custom_event: 'opened', count: { gte: 1, lte: 5 }, within_days: 1 },
      'Users where custom event "opened" done between 1 and 5 times, the last time within the past day.',
    ],
    [
      {
        any: [
          { attribute: 'country', op: 'eq', value: 'FR' },
          {
            all: [
              { attribute: 'country', op: 'eq', value: 'BE' },
              { attribute: 'language', op: 'eq', value: 'fr' },
            ],
          },
        ],
      },
      'Users where country is "FR" or (country is "BE" and language is "fr").',
    ],
    [
      { not: { attribute: 'email_subscribe', op: 'eq', value: 'unsubscribed' } },
      'Users where not (email_subscribe is "unsubscribed").',
    ],
  ] as const)('%j', (filter, words) => {
    expect(describeFilter(filter as Parameters<typeof describeFilter>[0])).toBe(words);
  });
});
