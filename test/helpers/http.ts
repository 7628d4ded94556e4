import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { bearer } from './seed.js';

export type Method = 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH';

export interface CallOptions {
  /** The API key or SCIM token sent as `Authorization: Bearer`; null sends none. */
  key: string | null;
  /** A JSON body, encoded here. */
  body?: unknown;
  /** A body sent as it is (malformed JSON, a string of any shape). */
  raw?: string;
  headers?: Record<string, string>;
}

export interface Answer {
  status: number;
  /** The answer parsed as JSON, as clients parse every body (error bodies included); tests read every shape of it. */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  body: any;
  headers: LightMyRequestResponse['headers'];
}

/**
 * One request to the app as clients send them: `Content-Type: application/json` on every request (GET included), the
 * key as a bearer token, the body as JSON. The tests' short helpers (`post`, `get`, `call`...) are bindings of this.
 */
export async function callApi(
  app: FastifyInstance,
  method: Method,
  url: string,
  options: CallOptions,
): Promise<Answer> {
  const payload = options.raw ?? (options.body === undefined ? undefined : JSON.stringify(options.body));
  const res = await app.inject({
    method,
    url,
    headers: {
      ...(options.key === null ? {} : bearer(options.key)),
      'content-type': 'application/json',
      ...options.headers,
    },
    ...(payload === undefined ? {} : { payload }),
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

/** A body for `callApi` from a test's argument that may be a ready-made string (sent as is) or a value (JSON). */
export const bodyOrRaw = (value: unknown): Pick<CallOptions, 'body' | 'raw'> =>
  typeof value === 'string' ? { raw: value } : { body: value };

/** An answer without its headers, for tests that compare the whole answer. */
export const statusAndBody = ({ status, body }: Answer): Pick<Answer, 'status' | 'body'> => ({ status, body });
