import { UnrecoverableError } from 'bullmq';
import { ImportFileError, runImport } from '../src/pipelines/ingest/import/run-import.js';
import { failImport } from '../src/pipelines/ingest/import/imports.js';
import { BULK_IMPORT_QUEUE, BulkImportPayload } from '../src/platform/queues/bulk-import.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Runs a bulk import to the end of its file. Safe to retry at any point: the import resumes at the position its
 * last committed batch recorded. A file that cannot be read as its format fails at once; other errors retry.
 */
export const bulkImportJob = defineJob({
  queue: BULK_IMPORT_QUEUE,
  // One file at a time per process: an import already keeps PostgreSQL and a core busy.
  concurrency: () => 1,
  async process(job, ctx) {
    const { importId } = BulkImportPayload.parse(job.data);
    try {
      return await runImport(ctx, importId);
    } catch (err) {
      const message = err instanceof Error ? err.message : String(err);
      if (err instanceof ImportFileError) {
        await failImport(ctx.pool, importId, message);
        throw new UnrecoverableError(message);
      }
      throw err;
    }
  },
  async onLastAttemptFailed(job, err, ctx) {
    const { importId } = BulkImportPayload.parse(job.data);
    await failImport(ctx.pool, importId, err instanceof Error ? err.message : String(err));
  },
});
