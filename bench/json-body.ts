/**
 * What the key scan of request bodies costs (`npm run bench:json-body`). Needs no database or service.
 *
 * On /users/track bodies of 75 events (bench:ingest's shape: external_id, name, time, two properties), and of 75
 * events with 20 custom properties each, measures per body in one process, alternating BENCH_ROUNDS (default 7)
 * rounds of BENCH_BODIES (default 20,000) parses:
 *  1. the ceiling: JSON.parse alone;
 *  2. what the parser did before duplicate keys were refused: the depth scan and JSON.parse;
 *  3. what it does now (src/platform/http/json-body.ts): the depth scan counting keys, JSON.parse, and the count of parsed keys;
 *  4. the slow scan alone would cost: jsonKeyProblem (every object's keys in a Set) and JSON.parse.
 * It prints microseconds per body (the best round of each) and the ratios to 1 and to 2; 3/2 is what refusing
 * duplicate keys costs, the figure in BENCHMARKS.md. Nothing
 * here is a test: figures depend on the machine and on what else runs on it.
 */
import { jsonKeyProblem, parsedKeys, scanJsonText } from '../src/platform/lib/json-keys.js';
import { MAX_BODY_DEPTH } from '../src/platform/lib/storable.js';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 7);
const BODIES = Number(process.env.BENCH_BODIES ?? 20_000);

function body(propertiesPerEvent: number, seed: number): string {
  const events = Array.from({ length: 75 }, (_, i) => ({
    external_id: `user-${(seed * 7919 + i * 104_729) % 1_000_000}`,
    name: `event-${(seed + i) % 50}`,
    time: new Date(Date.UTC(2024, 0, 1) + ((seed * 75 + i) % 15_552_000) * 1000).toISOString(),
    properties:
      propertiesPerEvent === 2
        ? { source: 'bench', amount: ((seed + i) % 10_000) / 10 }
        : Object.fromEntries(
            Array.from({ length: propertiesPerEvent }, (_, p) => [
              `property_${p}`,
              p % 3 === 0 ? `value ${seed}-${i}` : p % 3 === 1 ? p * 1.5 : { nested: [p, 'x'] },
            ]),
          ),
  }));
  return JSON.stringify({ events });
}

type Way = 'parse' | 'before' | 'now' | 'slow';

function timeRound(bodies: string[], way: Way): number {
  let sink = 0;
  const start = process.hrtime.bigint();
  for (const text of bodies) {
    if (way === 'before' || way === 'now') sink += scanJsonText(text, MAX_BODY_DEPTH) & 1;
    if (way === 'slow' && jsonKeyProblem(text, MAX_BODY_DEPTH)) sink++;
    const value = JSON.parse(text) as { events: unknown[] };
    if (way === 'now') sink += parsedKeys(value).keys & 1;
    sink += value.events.length;
  }
  const ns = Number(process.hrtime.bigint() - start);
  if (sink === 0) throw new Error('nothing parsed');
  return ns / bodies.length / 1000;
}

for (const properties of [2, 20]) {
  const bodies = Array.from({ length: 64 }, (_, i) => body(properties, i));
  const bytes = Math.round(bodies.reduce((n, b) => n + Buffer.byteLength(b), 0) / bodies.length);
  const set = Array.from({ length: BODIES }, (_, i) => bodies[i % bodies.length]!);
  const ways: Way[] = ['parse', 'before', 'now', 'slow'];
  // Warm every path before measuring.
  for (const way of ways) timeRound(set.slice(0, 2_000), way);
  const best: Record<Way, number> = { parse: Infinity, before: Infinity, now: Infinity, slow: Infinity };
  for (let r = 0; r < ROUNDS; r++) for (const way of ways) best[way] = Math.min(best[way], timeRound(set, way));
  console.log(
    JSON.stringify({
      body: `75 events, ${properties} properties each`,
      bytes,
      'JSON.parse µs (ceiling)': Number(best.parse.toFixed(1)),
      'before: depth scan + parse µs': Number(best.before.toFixed(1)),
      'now: counting scan + parse + parsed key count µs': Number(best.now.toFixed(1)),
      'slow scan + parse µs': Number(best.slow.toFixed(1)),
      'now / ceiling': Number((best.now / best.parse).toFixed(2)),
      'now / before': Number((best.now / best.before).toFixed(2)),
    }),
  );
}
