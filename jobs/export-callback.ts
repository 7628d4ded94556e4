import { UnrecoverableError } from 'bullmq';
import { CallbackRefusedError, postCallback } from '../src/pipelines/exports/finish/callback.js';
import { ExportCallbackPayload, EXPORT_CALLBACK_QUEUE } from '../src/platform/queues/export-callback.js';
import { callbackPolicy } from '../src/pipelines/exports/request/request-body.js';
import { settleCallback } from '../src/pipelines/exports/export-rows.js';
import { defineJob } from '../src/platform/job-definition.js';

/** POSTs the export-ready (or failed) callback; retried with exponential backoff, never to a refused address. */
export const exportCallbackJob = defineJob({
  queue: EXPORT_CALLBACK_QUEUE,
  async process(job, ctx) {
    const { exportId, endpoint, body } = ExportCallbackPayload.parse(job.data);
    try {
      const status = await postCallback(endpoint, body, callbackPolicy(ctx.config));
      await settleCallback(ctx.pool, exportId, 'delivered');
      ctx.log.info({ exportId, status }, 'export callback delivered');
    } catch (err) {
      if (err instanceof CallbackRefusedError) {
        ctx.log.warn({ exportId, reason: err.message }, 'export callback refused');
        await settleCallback(ctx.pool, exportId, 'abandoned');
        throw new UnrecoverableError(err.message);
      }
      throw err;
    }
  },
  async onLastAttemptFailed(job, _err, ctx) {
    await settleCallback(ctx.pool, ExportCallbackPayload.parse(job.data).exportId, 'abandoned');
  },
});
