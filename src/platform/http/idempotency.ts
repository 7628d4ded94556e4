import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { answerKey, claimKey, keyProblem, releaseKey, requestHash, type ClaimedKey } from '../idempotency/keys.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /** The route honours Idempotency-Key (it enqueues work) and answers the key with its work. */
    idempotent?: boolean;
  }
  interface FastifyRequest {
    idempotency?: ClaimedKey;
  }
}

const HEADER = 'idempotency-key';

/**
 * Idempotency-Key on the routes that enqueue work (src/platform/idempotency/keys.ts). After authentication and
 * validation, a key is claimed; a repeat gets the first answer (with `Idempotent-Replayed: true`), the same key with
 * another request 422, a repeat while the first still runs 409. A claim whose request did not succeed is let go, so a
 * retry runs; a route that did not answer its key in its own transaction has it answered here as a fallback.
 */
export function registerIdempotency(app: FastifyInstance): void {
  app.addHook('preHandler', async (req: FastifyRequest, reply: FastifyReply) => {
    if (!req.routeOptions.config?.idempotent) return;
    const header = req.headers[HEADER];
    if (header === undefined) return;
    const key = Array.isArray(header) ? header[0]! : header;
    const problem = keyProblem(key);
    if (problem) throw new AppError('bad_request', problem);
    const workspaceId = req.apiKey?.workspaceId;
    if (!workspaceId) return;
    const hash = requestHash(req.method, req.routeOptions.url ?? '', req.params, req.body);
    const result = await claimKey(app.ctx.pool, workspaceId, key, hash);
    switch (result.kind) {
      case 'mismatch':
        throw new AppError(
          'unprocessable',
          'This Idempotency-Key was used for another request (another body, route or path); use a new key for a new request',
        );
      case 'in-progress':
        throw new AppError('conflict', 'A request with this Idempotency-Key is still being handled; retry shortly', {
          retryAfter: 1,
        });
      case 'replay':
        reply.header('Idempotent-Replayed', 'true');
        return reply.code(result.status).send(result.body);
      case 'claimed': {
        const handle: ClaimedKey = {
          claim: result.claim,
          answered: false,
          async answer(db, status, body) {
            await answerKey(db, result.claim, status, body);
            handle.answered = true;
          },
        };
        req.idempotency = handle;
      }
    }
  });

  app.addHook('onSend', async (req: FastifyRequest, reply: FastifyReply, payload: unknown) => {
    const handle = req.idempotency;
    if (!handle) return payload;
    const succeeded = reply.statusCode >= 200 && reply.statusCode < 300;
    if (succeeded && !handle.answered && typeof payload === 'string') {
      await answerKey(app.ctx.pool, handle.claim, reply.statusCode, JSON.parse(payload)).catch((err: unknown) =>
        req.log.warn({ err }, 'could not record the answer of an idempotency key'),
      );
    } else if (!succeeded) {
      // Only an unanswered claim goes: an answer the work's transaction committed stays (releaseKey keeps answered
      // keys).
      await releaseKey(app.ctx.pool, handle.claim).catch((err: unknown) =>
        req.log.warn({ err }, 'could not release an idempotency key'),
      );
    }
    return payload;
  });
}
