import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { freePort } from './own-servers.js';
import { tmpdir } from 'node:os';
import path from 'node:path';

const TOOL_DIR = path.resolve(import.meta.dirname, '../../tools/gcs-emulator');

export interface RunningGcs {
  endpoint: string;
  projectId: string;
  bucket: string;
  destination: { provider: 'gcs'; bucket: string; projectId: string; endpoint: string };
  close(): Promise<void>;
}

/** True when tools/gcs-emulator has been installed (scripts/test.sh does it). */
export const gcsEmulatorInstalled = () => existsSync(path.join(TOOL_DIR, 'node_modules', 'firebase-tools'));

/**
 * The firebase-tools Cloud Storage emulator in a child process on a free loopback port, with a TMPDIR of its own
 * (it keeps blobs there), for one test file. Buckets appear on first upload.
 */
export async function startGcsEmulator(bucket = 'exports'): Promise<RunningGcs> {
  if (!gcsEmulatorInstalled())
    throw new Error('GCS emulator not installed: run `npm ci --prefix tools/gcs-emulator` (scripts/test.sh does)');
  const port = await freePort();
  const tmp = await mkdtemp(path.join(tmpdir(), 'ces-gcs-'));
  const child: ChildProcess = spawn(process.execPath, ['start.mjs', '--port', String(port)], {
    cwd: TOOL_DIR,
    env: { ...process.env, TMPDIR: tmp },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`GCS emulator did not start within 60 s:\n${output}`)), 60_000);
    const onData = (chunk: Buffer) => {
      output += chunk.toString();
      if (output.includes('gcs-emulator ready')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`GCS emulator exited with ${code}:\n${output}`));
    });
  });
  // Keep draining its output so it never blocks on a full pipe.
  child.stdout!.resume();
  child.stderr!.resume();
  const endpoint = `http://127.0.0.1:${port}`;
  return {
    endpoint,
    projectId: 'demo-test',
    bucket,
    destination: { provider: 'gcs', bucket, projectId: 'demo-test', endpoint },
    async close() {
      if (child.exitCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.kill('SIGTERM');
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5_000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      await rm(tmp, { recursive: true, force: true });
    },
  };
}
