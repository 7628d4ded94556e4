import type { JobDefinition } from '../src/worker.js';
import { catalogBatchJob } from './catalog-batch.js';

/** Every queue processor, one file each. `ces worker` runs them all (or those named by --queues). */
export const jobs: JobDefinition[] = [catalogBatchJob];
