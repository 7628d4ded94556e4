import type { Config } from '../config.js';
import { registerCanvasSweep } from './canvas-schedule.js';
import { registerCdiSchedulesSync } from './cdi-sync.js';
import { registerEventExportSweep } from './event-export.js';
import type { Queues } from './index.js';
import { registerExportSchedulesSync } from './scheduled-export.js';
import { registerTrackSweep } from './track-ingest.js';
import { registerWorkspaceStatsSweep } from './workspace-stats.js';

/**
 * Every repeatable job of the service, registered here and nowhere else: the track staging sweep, the canvas-schedule
 * sweep, the re-sync of scheduled exports and that of CDI schedules, the event exports' sweep, and the workspaces'
 * statistics sweep (segment sizes of the day, custom attribute names). Each queue's worker registers its own when it
 * starts (through the functions of its queue module), and the reconciler registers them all on every pass, so a Redis
 * that lost them has them back within a pass. Registering is idempotent (BullMQ job schedulers are keyed by id).
 */
export async function registerRepeatableJobs(
  queues: Queues,
  config: Pick<
    Config,
    'CANVAS_SCHEDULE_SWEEP_SECONDS' | 'EVENT_EXPORT_SWEEP_SECONDS' | 'WORKSPACE_STATS_INTERVAL_SECONDS'
  >,
): Promise<void> {
  await registerTrackSweep(queues);
  await registerCanvasSweep(queues, config);
  await registerExportSchedulesSync(queues);
  await registerCdiSchedulesSync(queues);
  await registerEventExportSweep(queues, config);
  await registerWorkspaceStatsSweep(queues, config);
}
