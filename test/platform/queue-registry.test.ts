import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { expect, test } from 'vitest';
import { jobs } from '../../jobs/index.js';
import { QUEUE_NAMES, QUEUE_PAYLOADS } from '../../src/platform/queues/index.js';
import { REPAIRS } from '../../src/runtime/reconcile/repairs.js';
import { CLUSTER_FILES } from '../cluster-files.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
const read = (file: string) => readFileSync(path.join(ROOT, file), 'utf8');

/**
 * Adding a queue touches a few files (docs/architecture.md, "Adding a queue"); this test names the one forgotten: its
 * module under src/platform/queues/, its payload in the map, its processor under jobs/ listed in jobs/index.ts, a repair
 * of the reconciler that queues its lost work again, and a test file of the Redis Cluster run (test/cluster-files.ts)
 * that exercises it.
 */
test('every queue has its module, its payload schema, one processor, a repair, and a place in the Redis Cluster run', () => {
  const clusterText = CLUSTER_FILES.map((f) => read(f)).join('\n');
  for (const queue of QUEUE_NAMES) {
    expect(existsSync(path.join(ROOT, `src/platform/queues/${queue}.ts`)), `src/platform/queues/${queue}.ts`).toBe(
      true,
    );
    expect(QUEUE_PAYLOADS[queue], `the payload schema of ${queue} in src/platform/queues/index.ts`).toBeDefined();
    expect(existsSync(path.join(ROOT, `jobs/${queue}.ts`)), `jobs/${queue}.ts`).toBe(true);
    expect(jobs.filter((j) => j.queue === queue).length, `one processor of ${queue} in jobs/index.ts`).toBe(1);
    expect(
      REPAIRS.some((r) => r.queues.includes(queue)),
      `a repair of src/runtime/reconcile/repairs.ts (REPAIRS) that queues ${queue}'s lost work again`,
    ).toBe(true);
    // A test of the cluster run that drives the queue's work: the queue's name or one of its module's exports.
    const exported = Object.keys(QUEUE_PAYLOADS).includes(queue) ? read(`src/platform/queues/${queue}.ts`) : '';
    const names = [queue, ...[...exported.matchAll(/export (?:async )?(?:function|const) (\w+)/g)].map((m) => m[1]!)];
    expect(
      names.some((n) => clusterText.includes(n)) || CLUSTER_FILES.some((f) => f.includes(queue.split('-')[0]!)),
      `a test file of test/cluster-files.ts that exercises ${queue}`,
    ).toBe(true);
  }
  expect(jobs.length).toBe(QUEUE_NAMES.length);
});
