import fastifySwagger, { type FastifyDynamicSwaggerOptions, type SwaggerTransformObject } from '@fastify/swagger';
import fastifySwaggerUi from '@fastify/swagger-ui';
import type { FastifyInstance } from 'fastify';
import { jsonSchemaTransform } from 'fastify-type-provider-zod';
import { errorResponses, openApiPath } from './error-responses.js';

/** The document's header: what the service is and how it is authenticated. */
const OPENAPI_HEADER: FastifyDynamicSwaggerOptions['openapi'] = {
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
};

/** Error answers by `<method> <OpenAPI path>`. */
type RouteErrors = Map<string, Record<string, unknown>>;

/** Records the error answers of each route as it is registered (http/error-responses.ts). */
function collectRouteErrors(app: FastifyInstance): RouteErrors {
  const routeErrors: RouteErrors = new Map();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    const schema = (route.schema ?? {}) as { body?: unknown; querystring?: unknown; params?: unknown };
    for (const method of methods) {
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
  return routeErrors;
}

/** Adds each operation's error answers to the generated document. */
function addErrorResponses(routeErrors: RouteErrors): SwaggerTransformObject {
  return (documentObject) => {
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
  };
}

/**
 * The OpenAPI document (from the routes' zod schemas, with the error answers of each operation added) and its
 * reference page at /docs. Registered before any route, so that every route is in the document.
 */
export async function registerOpenApi(app: FastifyInstance): Promise<void> {
  const routeErrors = collectRouteErrors(app);
  await app.register(fastifySwagger, {
    openapi: OPENAPI_HEADER,
    transform: jsonSchemaTransform,
    transformObject: addErrorResponses(routeErrors),
  });
  await app.register(fastifySwaggerUi, { routePrefix: '/docs', staticCSP: true });
}
