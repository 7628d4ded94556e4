import { defineConfig } from 'vitest/config';
import LongestFirst from './test/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Kills, at the end of each file, the `ces` processes it spawned (test/helpers/cli.ts), whatever became of it.
    setupFiles: ['test/helpers/kill-cli-children.ts'],
    pool: 'forks',
    // Two cores, and three files at a time: many files spend most of their time waiting (BullMQ's stalled-job check
    // after a SIGKILL, a restarted PostgreSQL, a flush interval), so a third overlaps those waits; more than three
    // only queue behind PostgreSQL and make timings erratic.
    maxWorkers: 3,
    // The longest files first (test/sequencer.ts), even where vitest has no timings of its own (CI's clean clone).
    sequence: { sequencer: LongestFirst },
    testTimeout: 60_000,
    hookTimeout: 120_000,
  },
});
