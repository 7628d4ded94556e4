import { describe, expect, it } from 'vitest';
import { RATE_LIMITS } from '../../src/platform/auth/rate-limit.js';
import { createTestEnv, useTestEnv } from '../helpers/context.js';
import { bearer, seedWorkspace } from '../helpers/seed.js';

const env = useTestEnv({
  config: {
    RATE_LIMIT_DEFAULT_PER_HOUR: '3',
    BODY_LIMIT_BYTES: '2048',
    ADMIN_USER: 'ops',
    ADMIN_PASSWORD: 'correct-horse',
  },
  workspaces: ['ws', 'other'],
});

const list = (key: string) => env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) });

describe('rate limits', () => {
  it('counts per workspace, sends the headers, and answers 429 {message} with Retry-After beyond the limit', async () => {
    const seen: number[] = [];
    const started = Date.now();
    for (let i = 0; i < 3; i++) {
      const res = await list(env.ws.apiKey);
      expect(res.statusCode).toBe(200);
      expect(res.headers['x-ratelimit-limit']).toBe('3');
      seen.push(Number(res.headers['x-ratelimit-remaining']));
    }
    expect(seen).toEqual([2, 1, 0]);
    const over = await list(env.ws.apiKey);
    expect(over.statusCode).toBe(429);
    expect(over.json().message).toMatch(/Rate limit of 3 requests per hour exceeded/);
    const retryAfter = Number(over.headers['retry-after']);
    expect(retryAfter).toBeGreaterThan(0);
    // A sliding window of an hour in one-minute sub-windows: the first request stops counting at the end of its
    // minute plus an hour, and that is when Remaining grows again.
    const reset = Number(over.headers['x-ratelimit-reset']);
    expect(reset).toBeGreaterThanOrEqual(Math.floor(started / 60_000) * 60 + 3660);
    expect(reset).toBeLessThanOrEqual(Math.floor(Date.now() / 60_000) * 60 + 3660);
    expect(Math.abs(reset - (Date.now() / 1000 + retryAfter))).toBeLessThanOrEqual(2);
    // Another workspace has its own budget.
    expect((await list(env.other.apiKey)).statusCode).toBe(200);
  });

  it('shares one counter between routes naming the same bucket, and keeps per-route buckets apart', async () => {
    const limiter = env.ctx.rateLimiter;
    const scope = 'scope-' + Date.now();
    const a = await limiter.hit(RATE_LIMITS.catalogSync, scope, 'PUT /catalogs/:name/items/:id');
    const b = await limiter.hit(RATE_LIMITS.catalogSync, scope, 'GET /catalogs/:name/items/:id');
    expect(b.remaining).toBe(a.remaining - 1);
    const c = await limiter.hit(RATE_LIMITS.default, scope, 'GET /canvas/list');
    const d = await limiter.hit(RATE_LIMITS.default, scope, 'GET /feed/list');
    expect(d.remaining).toBe(c.remaining);
  });

  it('is shared by every API process (the counter lives in Redis)', async () => {
    const second = await createTestEnv({ REDIS_PREFIX: env.config.REDIS_PREFIX, RATE_LIMIT_DEFAULT_PER_HOUR: '3' });
    try {
      const w = await seedWorkspace(second.ctx.pool);
      const scope = w.workspaceId;
      await env.ctx.rateLimiter.hit(RATE_LIMITS.default, scope, 'GET /segments/list');
      const r = await second.ctx.rateLimiter.hit(RATE_LIMITS.default, scope, 'GET /segments/list');
      expect(r.remaining).toBe(1);
    } finally {
      await second.ctx.pool.query(`DROP SCHEMA IF EXISTS "${second.config.DATABASE_SCHEMA}" CASCADE`);
      await second.app.close();
      await second.ctx.pool.end();
      second.ctx.redis.disconnect();
    }
  });
});

describe('errors', () => {
  it('answers an unknown route with a JSON 404', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/nope' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toEqual({ message: 'No route GET /nope' });
  });

  it('refuses malformed JSON, a wrong content type and an oversized body with clear 4xx JSON, changing nothing', async () => {
    const w = await seedWorkspace(env.ctx.pool);
    const post = (payload: string, contentType = 'application/json') =>
      env.app.inject({
        method: 'POST',
        url: '/users/export/segment',
        headers: { ...bearer(w.apiKey), 'content-type': contentType },
        payload,
      });

    const malformed = await post('{"segment_id": ');
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().message).toMatch(/^Malformed JSON body/);

    const wrongType = await post('segment_id=x', 'application/x-www-form-urlencoded');
    expect(wrongType.statusCode).toBe(415);
    expect(wrongType.json().message).toMatch(/Content-Type/);

    const oversized = await post(JSON.stringify({ segment_id: 'x'.repeat(4096), fields_to_export: ['email'] }));
    expect(oversized.statusCode).toBe(413);
    expect(oversized.json().message).toMatch(/too large/);

    const { rows } = await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports');
    expect(rows[0].n).toBe(0);
  });

  it('hides the cause of a server fault: no stack, no SQL', async () => {
    const w = await seedWorkspace(env.ctx.pool);
    await env.ctx.pool.query('ALTER TABLE segments RENAME COLUMN tags TO tags_gone');
    try {
      const res = await list(w.apiKey);
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ message: 'Internal server error' });
      expect(res.body).not.toMatch(/tags|SELECT|column|at /);
    } finally {
      await env.ctx.pool.query('ALTER TABLE segments RENAME COLUMN tags_gone TO tags');
    }
  });

  it('echoes the request id, or makes one', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'req-123' } });
    expect(res.headers['x-request-id']).toBe('req-123');
    const made = await env.app.inject({ method: 'GET', url: '/healthz' });
    expect(made.headers['x-request-id']).toMatch(/^[0-9a-f-]{36}$/);
  });

  it('accepts an empty body with Content-Type application/json on GET, and a trailing ?', async () => {
    const w = await seedWorkspace(env.ctx.pool);
    const res = await env.app.inject({
      method: 'GET',
      url: '/segments/list?',
      headers: { ...bearer(w.apiKey), 'content-type': 'application/json' },
    });
    expect(res.statusCode).toBe(200);
  });
});

describe('operations', () => {
  it('reports health and readiness', async () => {
    expect((await env.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    expect((await env.app.inject({ method: 'GET', url: '/readyz' })).json()).toEqual({ status: 'ready' });
  });

  it('serves Prometheus metrics with request latency by route and status', async () => {
    await env.app.inject({ method: 'GET', url: '/healthz' });
    const res = await env.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toMatch(
      /ces_http_request_duration_seconds_count\{method="GET",route="\/healthz",status="200"\} \d+/,
    );
    expect(res.body).toContain('ces_process_resident_memory_bytes');
  });

  it('serves an OpenAPI 3.1 document generated from the route schemas', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(doc.openapi).toBe('3.1.0');
    const params = doc.paths['/segments/list'].get.parameters.map((p: { name: string }) => p.name);
    expect(params).toEqual(expect.arrayContaining(['page', 'sort_direction']));
    expect(doc.paths['/healthz']).toBeUndefined();
    // Every operation needs the API key but the signed download link, which carries its own credential.
    expect(doc.security).toEqual([{ apiKey: [] }]);
    expect(doc.paths['/downloads/segment-export/{file}'].get.security).toEqual([]);
    expect(doc.paths['/segments/list'].get.security).toBeUndefined();
  });

  it('declares the error answers of every operation, with the body its family writes', async () => {
    const doc = (await env.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    const operations = Object.entries(
      doc.paths as Record<
        string,
        Record<
          string,
          { responses: Record<string, { content?: Record<string, { schema: unknown }> }>; security?: unknown[] }
        >
      >,
    ).flatMap(([p, ops]) =>
      Object.entries(ops).map(([m, op]) => ({
        key: `${m} ${p}`,
        responses: op.responses,
        // The signed links (downloads, preference center pages) take no credentials: no 401, no 500 body of ours.
        public: Array.isArray(op.security) && op.security.length === 0,
      })),
    );
    expect(operations.length).toBeGreaterThan(40);
    expect(operations.filter((o) => o.public).map((o) => o.key)).toEqual([
      'get /downloads/segment-export/{file}',
      'get /pages/preference_center/{token}',
      'post /pages/preference_center/{token}',
    ]);
    for (const op of operations.filter((o) => !o.public)) {
      for (const status of ['400', '401', '500', '503'])
        expect(op.responses[status], `${op.key} ${status}`).toBeDefined();
    }
    const body = (key: string, status: string) =>
      JSON.stringify(operations.find((o) => o.key === key)!.responses[status]!.content);
    expect(body('put /catalogs/{catalog_name}/items', '400')).toContain('parameter_values');
    expect(body('put /catalogs/{catalog_name}/items', '409')).toContain('parameter_values');
    expect(body('get /scim/v2/Users/{id}', '404')).toContain('application/scim+json');
    expect(body('post /scim/v2/Users', '409')).toContain('scimType');
    expect(body('post /users/track', '413')).toContain('"message"');
    expect(body('post /messages/live_activity/update', '400')).toContain('"error"');
    expect(operations.find((o) => o.key === 'get /downloads/segment-export/{file}')!.responses['410']).toBeDefined();
    expect(operations.find((o) => o.key === 'delete /scim/v2/Users/{id}')!.responses['204']).toBeDefined();
  });

  it('puts the queue dashboard behind the admin credential', async () => {
    expect((await env.app.inject({ method: 'GET', url: '/admin/queues' })).statusCode).toBe(401);
    const wrong = Buffer.from('ops:wrong-password').toString('base64');
    expect(
      (await env.app.inject({ method: 'GET', url: '/admin/queues', headers: { authorization: `Basic ${wrong}` } }))
        .statusCode,
    ).toBe(401);
    const right = Buffer.from('ops:correct-horse').toString('base64');
    const ok = await env.app.inject({
      method: 'GET',
      url: '/admin/queues',
      headers: { authorization: `Basic ${right}` },
    });
    expect(ok.statusCode).toBe(200);
    expect(ok.headers['content-type']).toMatch(/text\/html/);
  });

  it('says the queue dashboard is disabled, and how to enable it, when no admin credential is set', async () => {
    const bare = await createTestEnv();
    try {
      for (const url of ['/admin/queues', '/admin/queues/', '/admin/queues/api/queues']) {
        const res = await bare.app.inject({ method: 'GET', url });
        expect(res.statusCode, url).toBe(404);
        expect(res.json().message, url).toMatch(/queue dashboard is disabled: set ADMIN_USER and ADMIN_PASSWORD/);
      }
    } finally {
      await bare.close();
    }
  });
});
