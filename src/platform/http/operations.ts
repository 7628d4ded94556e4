import { timingSafeEqual } from 'node:crypto';
import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance, FastifyReply } from 'fastify';
import { z } from 'zod';
import { QUEUE_NAMES } from '../queues/index.js';

const probe = { auth: 'none' as const };

/** Liveness, readiness, metrics, the OpenAPI document and the queue dashboard. */
export async function registerOperations(app: FastifyInstance): Promise<void> {
  const { ctx } = app;

  app.addHook('onResponse', async (req, reply) => {
    const route = req.routeOptions.url ?? 'unmatched';
    ctx.metrics.httpDuration.observe(
      { method: req.method, route, status: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });

  app.get('/healthz', { config: probe, schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get(
    '/readyz',
    {
      config: probe,
      schema: {
        hide: true,
        response: {
          200: z.object({ status: z.literal('ready') }),
          503: z.object({ status: z.literal('unavailable'), failing: z.array(z.string()) }),
        },
      },
    },
    async (_req, reply) => {
      const failing: string[] = [];
      await Promise.all([
        // Bounded like the Redis ping: a probe must answer even while the pool waits DATABASE_CONNECT_TIMEOUT_MS.
        withTimeout(ctx.pool.query('SELECT 1'), 2000).catch(() => failing.push('postgresql')),
        withTimeout(ctx.redis.ping(), 2000).catch(() => failing.push('redis')),
      ]);
      if (failing.length > 0) return reply.code(503).send({ status: 'unavailable' as const, failing });
      return { status: 'ready' as const };
    },
  );

  if (ctx.config.METRICS_ENABLED) {
    app.get('/metrics', { config: probe, schema: { hide: true } }, async (_req, reply) => {
      await refreshQueueDepth(app);
      reply.type(ctx.metrics.registry.contentType);
      return ctx.metrics.render();
    });
  }

  app.get('/openapi.json', { config: probe, schema: { hide: true } }, async () => app.swagger());

  if (ctx.config.ADMIN_USER && ctx.config.ADMIN_PASSWORD) {
    const expected = Buffer.from(`${ctx.config.ADMIN_USER}:${ctx.config.ADMIN_PASSWORD}`);
    const board = new FastifyAdapter();
    createBullBoard({ queues: ctx.queues.all().map((q) => new BullMQAdapter(q)), serverAdapter: board });
    board.setBasePath('/admin/queues');
    await app.register(async (scope) => {
      scope.addHook('onRequest', async (req, reply) => {
        const header = req.headers.authorization ?? '';
        const given = header.startsWith('Basic ') ? Buffer.from(header.slice(6), 'base64') : Buffer.alloc(0);
        if (given.length !== expected.length || !timingSafeEqual(given, expected)) {
          reply.header('WWW-Authenticate', 'Basic realm="ces queues"');
          return reply.code(401).send({ message: 'Admin credentials required' });
        }
      });
      await scope.register(board.registerPlugin(), { prefix: '/admin/queues' });
    });
  } else {
    // A bare 404 would look like a wrong address: say that the dashboard exists and how to turn it on.
    const disabled = async (_req: unknown, reply: FastifyReply) =>
      reply.code(404).send({
        message:
          'The queue dashboard is disabled: set ADMIN_USER and ADMIN_PASSWORD (at least 8 characters) to enable it at /admin/queues',
      });
    app.get('/admin/queues', { config: probe, schema: { hide: true } }, disabled);
    app.get('/admin/queues/*', { config: probe, schema: { hide: true } }, disabled);
  }
}

async function refreshQueueDepth(app: FastifyInstance): Promise<void> {
  const { ctx } = app;
  await Promise.all(
    QUEUE_NAMES.map(async (name) => {
      const counts = await withTimeout(
        ctx.queues.get(name).getJobCounts('waiting', 'active', 'delayed', 'failed', 'prioritized', 'waiting-children'),
        2000,
      ).catch(() => null);
      if (!counts) return;
      for (const [state, n] of Object.entries(counts)) ctx.metrics.queueDepth.set({ queue: name, state }, n);
    }),
  );
}

function withTimeout<T>(promise: Promise<T>, ms: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timeout')), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
