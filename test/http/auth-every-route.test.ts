import { describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bearer, createKey, createScimToken } from '../helpers/seed.js';
import { PERMISSIONS } from '../../src/platform/auth/permissions.js';

const env = useTestEnv({ workspaces: ['ws'] });

const concrete = (url: string) => url.replace(/:([A-Za-z_]+)/g, 'x-$1').replace(/\*$/, 'x');

/** Every route the app registered, HEAD twins excluded; recomputed so new endpoint families are covered as they land. */
function protectedRoutes() {
  return env.app.routeCatalog.filter((r) => r.method !== 'HEAD' && (r.config.permission || r.config.auth === 'scim'));
}

describe('every route refuses callers without credentials or permission', () => {
  it('has routes to check', () => {
    expect(protectedRoutes().map((r) => r.url)).toContain('/segments/list');
  });

  it('API-key routes: 401 {message} without a key, with an unknown key, and with a key lacking the permission', async () => {
    const routes = protectedRoutes().filter((r) => r.config.auth !== 'scim');
    for (const route of routes) {
      const url = concrete(route.url);
      const method = route.method as 'GET';
      const payload = method === 'GET' ? undefined : '{}';
      const headers = { 'content-type': 'application/json' };

      const none = await env.app.inject({ method, url, headers, payload });
      expect(none.statusCode, `${method} ${url} without key`).toBe(401);
      expect(none.json().message, `${method} ${url}`).toMatch(/Missing API key/);

      const unknownKey = 'ces_key_thisKeyDoesNotExist0000000000000';
      const wrong = await env.app.inject({ method, url, headers: { ...headers, ...bearer(unknownKey) }, payload });
      expect(wrong.statusCode, `${method} ${url} unknown key`).toBe(401);
      expect(wrong.json().message).toMatch(/^Invalid API key: /);
      expect(wrong.body).not.toContain(unknownKey);

      const bare = await env.app.inject({ method, url, headers: { ...headers, ...bearer(env.ws.bareKey) }, payload });
      expect(bare.statusCode, `${method} ${url} without permission`).toBe(401);
      expect(bare.json().message).toContain(route.config.permission);
      expect(bare.headers['content-type']).toMatch(/^application\/json/);
    }
  });

  it('a key with every other permission is still refused', async () => {
    for (const route of protectedRoutes().filter((r) => r.config.auth !== 'scim')) {
      const others = PERMISSIONS.filter((p) => p !== route.config.permission);
      const key = await createKey(env.ctx.pool, env.ws.workspaceId, `all-but-${route.method}-${route.url}`, [
        ...others,
      ]);
      const res = await env.app.inject({
        method: route.method as 'GET',
        url: concrete(route.url),
        headers: bearer(key),
      });
      expect(res.statusCode, `${route.method} ${route.url}`).toBe(401);
    }
  });

  it('SCIM routes: refuse an API key, a missing token and a missing X-Request-Origin', async () => {
    const scimRoutes = protectedRoutes().filter((r) => r.config.auth === 'scim');
    const token = await createScimToken(env.ctx.pool, env.ws.companyId);
    for (const route of scimRoutes) {
      const url = concrete(route.url);
      const method = route.method as 'GET';
      const origin = { 'x-request-origin': 'https://idp.example.com' };
      const byKey = await env.app.inject({ method, url, headers: { ...bearer(env.ws.apiKey), ...origin } });
      expect(byKey.statusCode, `${method} ${url} with API key`).toBe(401);
      const none = await env.app.inject({ method, url, headers: origin });
      expect(none.statusCode, `${method} ${url} without token`).toBe(401);
      const noOrigin = await env.app.inject({ method, url, headers: bearer(token) });
      expect(noOrigin.statusCode, `${method} ${url} without origin`).toBe(401);
      expect(noOrigin.json().detail ?? noOrigin.json().message).toMatch(/X-Request-Origin/);
    }
  });
});

describe('a revoked key stops working', () => {
  it('refuses a revoked key once the principal cache is cleared', async () => {
    const key = await createKey(env.ctx.pool, env.ws.workspaceId, 'to-revoke', ['segments.list']);
    expect((await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) })).statusCode).toBe(200);
    await env.ctx.pool.query(`UPDATE api_keys SET revoked_at = now() WHERE name = 'to-revoke'`);
    env.ctx.principals.clear();
    expect((await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) })).statusCode).toBe(401);
  });
});
