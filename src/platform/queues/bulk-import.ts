import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Runs bulk imports (src/pipelines/ingest/import/imports.ts). */
export const BULK_IMPORT_QUEUE = 'bulk-import' as const;
type Queues = QueueOf<typeof BULK_IMPORT_QUEUE, typeof BulkImportPayload>;

/** A bulk-import job names its imports row; everything else (file, position) is read from there. */
export const BulkImportPayload = z.object({ importId: z.uuid() });
export type BulkImportPayload = z.infer<typeof BulkImportPayload>;

/** The import's row holds its position, so retries resume; history kept a week. */
const JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 2000 },
  removeOnComplete: { age: 7 * 24 * 3600, count: 1000 },
};

export const importJobId = (importId: string) => `import-${importId}`;

/**
 * Hands an import to the bulk-import workers. Its job id is fixed by the import, so queueing it again (the reconciler
 * does, for an import whose job Redis lost) adds nothing while the job exists.
 */
export async function enqueueImport(queues: Queues, importId: string): Promise<void> {
  await queues.get(BULK_IMPORT_QUEUE).add('import', { importId }, { ...JOB_OPTIONS, jobId: importJobId(importId) });
}
