import { existsSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { chromium } from 'playwright-core';
import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const env = useTestEnv();
let base: string;

beforeAll(async () => {
  await env.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(env.app.server.address() as AddressInfo).port}`;
});

describe('GET /docs', () => {
  it('renders the API reference in headless Chromium, listing the endpoints from the zod schemas', async () => {
    // scripts/test.sh installs Debian's chromium when it is missing; without it this test must fail, not skip.
    expect(existsSync(CHROMIUM), `${CHROMIUM} is required (apt-get install chromium)`).toBe(true);
    const browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: [
        '--no-sandbox',
        '--disable-gpu',
        '--disable-quic',
        '--no-first-run',
        '--disable-background-networking',
        '--disable-component-update',
        '--disable-sync',
      ],
    });
    try {
      const page = await browser.newPage();
      const errors: string[] = [];
      page.on('pageerror', (e) => errors.push(e.message));
      await page.goto(`${base}/docs`, { waitUntil: 'networkidle' });
      await page.waitForSelector('.opblock-summary-path', { timeout: 15_000 });
      const paths = await page.$$eval('.opblock-summary-path', (els) =>
        els.map((e) => e.textContent?.replace(/\u200b/g, '').trim()),
      );
      expect(paths).toContain('/segments/list');
      expect(await page.title()).toMatch(/Swagger UI/);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  });
});
