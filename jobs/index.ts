import type { JobDefinition } from '../src/platform/job-definition.js';
import { exportCallbackJob } from './export-callback.js';
import { exportShardJob } from './export-shard.js';
import { scheduledExportJob } from './scheduled-export.js';
import { segmentExportJob } from './segment-export.js';
import { liveActivityPushJob } from './live-activity-push.js';
import { liveActivityRemovalJob } from './live-activity-removal.js';
import { canvasScheduleJob } from './canvas-schedule.js';
import { catalogBatchJob } from './catalog-batch.js';
import { trackIngestJob } from './track-ingest.js';
import { bulkImportJob } from './bulk-import.js';
import { cdiSyncJob } from './cdi-sync.js';
import { eventExportJob } from './event-export.js';
import { workspaceStatsJob } from './workspace-stats.js';

/** Every queue processor, one file each. `ces worker` runs them all (or those named by --queues). */
export const jobs: JobDefinition[] = [
  segmentExportJob,
  exportShardJob,
  exportCallbackJob,
  scheduledExportJob,
  catalogBatchJob,
  trackIngestJob,
  bulkImportJob,
  liveActivityPushJob,
  liveActivityRemovalJob,
  canvasScheduleJob,
  cdiSyncJob,
  eventExportJob,
  workspaceStatsJob,
];
