import type { JobsOptions } from 'bullmq';

/** Retention every job gets unless its queue says otherwise: keep recent history, never grow without bound. */
export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  removeOnComplete: { age: 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000 },
};

/** The prefix of every BullMQ key of an install. */
export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;
