// Starts the Cloud Storage emulator of firebase-tools without Java and without the rules runtime (the GCS JSON API
// routes never consult rules). Uses the package's internals, hence the exact version pin in package.json.
// Usage: node start.mjs [--port 9199] [--host 127.0.0.1]; prints "gcs-emulator ready http://host:port" when serving.
// Give each emulator its own TMPDIR: it keeps uploaded blobs under $TMPDIR/firebase/storage.
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { StorageEmulator } = require('firebase-tools/lib/emulator/storage');
const { EmulatorRegistry } = require('firebase-tools/lib/emulator/registry');

const arg = (name, fallback) => {
  const i = process.argv.indexOf(`--${name}`);
  return i > 0 ? process.argv[i + 1] : fallback;
};
const host = arg('host', '127.0.0.1');
const port = Number(arg('port', '9199'));

const emulator = new StorageEmulator({ projectId: arg('project', 'demo-test'), host, port, rules: [], auto_download: false });
const noop = async () => {};
emulator._rulesRuntime.start = noop;
emulator._rulesRuntime.stop = noop;
emulator._rulesManager.start = noop;
emulator._rulesManager.stop = noop;

await EmulatorRegistry.start(emulator);
console.log(`gcs-emulator ready http://${host}:${port}`);

const stop = async () => {
  await EmulatorRegistry.stop(emulator.getName()).catch(() => {});
  process.exit(0);
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
