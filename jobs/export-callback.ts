import { UnrecoverableError } from 'bullmq';
import { CallbackRefusedError, postCallback } from '../src/exports/finish/callback.js';
import { ExportCallbackPayload, EXPORT_CALLBACK_QUEUE } from '../src/queues/export-callback.js';
import { callbackPolicy } from '../src/exports/request/request-body.js';
import { defineJob } from '../src/queue-processors.js';

/** POSTs the export-ready (or failed) callback; retried with exponential backoff, never to a refused address. */
export const exportCallbackJob = defineJob({
  queue: EXPORT_CALLBACK_QUEUE,
  async process(job, ctx) {
    const { exportId, endpoint, body } = ExportCallbackPayload.parse(job.data);
    // Recorded in the export's row, so that the reconciler queues again only a callback neither delivered nor given up.
    const settle = (state: 'delivered' | 'abandoned') =>
      ctx.pool.query('UPDATE exports SET callback_state = $2 WHERE id = $1', [exportId, state]);
    try {
      const status = await postCallback(endpoint, body, callbackPolicy(ctx.config));
      await settle('delivered');
      ctx.log.info({ exportId, status }, 'export callback delivered');
    } catch (err) {
      if (err instanceof CallbackRefusedError) {
        ctx.log.warn({ exportId, reason: err.message }, 'export callback refused');
        await settle('abandoned');
        throw new UnrecoverableError(err.message);
      }
      if (job.attemptsMade + 1 >= (job.opts.attempts ?? 1)) await settle('abandoned');
      throw err;
    }
  },
});
