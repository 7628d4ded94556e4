import type { FastifyInstance } from 'fastify';
import type { RouteEntry } from './route-config.js';

/** Every route registered, with its configuration, as `app.routeCatalog` (for tests and docs). */
export function registerRouteCatalog(app: FastifyInstance): void {
  const routeCatalog: RouteEntry[] = [];
  app.decorate('routeCatalog', routeCatalog);
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const method of methods) routeCatalog.push({ method, url: route.url, config: route.config ?? {} });
  });
}
