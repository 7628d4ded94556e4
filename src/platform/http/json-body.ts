import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { describeKeyProblem, jsonKeyProblem, parsedKeys, scanJsonText, TOO_DEEP } from '../lib/json-keys.js';
import { MAX_BODY_DEPTH, MAX_VALUE_NESTING } from '../lib/storable.js';

/** The media types a JSON route takes; anything else is 415 (`unsupportedMediaType`). */
const JSON_TYPES = ['application/json', 'application/scim+json'];

/** The charset parameter of a Content-Type, lower-cased and unquoted, or null when it has none. */
function charsetOf(contentType: string | undefined): string | null {
  const match = /;\s*charset\s*=\s*("?)([^";\s]*)\1/i.exec(contentType ?? '');
  return match ? match[2]!.toLowerCase() : null;
}

/** The 415 for a body of a media type no route takes, naming what came and what is wanted. */
export function unsupportedMediaType(req: FastifyRequest): AppError {
  const got = req.headers['content-type'];
  const wanted =
    req.routeOptions.config?.errorFormat === 'scim' ? 'application/scim+json or application/json' : 'application/json';
  const named =
    typeof got === 'string' && got.trim() !== ''
      ? `Content-Type ${JSON.stringify(got.trim().slice(0, 100))}`
      : 'a body without a valid Content-Type';
  return new AppError(
    'unsupported_media_type',
    `Unsupported media type: this endpoint takes ${wanted}, and the request sent ${named}`,
  );
}

/** The refusal of a body nested too deep, in the route's format. */
function tooDeep(req: FastifyRequest): AppError {
  const message = `Invalid body: arrays and objects may be nested at most ${MAX_BODY_DEPTH} levels deep`;
  if (req.routeOptions.config?.errorFormat === 'catalog') {
    // The catalog routes' own refusal of deep values, which the spec documents (their limit is lower:
    // MAX_VALUE_NESTING).
    const catalogErrors = [
      {
        id: 'too-deep-nesting-in-value-object',
        message: `Item values cannot be nested more than ${MAX_VALUE_NESTING} levels deep`,
        parameters: [],
        parameter_values: [],
      },
    ];
    return new AppError('bad_request', message, { catalogErrors });
  }
  return new AppError('bad_request', message, { scimType: 'invalidSyntax' });
}

/**
 * The one parser of request bodies: JSON (and SCIM's JSON) as UTF-8. Fastify's text/plain parser is removed, so a
 * text body is 415 like every other media type rather than a string the route's schema refuses for its shape.
 *
 * Before parsing, a scan of the text (src/platform/lib/json-keys.ts) refuses nesting beyond MAX_BODY_DEPTH; after it, a
 * key given twice in one object (JSON.parse would keep the last silently) and the prototype keys `__proto__` and
 * `constructor.prototype` are refused, each with a 400 naming the key and its path.
 */
export function registerJsonBody(app: FastifyInstance): void {
  app.removeContentTypeParser(['application/json', 'text/plain']);
  app.addContentTypeParser(JSON_TYPES, { parseAs: 'string' }, (req, body, done) => {
    // The body is decoded as UTF-8 whatever the header says: a body sent in another charset would be read wrong.
    const charset = charsetOf(req.headers['content-type']);
    if (charset !== null && charset !== 'utf-8' && charset !== 'utf8') {
      return done(
        new AppError(
          'unsupported_media_type',
          'Unsupported charset: send JSON encoded as UTF-8 (charset=utf-8, or no charset)',
        ),
        undefined,
      );
    }
    const text = typeof body === 'string' ? body : body.toString('utf8');
    // Clients send Content-Type: application/json on every request, GET and DELETE included, with no body: an empty
    // body is "no body", not malformed JSON.
    if (text.trim() === '') return done(null, undefined);
    const keys = scanJsonText(text, MAX_BODY_DEPTH);
    if (keys === TOO_DEEP) return done(tooDeep(req), undefined);
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return done(
        new AppError('bad_request', 'Malformed JSON body: Body is not valid JSON', { scimType: 'invalidSyntax' }),
        undefined,
      );
    }
    const parsed = parsedKeys(value);
    if (parsed.prototype || parsed.keys !== keys) {
      // JSON.parse dropped a key, or made a prototype key: the slower scan says which and where.
      const problem = jsonKeyProblem(text, MAX_BODY_DEPTH);
      if (problem && problem.kind !== 'too-deep')
        return done(
          new AppError('bad_request', `Invalid body: ${describeKeyProblem(problem)}`, { scimType: 'invalidSyntax' }),
          undefined,
        );
    }
    return done(null, value);
  });
}
