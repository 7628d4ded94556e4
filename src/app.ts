import { randomUUID } from 'node:crypto';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import { serializerCompiler, validatorCompiler, type ZodTypeProvider } from 'fastify-type-provider-zod';
import type { AppContext } from './platform/context.js';
import { registerAuth } from './platform/http/auth-hook.js';
import { registerBodyKeys } from './platform/http/body-keys.js';
import { registerErrorHandler } from './platform/http/error-handler.js';
import { registerIdempotency } from './platform/http/idempotency.js';
import { registerHostileInput } from './platform/http/hostile-input.js';
import { registerJsonBody } from './platform/http/json-body.js';
import { registerOpenApi } from './platform/http/openapi.js';
import { registerResponseHooks, type ResponseObserver } from './platform/http/response-hooks.js';
import { registerRouteCatalog } from './platform/http/route-catalog.js';
import './platform/http/route-config.js';
import { registerOperations } from './platform/http/operations.js';
import { readFailingExports } from './pipelines/events/export-failures.js';
import { routes } from './routes/index.js';

/**
 * Builds the HTTP facade over a process context. It never listens: `src/runtime/run.ts` (and tests, with inject) do.
 */
export interface BuildAppOptions {
  /** Called with the route (as registered) and status of every answer: the test suite's record of what it saw. */
  observeResponse?: ResponseObserver;
}

/** The Fastify server itself: logger, body limit, request ids and router options. */
function createServer(ctx: AppContext) {
  return Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    bodyLimit: ctx.config.BODY_LIMIT_BYTES,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    // Path parameters may be long (catalog item ids reach 250 characters, and a longer one must get its own error
    // rather than "no route"): the router's default cap is 100.
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, maxParamLength: 2048 },
  }).withTypeProvider<ZodTypeProvider>();
}

/**
 * The server, then (in this order, which is the order their hooks run in) the route catalog, the schema compilers and
 * body parser, the response hooks, error handling, auth, idempotency, the body's top-level keys, hostile-input checks,
 * the OpenAPI document, and last the routes. Each `register*` adds its hooks to the root instance, so they apply to
 * every route.
 */
export async function buildApp(ctx: AppContext, options: BuildAppOptions = {}): Promise<FastifyInstance> {
  const app = createServer(ctx);
  app.decorate('ctx', ctx);
  registerRouteCatalog(app);
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);
  registerJsonBody(app);
  registerResponseHooks(app, options.observeResponse);
  registerErrorHandler(app);
  registerAuth(app);
  registerIdempotency(app);
  registerBodyKeys(app);
  registerHostileInput(app);
  await registerOpenApi(app);
  await registerOperations(app);
  ctx.metrics.onRender('event-export-failing', () => readFailingExports(ctx.pool, ctx.metrics));
  for (const plugin of routes) await app.register(plugin);
  return app;
}
