import { z } from 'zod';

/** Queue names and job payloads of ingestion (kept apart from the domain modules so src/queues.ts stays light). */

export const TRACK_INGEST_QUEUE = 'track-ingest' as const;
export const BULK_IMPORT_QUEUE = 'bulk-import' as const;

/** A track-ingest job: everything staged when it starts; `stagedId` (jobs queued by older versions) through that row. */
export const TrackIngestPayload = z.object({ stagedId: z.number().int().positive().optional() });
export type TrackIngestPayload = z.infer<typeof TrackIngestPayload>;

/** A bulk-import job names its imports row; everything else (file, position) is read from there. */
export const BulkImportPayload = z.object({ importId: z.uuid() });
export type BulkImportPayload = z.infer<typeof BulkImportPayload>;
