import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { hasZodFastifySchemaValidationErrors } from 'fastify-type-provider-zod';
import { AppError, renderError, type ErrorCode } from '../errors.js';
import { unsupportedMediaType } from './json-body.js';
import {
  DEPENDENCY_NAMES,
  OUTAGE_RETRY_AFTER_SECONDS,
  type Dependency,
  type DependencyHealth,
} from '../lib/dependency-health.js';

interface ValidationIssue {
  instancePath?: string;
  message?: string;
}

/** "body.fields_to_export: expected array, received undefined; body.output_format: ..." */
export function describeValidation(context: string | undefined, issues: ValidationIssue[]): string {
  const where = context === 'querystring' ? 'query' : (context ?? 'request');
  const parts = issues.slice(0, 10).map((i) => {
    const path = (i.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
    return `${path ? `${where}.${path}` : where}: ${i.message ?? 'invalid'}`;
  });
  if (issues.length > 10) parts.push(`and ${issues.length - 10} more`);
  return `Invalid ${where}: ${parts.join('; ')}`;
}

/** The answer to a request that needs a dependency that is away: 503, Retry-After, the dependency named. */
export function dependencyUnavailable(dependency: Dependency, cause?: unknown): AppError {
  return new AppError('unavailable', `${DEPENDENCY_NAMES[dependency]} is unavailable; retry shortly`, {
    retryAfter: OUTAGE_RETRY_AFTER_SECONDS,
    cause,
  });
}

/**
 * Translates what Fastify, its parsers and zod throw into our one error type. With `health`, a failure to reach
 * PostgreSQL or Redis (a lost or refused connection, a pool timeout, an ioredis command given up, a BullMQ add that
 * failed for one of those, bare or as the cause of a 500/503 AppError) becomes a 503 naming the dependency.
 */
export function toAppError(err: unknown, health?: DependencyHealth): AppError {
  const serverFault = !(err instanceof AppError) || err.code === 'internal' || err.code === 'unavailable';
  const dependency = serverFault ? health?.classify(err) : undefined;
  if (dependency) return dependencyUnavailable(dependency, err instanceof AppError ? (err.options.cause ?? err) : err);
  if (err instanceof AppError) return err;
  const fe = err as FastifyError & { validationContext?: string };
  if (hasZodFastifySchemaValidationErrors(fe)) {
    return new AppError('bad_request', describeValidation(fe.validationContext, fe.validation as ValidationIssue[]));
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new AppError('payload_too_large', 'Request body is too large');
    case 'FST_ERR_CTP_INVALID_CONTENT_LENGTH':
      return new AppError('bad_request', 'Request body length does not match Content-Length');
  }
  if (err instanceof SyntaxError || fe.code === 'FST_ERR_CTP_INVALID_JSON_BODY') {
    // scimType is read only by SCIM bodies (RFC 7644 invalidSyntax); other formats ignore it.
    return new AppError('bad_request', `Malformed JSON body: ${fe.message}`, { scimType: 'invalidSyntax' });
  }
  if (typeof fe.statusCode === 'number' && fe.statusCode >= 400 && fe.statusCode < 500) {
    const code: ErrorCode =
      fe.statusCode === 404
        ? 'not_found'
        : fe.statusCode === 413
          ? 'payload_too_large'
          : fe.statusCode === 415
            ? 'unsupported_media_type'
            : 'bad_request';
    return new AppError(code, fe.message);
  }
  return new AppError('internal', 'Internal server error', { cause: err });
}

/**
 * A refusal's message as a log line may carry it: what it quotes of the request (an id, a key, a filter value, in
 * JSON's double quotes, as every message that repeats input quotes it) replaced, since that is the client's data and
 * may be personal (an email address looked up, say). The client's own answer keeps the quote: it helps the client, and
 * it is theirs.
 */
export function reasonForLog(message: string): string {
  return message.replace(/"(?:[^"\\]|\\.)*"/g, '"…"');
}

/** The one error handler: logs server faults with their cause, never sends a stack or SQL to the client. */
export function registerErrorHandler(app: FastifyInstance): void {
  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const { health } = app.ctx;
    const appErr =
      (err as FastifyError).code === 'FST_ERR_CTP_INVALID_MEDIA_TYPE'
        ? unsupportedMediaType(req)
        : toAppError(err, health);
    const dependency = appErr.code === 'unavailable' ? health.report(appErr.options.cause ?? err) : undefined;
    if (dependency) {
      // The outage is logged once by `health`, not once per request.
      req.log.debug({ dependency }, 'request failed: dependency unavailable');
    } else if (appErr.code === 'internal' || appErr.code === 'unavailable') {
      req.log.error({ err: appErr.options.cause ?? err }, 'request failed');
    } else {
      req.log.info({ code: appErr.code, reason: reasonForLog(appErr.message) }, 'request refused');
    }
    const format = req.routeOptions?.config?.errorFormat ?? 'message';
    const rendered = renderError(appErr, format);
    const retryAfter =
      appErr.options.retryAfter ?? (appErr.code === 'unavailable' ? OUTAGE_RETRY_AFTER_SECONDS : undefined);
    if (retryAfter) reply.header('Retry-After', retryAfter);
    reply.code(rendered.status).type(rendered.contentType).send(rendered.body);
  });

  // Under the SCIM base every answer is a SCIM message (RFC 7644 3.12), unknown endpoints and methods included; the
  // pattern forgives letter case and the repeated slashes the router forgives.
  app.setNotFoundHandler((req, reply) => {
    const path = req.url.split('?')[0] ?? '';
    const format = /^\/+scim\/+v2(\/|$)/i.test(path) ? 'scim' : 'message';
    const rendered = renderError(new AppError('not_found', `No route ${req.method} ${path}`), format);
    reply.code(rendered.status).type(rendered.contentType).send(rendered.body);
  });
}
