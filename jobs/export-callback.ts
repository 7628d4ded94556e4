import { UnrecoverableError } from 'bullmq';
import { CallbackRefusedError, postCallback } from '../src/exports/callback.js';
import { ExportCallbackPayload, EXPORT_CALLBACK_QUEUE } from '../src/exports/payloads.js';
import { callbackPolicy } from '../src/exports/request.js';
import { defineJob } from '../src/worker.js';

/** POSTs the export-ready (or failed) callback; retried with exponential backoff, never to a refused address. */
export const exportCallbackJob = defineJob({
  queue: EXPORT_CALLBACK_QUEUE,
  async process(job, ctx) {
    const { exportId, endpoint, body } = ExportCallbackPayload.parse(job.data);
    try {
      const status = await postCallback(endpoint, body, callbackPolicy(ctx.config));
      ctx.log.info({ exportId, status }, 'export callback delivered');
    } catch (err) {
      if (err instanceof CallbackRefusedError) {
        ctx.log.warn({ exportId, reason: err.message }, 'export callback refused');
        throw new UnrecoverableError(err.message);
      }
      throw err;
    }
  },
});
