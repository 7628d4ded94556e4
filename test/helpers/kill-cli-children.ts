import { afterAll } from 'vitest';
import { killCliChildren } from './cli.js';

// A setup file of every test file (vitest.config.ts): no `ces` process a file spawned, nor any process that one
// started, outlives the file, whether it passed, failed or timed out. Registered first, this runs after the file's own
// afterAll hooks (which may still stop their processes gracefully).
afterAll(killCliChildren);
