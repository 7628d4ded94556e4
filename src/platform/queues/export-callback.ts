import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** The POST to an export's callback_endpoint once it is ready or failed. */
export const EXPORT_CALLBACK_QUEUE = 'export-callback' as const;
type Queues = QueueOf<typeof EXPORT_CALLBACK_QUEUE, typeof ExportCallbackPayload>;

export const ExportCallbackBody = z.object({
  success: z.boolean(),
  url: z.string().optional(),
  error: z.string().optional(),
});
export type ExportCallbackBody = z.infer<typeof ExportCallbackBody>;

export const ExportCallbackPayload = z.object({ exportId: z.uuid(), endpoint: z.string(), body: ExportCallbackBody });

export const callbackJobId = (exportId: string) => `${exportId}.callback`;

/** Queues an export's callback: one per export (its job id is fixed), retried with exponential backoff. */
export async function enqueueExportCallback(
  queues: Queues,
  attempts: number,
  exportId: string,
  callback: { endpoint: string; body: ExportCallbackBody },
): Promise<void> {
  await queues.get(EXPORT_CALLBACK_QUEUE).add(
    'callback',
    { exportId, endpoint: callback.endpoint, body: callback.body },
    {
      jobId: callbackJobId(exportId),
      attempts: Math.max(1, attempts),
      backoff: { type: 'exponential', delay: 1000 },
    },
  );
}
