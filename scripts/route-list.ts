/** Prints every route with its permission and rate-limit bucket (for the README): `npx tsx scripts/route-list.ts`. */
import { buildApp } from '../src/app.js';
import { loadConfig } from '../src/platform/config.js';
import { createContext, closeContext } from '../src/platform/context.js';

const ctx = await createContext(loadConfig({ LOG_LEVEL: 'silent' }));
const app = await buildApp(ctx);
await app.ready();
const rows = app.routeCatalog
  .filter(
    (r) => r.method !== 'HEAD' && (r.config.permission || r.config.auth === 'scim' || r.url.startsWith('/downloads')),
  )
  .map(
    (r) =>
      `| ${r.method} | \`${r.url}\` | ${r.config.auth === 'scim' ? 'SCIM token' : (r.config.permission ?? 'signed URL')} | ${r.config.rateLimit ? r.config.rateLimit.bucket : '-'} |`,
  );
console.log(['| Method | Path | Permission | Rate-limit bucket |', '| --- | --- | --- | --- |', ...rows].join('\n'));
await app.close();
await closeContext(ctx);
