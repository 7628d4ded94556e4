/**
 * The one error type. Domain modules throw AppError with a code; `renderError` (used by the one Fastify error
 * handler) maps the code to a status and the body format of the route family: the spec documents its own
 * bodies for SCIM, catalogs, live activities, and `{message}` everywhere else.
 */
export type ErrorCode =
  | 'bad_request'
  | 'unauthorized'
  | 'forbidden'
  | 'not_found'
  | 'conflict'
  | 'gone'
  | 'payload_too_large'
  | 'unsupported_media_type'
  | 'unprocessable'
  | 'rate_limited'
  | 'internal'
  | 'unavailable';

/** One entry of the catalog endpoints' `errors` array. */
export interface CatalogErrorEntry {
  id: string;
  message: string;
  parameters: string[];
  parameter_values: unknown[];
}

export interface AppErrorOptions {
  /** RFC 7644 scimType, for SCIM bodies. */
  scimType?: string;
  /** Catalog error entries; when present the catalog body lists them. */
  catalogErrors?: CatalogErrorEntry[];
  /** Seconds after which the client may retry (Retry-After): when rate-limited, or on a 503 (default 5 s there). */
  retryAfter?: number;
  cause?: unknown;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly options: AppErrorOptions;
  constructor(code: ErrorCode, message: string, options: AppErrorOptions = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'AppError';
    this.code = code;
    this.options = options;
  }
}

export const badRequest = (message: string, options?: AppErrorOptions) => new AppError('bad_request', message, options);
export const notFound = (message: string, options?: AppErrorOptions) => new AppError('not_found', message, options);
export const conflict = (message: string, options?: AppErrorOptions) => new AppError('conflict', message, options);

export function statusOf(code: ErrorCode): number {
  switch (code) {
    case 'bad_request':
      return 400;
    case 'unauthorized':
      return 401;
    case 'forbidden':
      return 403;
    case 'not_found':
      return 404;
    case 'conflict':
      return 409;
    case 'gone':
      return 410;
    case 'payload_too_large':
      return 413;
    case 'unsupported_media_type':
      return 415;
    case 'unprocessable':
      return 422;
    case 'rate_limited':
      return 429;
    case 'internal':
      return 500;
    case 'unavailable':
      return 503;
  }
}

/** How a route family writes its error bodies. */
export type ErrorFormat = 'message' | 'scim' | 'catalog' | 'error';

export interface RenderedError {
  status: number;
  contentType: string;
  body: Record<string, unknown>;
}

export function renderError(err: AppError, format: ErrorFormat): RenderedError {
  const status = statusOf(err.code);
  const json = 'application/json; charset=utf-8';
  switch (format) {
    case 'scim': {
      const body: Record<string, unknown> = {
        schemas: ['urn:ietf:params:scim:api:messages:2.0:Error'],
        detail: err.message,
        status,
      };
      if (err.options.scimType) body.scimType = err.options.scimType;
      // The spec records SCIM's 404 as served with content type text/html, but every client parses it as JSON.
      // We serve the documented body as application/scim+json; see README "Compatibility notes".
      return { status, contentType: 'application/scim+json; charset=utf-8', body };
    }
    case 'catalog': {
      if (err.options.catalogErrors && err.options.catalogErrors.length > 0) {
        return { status, contentType: json, body: { errors: err.options.catalogErrors, message: 'Invalid Request' } };
      }
      if (status < 500 && err.code !== 'unauthorized' && err.code !== 'rate_limited') {
        // A generic refusal on a catalog route still uses the catalog body so clients parse one shape.
        return {
          status,
          contentType: json,
          body: {
            errors: [{ id: 'invalid-request', message: err.message, parameters: [], parameter_values: [] }],
            message: 'Invalid Request',
          },
        };
      }
      return { status, contentType: json, body: { message: err.message } };
    }
    case 'error':
      if (err.code === 'unauthorized' || err.code === 'rate_limited')
        return { status, contentType: json, body: { message: err.message } };
      return { status, contentType: json, body: { error: err.message } };
    case 'message':
      return { status, contentType: json, body: { message: err.message } };
  }
}
