/**
 * Parquet conversion benchmark (`npm run bench:parquet`). Needs no database or service.
 *
 * Writes BENCH_USERS (default 100,000) synthetic users (the `ces users generate` generator, seed 1) as the NDJSON
 * lines an export of every field spools (exportLineSelect's shape: compact top level, nested values as jsonb text),
 * cut into parts of BENCH_PART_LINES lines (default 5,000, the export's part; rows_per_part allows up to 1,000,000).
 * Then, in one run and on the same parts, each measured in a fresh process (so that its peak RSS, VmHWM, is the
 * conversion's own) BENCH_RUNS times (default 3; the best run is printed):
 *  1. the ceiling: gzip level 1 of every part, as the gzip export compresses one (node's zlib);
 *  2. writeParquetFile of every part;
 * each with one part at a time (one core) and with two in flight (the part writer's PARTS_IN_FLIGHT). It prints
 * users/s, output bytes and peak RSS; the ratio Parquet/gzip is the figure tracked in BENCHMARKS.md. Nothing here
 * is a test: figures depend on the machine and on what else runs on it.
 */
import { spawn } from 'node:child_process';
import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import { cpus } from 'node:os';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { createGzip } from 'node:zlib';
import type { PoolClient } from '../src/platform/db/pool.js';
import {
  REMOVED_PARQUET_COLUMNS,
  usersParquetColumns,
  writeParquetFile,
} from '../src/pipelines/exports/shard/parquet-writer.js';
import { EXPORT_FIELDS, type ExportField } from '../src/pipelines/exports/request/request-body.js';
import { PROFILE_COLUMNS } from '../src/features/synthetic-users/copy-load.js';
import { startOfUtcDay } from '../src/features/synthetic-users/generate.js';
import { profileLine } from '../src/features/synthetic-users/profile-line.js';
import { loadWorld } from '../src/features/synthetic-users/world.js';

const USERS = Number(process.env.BENCH_USERS ?? 100_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const PART_LINES = Number(process.env.BENCH_PART_LINES ?? 5_000);
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-parquet';

/** The profiles columns of a generated COPY line. */
const COPY_COLUMNS = PROFILE_COLUMNS;

const COPY_UNESCAPE: Record<string, string> = { n: '\n', r: '\r', t: '\t', '\\': '\\' };
const copyValue = (v: string): string | null =>
  v === '\\N' ? null : v.replace(/\\(.)/g, (_m, c: string) => COPY_UNESCAPE[c] ?? c);

const jsonbKeyOrder = (a: string, b: string) =>
  Buffer.byteLength(a) - Buffer.byteLength(b) || Buffer.compare(Buffer.from(a), Buffer.from(b));
/** Sorted key lists by the object's own key list: the generator repeats a few shapes millions of times. */
const sortedKeys = new Map<string, string[]>();
/** jsonb's text form, as PostgreSQL prints a stored value: `", "` and `": "`, keys shorter first then bytewise. */
function jsonbText(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(jsonbText).join(', ')}]`;
  if (v !== null && typeof v === 'object') {
    const o = v as Record<string, unknown>;
    const own = Object.keys(o);
    const signature = own.join('\u0000');
    let keys = sortedKeys.get(signature);
    if (!keys) sortedKeys.set(signature, (keys = own.sort(jsonbKeyOrder)));
    return `{${keys.map((k) => `${JSON.stringify(k)}: ${jsonbText(o[k])}`).join(', ')}}`;
  }
  return JSON.stringify(v);
}

/**
 * The export line of one generated profile, as exportLineSelect prints it for `fields` (the 90-day window starting
 * at `since` applied as there). Absent values and empty collections are left out.
 */
export function exportLineOf(copyLine: string, fields: readonly ExportField[], since: string): string {
  const raw = copyLine.replace(/\n$/, '').split('\t');
  const col = (name: (typeof COPY_COLUMNS)[number]) => copyValue(raw[COPY_COLUMNS.indexOf(name)]!);
  const parts: string[] = [];
  for (const field of fields) {
    // Not a profiles column (its own table): generated users are in no group, so their lines leave it out.
    if (field === 'subscription_groups') continue;
    const v = col(field);
    if (v === null) continue;
    let json: string | null;
    switch (field) {
      case 'random_bucket':
      case 'total_revenue':
        json = String(Number(v));
        break;
      case 'last_coordinates':
        json = `[${v.slice(1, -1)}]`;
        break;
      case 'custom_attributes':
        json = v === '{}' ? null : jsonbText(JSON.parse(v));
        break;
      case 'custom_events':
      case 'purchases': {
        const entries = Object.values(JSON.parse(v) as Record<string, { last: string }>).filter((e) => e.last >= since);
        json = entries.length ? jsonbText(entries) : null;
        break;
      }
      case 'campaigns_received':
      case 'canvases_received':
      case 'user_aliases':
      case 'devices':
      case 'push_tokens':
      case 'apps':
      case 'cards_clicked':
        json = v === '[]' ? null : jsonbText(JSON.parse(v));
        break;
      default:
        json = JSON.stringify(v);
    }
    if (json !== null) parts.push(`"${field}":${json}`);
  }
  return `{${parts.join(',')}}`;
}

/**
 * Writes `count` generated users as export lines of `fields` into `dir`, as part files of `partLines` lines each (the
 * export's spooled parts); returns their paths and total size.
 */
export async function writeGeneratedParts(
  dir: string,
  count: number,
  partLines: number,
  fields: readonly ExportField[] = EXPORT_FIELDS,
): Promise<{ files: string[]; bytes: number }> {
  const now = startOfUtcDay(new Date());
  // The generator's world is read from the database; with no rows there it falls back to its built-in apps,
  // canvases and cards, which is what an empty query result gives.
  const noRows = { query: async () => ({ rows: [] }) } as unknown as PoolClient;
  const world = await loadWorld(noRows, '00000000-0000-4000-8000-000000000001', 1, now.getTime());
  const since = new Date(now.getTime() - 90 * 86_400_000).toISOString();
  const files: string[] = [];
  const aliases: string[] = [];
  let bytes = 0;
  for (let first = 0; first < count; first += partLines) {
    const file = path.join(dir, `part-${files.length}.ndjson`);
    const out = createWriteStream(file);
    let chunk = '';
    const last = Math.min(count, first + partLines);
    for (let i = first; i < last; i++) {
      chunk += exportLineOf(profileLine(world, i, i + 1, aliases), fields, since) + '\n';
      aliases.length = 0;
      if (chunk.length > 1 << 20 || i === last - 1) {
        bytes += Buffer.byteLength(chunk);
        if (!out.write(chunk)) await new Promise<void>((resolve) => out.once('drain', () => resolve()));
        chunk = '';
      }
    }
    await new Promise<void>((resolve, reject) => out.end((err?: Error | null) => (err ? reject(err) : resolve())));
    files.push(file);
  }
  return { files, bytes };
}

type Mode = 'gzip' | 'parquet';
interface Measure {
  seconds: number;
  bytes: number;
  peakRssMb: number;
}

async function convertOne(mode: Mode, part: string, out: string): Promise<number> {
  if (mode === 'gzip') {
    await pipeline(
      createReadStream(part, { highWaterMark: 256 * 1024 }),
      createGzip({ level: 1, chunkSize: 64 * 1024 }),
      createWriteStream(out),
    );
  } else {
    await writeParquetFile(part, out, usersParquetColumns({ fields: EXPORT_FIELDS, customAttributes: null }));
  }
  const { size } = await stat(out);
  await rm(out);
  return size;
}

/** In a fresh process (so that its peak RSS is the conversion's): every part, `inFlight` at a time, RUNS times. */
async function measureInChild(mode: Mode, inFlight: number, parts: string[]): Promise<Measure> {
  let best = Infinity;
  let bytes = 0;
  for (let run = 0; run < RUNS; run++) {
    const t = performance.now();
    const queue = parts.map((part, i) => ({ part, out: path.join(WORK_DIR, `out-${i}.${mode}`) }));
    let total = 0;
    await Promise.all(
      Array.from({ length: inFlight }, async () => {
        for (let next = queue.shift(); next; next = queue.shift()) {
          // Not `total += await ...`: that would read `total` before the await and lose the other lane's bytes.
          const size = await convertOne(mode, next.part, next.out);
          total += size;
        }
      }),
    );
    best = Math.min(best, (performance.now() - t) / 1000);
    bytes = total;
  }
  return { seconds: best, bytes, peakRssMb: process.resourceUsage().maxRSS / 1024 };
}

async function measure(mode: Mode, inFlight: number, parts: string[]): Promise<Measure> {
  // The same loader flags (tsx) run this file again as the child.
  const child = spawn(
    process.execPath,
    [...process.execArgv, fileURLToPath(import.meta.url), 'child', mode, String(inFlight), ...parts],
    {
      stdio: ['ignore', 'pipe', 'inherit'],
    },
  );
  let out = '';
  child.stdout!.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  if (code !== 0) throw new Error(`${mode} measurement exited with ${code}`);
  return JSON.parse(out.trim().split('\n').pop()!) as Measure;
}

async function main(): Promise<void> {
  await rm(WORK_DIR, { recursive: true, force: true });
  await mkdir(WORK_DIR, { recursive: true });
  const t = performance.now();
  const { files, bytes } = await writeGeneratedParts(WORK_DIR, USERS, PART_LINES);
  console.log(
    `generated ${USERS.toLocaleString()} users, every field: ${(bytes / 1e6).toFixed(0)} MB NDJSON (${((performance.now() - t) / 1000).toFixed(1)} s)`,
  );
  console.log(
    `machine: ${cpus().length} cores, node ${process.version}; ${files.length} part(s) of ${Math.min(PART_LINES, USERS).toLocaleString()} lines; best of ${RUNS} runs\n`,
  );

  const results: Record<string, Measure & { usersPerSecond: number }> = {};
  const row = (label: string, m: Measure) =>
    console.log(
      `${label.padEnd(46)} ${m.seconds.toFixed(2).padStart(6)} s ${Math.round(USERS / m.seconds)
        .toLocaleString()
        .padStart(9)} users/s ${(m.bytes / 1e6).toFixed(1).padStart(7)} MB   peak RSS ${m.peakRssMb.toFixed(0)} MB`,
    );
  for (const inFlight of [1, 2]) {
    for (const mode of ['gzip', 'parquet'] as const) {
      const m = await measure(mode, inFlight, files);
      results[`${mode}x${inFlight}`] = { ...m, usersPerSecond: USERS / m.seconds };
      row(`${mode === 'gzip' ? 'ceiling: gzip -1 (zlib)' : 'writeParquetFile'}, ${inFlight} part(s) in flight`, m);
    }
  }
  const ratio = (n: number) => results[`parquetx${n}`]!.usersPerSecond / results[`gzipx${n}`]!.usersPerSecond;
  console.log(`ratio parquet/gzip: ${ratio(1).toFixed(2)} one part at a time, ${ratio(2).toFixed(2)} two in flight`);

  // The removed- part's columns, converted once so that the bench exercises both column sets.
  const removed = path.join(WORK_DIR, 'removed.ndjson');
  await pipeline(async function* () {
    for (let i = 0; i < 1000; i++) yield `{"external_id":"u-${i}","service_id":"s-${i}"}\n`;
  }, createWriteStream(removed));
  await writeParquetFile(removed, path.join(WORK_DIR, 'removed.parquet'), REMOVED_PARQUET_COLUMNS);

  console.log(
    `\n${JSON.stringify({ users: USERS, partLines: Math.min(PART_LINES, USERS), ndjsonBytes: bytes, results, ratio1: ratio(1), ratio2: ratio(2) })}`,
  );
  await rm(WORK_DIR, { recursive: true, force: true });
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  if (process.argv[2] === 'child') {
    const [mode, inFlight, ...parts] = process.argv.slice(3);
    console.log(JSON.stringify(await measureInChild(mode as Mode, Number(inFlight), parts)));
  } else {
    await main();
  }
}
