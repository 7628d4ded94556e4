import { randomUUID } from 'node:crypto';
import fastifySwagger, { type SwaggerTransformObject } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import Fastify, { type FastifyBaseLogger, type FastifyInstance } from 'fastify';
import {
  jsonSchemaTransform,
  serializerCompiler,
  validatorCompiler,
  type ZodTypeProvider,
} from 'fastify-type-provider-zod';
import type { AppContext } from './context.js';
import { registerAuth } from './http/auth-hook.js';
import { registerErrorHandler } from './http/error-handler.js';
import { errorResponses, openApiPath } from './http/error-responses.js';
import { registerIdempotency } from './http/idempotency.js';
import { registerHostileInput } from './http/hostile-input.js';
import { registerJsonBody } from './http/json-body.js';
import './http/route-config.js';
import { registerOperations } from './http/operations.js';
import { routes } from './routes/index.js';
import type { RouteEntry } from './http/route-config.js';

/**
 * Builds the HTTP facade over a process context. It never listens: `src/runtime.ts` (and tests, with inject) do.
 */
export interface BuildAppOptions {
  /** Called with the route (as registered) and status of every answer: the test suite's record of what it saw. */
  observeResponse?: (method: string, url: string, status: number) => void;
}

export async function buildApp(ctx: AppContext, options: BuildAppOptions = {}): Promise<FastifyInstance> {
  const app = Fastify({
    loggerInstance: ctx.log as FastifyBaseLogger,
    bodyLimit: ctx.config.BODY_LIMIT_BYTES,
    requestIdHeader: 'x-request-id',
    genReqId: () => randomUUID(),
    // Path parameters may be long (catalog item ids reach 250 characters, and a longer one must get its own error
    // rather than "no route"): the router's default cap is 100.
    routerOptions: { ignoreTrailingSlash: true, ignoreDuplicateSlashes: true, maxParamLength: 2048 },
  }).withTypeProvider<ZodTypeProvider>();

  app.decorate('ctx', ctx);
  const routeCatalog: RouteEntry[] = [];
  app.decorate('routeCatalog', routeCatalog);
  // The error answers of each operation, added to the OpenAPI document below (http/error-responses.ts).
  const routeErrors = new Map<string, Record<string, unknown>>();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = (route.schema ?? {}) as { body?: unknown; querystring?: unknown; params?: unknown };
    for (const method of methods) {
      routeCatalog.push({ method, url: route.url, config: route.config ?? {} });
      const shape = {
        method,
        config: route.config ?? {},
        hasBody: schema.body !== undefined,
        hasInput: schema.body !== undefined || schema.querystring !== undefined || schema.params !== undefined,
        hasParams: route.url.includes(':'),
      };
      routeErrors.set(`${method.toLowerCase()} ${openApiPath(route.url)}`, errorResponses(shape));
    }
  });
  app.setValidatorCompiler(validatorCompiler);
  app.setSerializerCompiler(serializerCompiler);

  registerJsonBody(app);

  app.addHook('onSend', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
  });
  const observe = options.observeResponse;
  if (observe) {
    app.addHook('onResponse', async (req, reply) => {
      if (req.routeOptions.url) observe(req.method, req.routeOptions.url, reply.statusCode);
    });
  }

  registerErrorHandler(app);
  registerAuth(app);
  registerIdempotency(app);
  registerHostileInput(app);

  await app.register(fastifySwagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'Customer Engagement Service',
        version: '0.1.0',
        description: 'Self-hostable customer-engagement data service. See the README for compatibility notes.',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'http', scheme: 'bearer', description: 'API key with the permission each endpoint names' },
          scimToken: { type: 'http', scheme: 'bearer', description: 'SCIM token, with the X-Request-Origin header' },
        },
      },
      security: [{ apiKey: [] }],
    },
    transform: jsonSchemaTransform,
    transformObject: (documentObject) => {
      const { openapiObject } = documentObject as { openapiObject: { paths?: Record<string, unknown> } };
      for (const [pathName, operations] of Object.entries(openapiObject.paths ?? {})) {
        for (const [method, operation] of Object.entries(
          operations as Record<string, { responses?: Record<string, unknown> }>,
        )) {
          const errors = routeErrors.get(`${method} ${pathName}`);
          // Statuses a route's own schema declares (a documented 404 body, say) are kept as they are.
          if (errors) operation.responses = { ...errors, ...(operation.responses ?? {}) };
        }
      }
      return openapiObject as ReturnType<SwaggerTransformObject>;
    },
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs', staticCSP: true });

  await registerOperations(app);
  for (const plugin of routes) await app.register(plugin);

  return app;
}
