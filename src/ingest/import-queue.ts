import type { Queues } from '../queues.js';
import { BULK_IMPORT_QUEUE } from './payloads.js';

/** The bulk-import job's options: the import's row holds its position, so retries resume; history kept a week. */
const JOB_OPTIONS = { attempts: 10, backoff: { type: 'exponential', delay: 2000 }, removeOnComplete: { age: 7 * 24 * 3600, count: 1000 } };

export const importJobId = (importId: string) => `import-${importId}`;

/**
 * Hands an import to the bulk-import workers. Its job id is fixed by the import, so queueing it again (the reconciler
 * does, for an import whose job Redis lost) adds nothing while the job exists.
 */
export async function enqueueImport(queues: Queues, importId: string): Promise<void> {
  await queues.get(BULK_IMPORT_QUEUE).add('import', { importId }, { ...JOB_OPTIONS, jobId: importJobId(importId) });
}
