import { existsSync, readFileSync } from 'node:fs';
import { createServer, type AddressInfo } from 'node:net';
import path from 'node:path';
import { chromium, type Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { callApi } from '../helpers/http.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * A user's preference center page driven in headless Chromium, as a person uses it: the page built like Braze's
 * example (test/http/fixtures/preference-center-page.html) shows the user's states, the user changes them and saves,
 * sees the confirmation, and the API then reads the new states. A tampered link shows a refusal and changes nothing.
 */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const GROUPS = [
  '3d2ae07a-f2ff-4318-bdff-e394f2d3a4ec',
  '7d89bdc3-4aa1-4592-8b8a-4c8b7161c875',
  '5444d32e-2815-4258-964c-b9690d4ccb94',
] as const;
const [G1, G2, G3] = GROUPS;
const EMAIL = 'reader@example.com';

let env: TestEnv;
let ws: SeededWorkspace;
let base: string;
let browser: Browser;
let centerId: string;

const api = (method: 'GET' | 'POST', url: string, body?: unknown) =>
  callApi(env.app, method, url, { key: ws.apiKey, ...(body === undefined ? {} : { body }) });

/** A port free a moment ago: the service's PUBLIC_BASE_URL must name the port it then listens on. */
async function freePort(): Promise<number> {
  const probe = createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const { port } = probe.address() as AddressInfo;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

beforeAll(async () => {
  const port = await freePort();
  base = `http://127.0.0.1:${port}`;
  env = await createTestEnv({ PUBLIC_BASE_URL: base });
  ws = await seedWorkspace(env.ctx.pool);
  await env.app.listen({ host: '127.0.0.1', port });
  const pool = env.ctx.pool;
  await pool.query(
    `INSERT INTO subscription_groups (id, workspace_id, name, channel)
     SELECT g, $2, 'Sub Group ' || n, 'email' FROM unnest($1::uuid[]) WITH ORDINALITY AS x(g, n)`,
    [GROUPS, ws.workspaceId],
  );
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, email_subscribe)
     VALUES ($1, 's1', 'reader', 1, $2, 'opted_in')`,
    [ws.workspaceId, EMAIL],
  );
  const set = await api('POST', '/v2/subscription/status/set', {
    subscription_groups: [
      { subscription_group_id: G1, subscription_state: 'subscribed', external_ids: ['reader'] },
      { subscription_group_id: G2, subscription_state: 'unsubscribed', external_ids: ['reader'] },
    ],
  });
  expect(set.status).toBe(201);
  const html = GROUPS.reduce(
    (page, id, i) => page.replaceAll(`GROUP_${i + 1}`, id),
    readFileSync(path.join(import.meta.dirname, 'fixtures/preference-center-page.html'), 'utf8'),
  );
  const created = await api('POST', '/preference_center/v1', {
    name: 'email_preferences',
    preference_center_page_html: html,
    confirmation_page_html:
      '<html><body><h1 id="done">Saved</h1><p id="state">{{subscribed_state.${email_global}}}</p></body></html>',
  });
  expect(created.status).toBe(201);
  centerId = created.body.preference_center_api_id;

  // scripts/test.sh installs Debian's chromium when it is missing; without it this test must fail, not skip.
  expect(existsSync(CHROMIUM), `${CHROMIUM} is required (apt-get install chromium)`).toBe(true);
  browser = await chromium.launch({
    executablePath: CHROMIUM,
    args: ['--no-sandbox', '--disable-gpu', '--no-first-run', '--disable-background-networking', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  await env?.close();
});

/** What the API says of the user now: each group's state, and whether the address is listed as unsubscribed. */
async function statesThroughApi() {
  const groups: string[] = [];
  for (const g of GROUPS) {
    const r = await api('GET', `/subscription/status/get?subscription_group_id=${g}&external_id[]=reader`);
    expect(r.status).toBe(200);
    groups.push(r.body.status.reader);
  }
  const unsubscribes = await api('GET', `/email/unsubscribes?email=${encodeURIComponent(EMAIL)}`);
  expect(unsubscribes.status).toBe(200);
  return { groups, emailUnsubscribed: unsubscribes.body.emails.length > 0 };
}

async function pageUrl(): Promise<string> {
  const r = await api('GET', `/preference_center/v1/${centerId}/url/reader`);
  expect(r.status).toBe(200);
  expect(r.body.preference_center_url.startsWith(`${base}/pages/preference_center/`)).toBe(true);
  return r.body.preference_center_url;
}

describe("a user's preference center page in Chromium", () => {
  it('a tampered link shows a refusal and changes nothing, by GET or by a form posted to it', async () => {
    const url = await pageUrl();
    const before = await statesThroughApi();
    // One character of the signature (after the token's only dot) changed.
    const [payload, signature] = url.slice(url.lastIndexOf('/') + 1).split('.');
    const tampered = `${url.slice(0, url.lastIndexOf('/') + 1)}${payload}.${signature!.startsWith('A') ? 'B' : 'A'}${signature!.slice(1)}`;
    expect(tampered).not.toBe(url);
    const page = await browser.newPage();
    try {
      const res = await page.goto(tampered);
      expect(res?.status()).toBe(403);
      expect(await page.textContent('body')).toContain('This preference center link is invalid');
      // The page is sandboxed (an origin of its own): the form is posted as a person's browser posts it.
      const [posted] = await Promise.all([
        page.waitForNavigation(),
        // A script string: this file is compiled without the DOM's types.
        page.evaluate(`(() => {
          const form = document.createElement('form');
          form.method = 'post';
          form.action = ${JSON.stringify(tampered)};
          const input = document.createElement('input');
          input.name = 'email_global_state';
          input.value = 'unsubscribed';
          form.appendChild(input);
          document.body.appendChild(form);
          form.submit();
        })()`),
      ]);
      expect(posted?.status()).toBe(403);
      expect(await page.textContent('body')).toContain('This preference center link is invalid');
    } finally {
      await page.close();
    }
    expect(await statesThroughApi()).toEqual(before);
  });

  it("shows the user's states; unticking, ticking and unsubscribing from all are saved", async () => {
    expect(await statesThroughApi()).toEqual({
      groups: ['Subscribed', 'Unsubscribed', 'Unknown'],
      emailUnsubscribed: false,
    });
    const page = await browser.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    try {
      await page.goto(await pageUrl(), { waitUntil: 'load' });
      expect(await page.title()).toBe('Email Preferences');
      expect(await page.textContent('.displayed-email')).toBe(EMAIL);
      expect(await page.isChecked(`#checkbox-${G1}`)).toBe(true);
      expect(await page.isChecked(`#checkbox-${G2}`)).toBe(false);
      expect(await page.isChecked(`#checkbox-${G3}`)).toBe(false);
      expect(await page.isChecked('#checkbox-global')).toBe(false);

      await page.uncheck(`#checkbox-${G1}`);
      await page.check(`#checkbox-${G2}`);
      await page.check('#checkbox-global');
      expect(await page.isDisabled(`#checkbox-${G2}`)).toBe(true);
      await Promise.all([page.waitForURL((u) => u.href.includes('/pages/preference_center/')), page.click('.save')]);
      await page.waitForSelector('#done');
      expect(await page.textContent('#done')).toBe('Saved');
      expect(await page.textContent('#state')).toBe('unsubscribed');
      expect(errors).toEqual([]);
    } finally {
      await page.close();
    }
    expect(await statesThroughApi()).toEqual({
      groups: ['Unsubscribed', 'Subscribed', 'Unsubscribed'],
      emailUnsubscribed: true,
    });

    // Opened again, the page shows what was saved.
    const again = await browser.newPage();
    try {
      await again.goto(await pageUrl(), { waitUntil: 'load' });
      expect(await again.isChecked('#checkbox-global')).toBe(true);
      expect(await again.isChecked(`#checkbox-${G2}`)).toBe(true);
      expect(await again.isChecked(`#checkbox-${G1}`)).toBe(false);
    } finally {
      await again.close();
    }
  });
});
