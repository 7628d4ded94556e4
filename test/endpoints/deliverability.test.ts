import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { HardBouncesResponse, InvalidPhoneNumbersResponse } from '../../src/routes/deliverability.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';
import { callApi } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

const phone = (i: number) => `+1555555${String(i).padStart(4, '0')}`;

beforeAll(async () => {
  // 250 invalid numbers, ten sharing each detection time, so that offset paging has to cross ties.
  const numbers = Array.from({ length: 250 }, (_, i) => ({
    phone: phone(i),
    reason: i % 3 === 0 ? 'deactivated' : 'provider_error',
    time: new Date(Date.UTC(2024, 0, 1) + Math.floor(i / 10) * 3_600_000).toISOString(),
  }));
  await record('invalid_phone_numbers', numbers);
  // Midnight edges: the last millisecond of 2024-02-01 and the first of 2024-02-02.
  await record('invalid_phone_numbers', [
    { phone: '+15550000001', reason: 'provider_error', time: '2024-02-01T23:59:59.999Z' },
    { phone: '+15550000002', reason: 'provider_error', time: '2024-02-02T00:00:00.000Z' },
  ]);
  await record('hard_bounces', [
    { email: 'a+tag@example.com', time: '2024-02-01T00:00:00.000Z' },
    { email: 'b@example.com', time: '2024-02-01T23:59:59.999Z' },
    { email: 'c@example.com', time: '2024-02-02T00:00:00.000Z' },
    { email: 'd@example.com', time: '2024-02-02T00:00:00.000Z' },
    { email: 'e@example.com', time: '2024-02-02T00:00:00.000Z' },
  ]);
  await record('hard_bounces', [{ email: 'foreign@example.com', time: '2024-02-01T12:00:00Z' }], env.other.apiKey);
  await record(
    'invalid_phone_numbers',
    [{ phone: '+15559999999', reason: 'deactivated', time: '2024-01-01T00:00:00Z' }],
    env.other.apiKey,
  );
});

async function record(kind: string, records: unknown[], key = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'POST',
    url: `/internal/records/${kind}`,
    headers: bearer(key),
    payload: { records },
  });
  expect(res.statusCode, res.body).toBe(201);
}

const get = (url: string, key: string | null = env.ws.apiKey) => callApi(env.app, 'GET', url, { key: key || null });

type Sms = z.infer<typeof InvalidPhoneNumbersResponse>['sms'][number];
type HardBounce = z.infer<typeof HardBouncesResponse>['emails'][number];

describe('GET /sms/invalid_phone_numbers', () => {
  it('returns the spec shape, newest first, 100 by default', async () => {
    const { status, body } = await get('/sms/invalid_phone_numbers?');
    expect(status).toBe(200);
    expect(body.message).toBe('success');
    expect(body.sms).toHaveLength(100);
    expect(body.sms[0]).toEqual({
      phone: '+15550000002',
      invalid_detected_at: '2024-02-02T00:00:00.000Z',
      reason: 'provider_error',
    });
    const times = body.sms.map((s: Sms) => s.invalid_detected_at);
    expect([...times].sort().reverse()).toEqual(times);
  });

  it('pages by offset across ties without skipping or repeating, until fewer than limit return', async () => {
    const seen: string[] = [];
    const sizes: number[] = [];
    for (let offset = 0; ; offset += 100) {
      const { body } = await get(
        `/sms/invalid_phone_numbers?start_date=2024-01-01&end_date=2024-01-31&limit=100&offset=${offset}`,
      );
      sizes.push(body.sms.length);
      seen.push(...body.sms.map((s: Sms) => s.phone));
      if (body.sms.length < 100) break;
    }
    expect(sizes).toEqual([100, 100, 50]);
    expect(new Set(seen).size).toBe(250);
    expect(seen).not.toContain('+15559999999');
    // Ties come newest-recorded first: within each hour, the higher numbers were recorded later.
    expect(seen.slice(0, 10)).toEqual(Array.from({ length: 10 }, (_, i) => phone(249 - i)));
    const small = [];
    for (let offset = 0; offset < 250; offset += 7) {
      const { body } = await get(
        `/sms/invalid_phone_numbers?start_date=2024-01-01&end_date=2024-01-31&limit=7&offset=${offset}`,
      );
      small.push(...body.sms.map((s: Sms) => s.phone));
    }
    expect(small).toEqual(seen);
  });

  it('takes up to 500 at once', async () => {
    const { body } = await get('/sms/invalid_phone_numbers?limit=500');
    expect(body.sms).toHaveLength(252);
  });

  it('treats start_date and end_date as midnight UTC: [start, end)', async () => {
    const day1 = await get('/sms/invalid_phone_numbers?start_date=2024-02-01&end_date=2024-02-02');
    expect(day1.body.sms.map((s: Sms) => s.phone)).toEqual(['+15550000001']);
    const day2 = await get('/sms/invalid_phone_numbers?start_date=2024-02-02&end_date=2024-02-03');
    expect(day2.body.sms.map((s: Sms) => s.phone)).toEqual(['+15550000002']);
    const from = await get('/sms/invalid_phone_numbers?start_date=2024-02-02');
    expect(from.body.sms).toHaveLength(1);
    const until = await get('/sms/invalid_phone_numbers?end_date=2024-01-01&limit=500');
    expect(until.body.sms).toHaveLength(0);
  });

  it('filters by phone_numbers[] (bracketed or not, + encoded or not) and by reason', async () => {
    const bracketed = await get(
      `/sms/invalid_phone_numbers?phone_numbers[]=${encodeURIComponent(phone(3))}&phone_numbers[]=${phone(4)}`,
    );
    expect(bracketed.body.sms.map((s: Sms) => s.phone)).toEqual([phone(4), phone(3)]);
    const plain = await get(`/sms/invalid_phone_numbers?phone_numbers=${encodeURIComponent(phone(5))}`);
    expect(plain.body.sms).toEqual([
      { phone: phone(5), invalid_detected_at: '2024-01-01T00:00:00.000Z', reason: 'provider_error' },
    ]);
    const unknown = await get('/sms/invalid_phone_numbers?phone_numbers[]=%2B14155550000');
    expect(unknown.body.sms).toEqual([]);
    const deactivated = await get('/sms/invalid_phone_numbers?reason=deactivated&limit=500');
    expect(deactivated.body.sms).toHaveLength(84);
    expect(deactivated.body.sms.every((s: Sms) => s.reason === 'deactivated')).toBe(true);
    const both = await get(
      `/sms/invalid_phone_numbers?reason=deactivated&phone_numbers[]=${encodeURIComponent(phone(3))}&phone_numbers[]=${encodeURIComponent(phone(4))}`,
    );
    expect(both.body.sms.map((s: Sms) => s.phone)).toEqual([phone(3)]);
  });

  it.each([
    ['limit=501', /limit must be an integer from 1 to 500/],
    ['limit=0', /limit/],
    ['limit=1.5', /limit/],
    ['limit=ten', /limit/],
    ['offset=-1', /offset must be an integer of 0 or more/],
    ['offset=', /offset/],
    ['start_date=2024-1-01', /start_date must be a date YYYY-MM-DD/],
    ['start_date=2024-02-30', /start_date/],
    ['end_date=2024-01-01T00:00:00Z', /end_date/],
    ['start_date=2024-01-02&end_date=2024-01-01', /start_date must be before end_date/],
    ['start_date=2024-01-01&end_date=2024-01-01', /start_date must be before end_date/],
    ['reason=bounced', /reason must be 'provider_error' or 'deactivated'/],
    ['phone_numbers[]=5555550100', /E\.164/],
    ['phone_numbers[]=%2B1555&phone_numbers=abc', /E\.164/],
    [Array.from({ length: 501 }, (_, i) => `phone_numbers[]=${encodeURIComponent(phone(i))}`).join('&'), /at most 500/],
  ])('refuses %s', async (query, message) => {
    const { status, body } = await get(`/sms/invalid_phone_numbers?${query}`);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });
});

describe('GET /email/hard_bounces', () => {
  it('returns the spec shape, newest first, ties newest-recorded first', async () => {
    const { status, body } = await get('/email/hard_bounces');
    expect(status).toBe(200);
    expect(body).toEqual({
      emails: [
        { email: 'e@example.com', unsubscribed_at: '2024-02-02T00:00:00.000Z' },
        { email: 'd@example.com', unsubscribed_at: '2024-02-02T00:00:00.000Z' },
        { email: 'c@example.com', unsubscribed_at: '2024-02-02T00:00:00.000Z' },
        { email: 'b@example.com', unsubscribed_at: '2024-02-01T23:59:59.999Z' },
        { email: 'a+tag@example.com', unsubscribed_at: '2024-02-01T00:00:00.000Z' },
      ],
      message: 'success',
    });
  });

  it('pages by offset over ties', async () => {
    const pages = [];
    for (let offset = 0; offset < 5; offset += 2) {
      const { body } = await get(`/email/hard_bounces?limit=2&offset=${offset}`);
      pages.push(body.emails.map((e: HardBounce) => e.email[0]));
    }
    expect(pages).toEqual([['e', 'd'], ['c', 'b'], ['a']]);
  });

  it('treats the dates as midnight UTC', async () => {
    const { body } = await get('/email/hard_bounces?start_date=2024-02-01&end_date=2024-02-02');
    expect(body.emails.map((e: HardBounce) => e.email)).toEqual(['b@example.com', 'a+tag@example.com']);
  });

  it('answers for one address, case-insensitively, with + encoded or not', async () => {
    const encoded = await get(`/email/hard_bounces?email=${encodeURIComponent('A+TAG@example.com')}`);
    expect(encoded.body.emails).toEqual([{ email: 'a+tag@example.com', unsubscribed_at: '2024-02-01T00:00:00.000Z' }]);
    const raw = await get('/email/hard_bounces?email=a+tag@example.com');
    expect(raw.body.emails).toHaveLength(1);
    const never = await get('/email/hard_bounces?email=never@example.com');
    expect(never.body).toEqual({ emails: [], message: 'success' });
    const foreign = await get('/email/hard_bounces?email=foreign@example.com');
    expect(foreign.body.emails).toEqual([]);
    const pastTheEnd = await get('/email/hard_bounces?email=b@example.com&offset=1&limit=1');
    expect(pastTheEnd.body.emails).toEqual([]);
  });

  it.each([
    ['limit=501', /limit/],
    ['offset=-5', /offset/],
    ['start_date=yesterday', /start_date/],
    ['start_date=2024-02-03&end_date=2024-02-02', /start_date must be before end_date/],
    ['email=not-an-address', /email must be an email address/],
    [`email=${'x'.repeat(250)}@example.com`, /254/],
    ['email=a@b.c&email=d@e.f', /email must be one address/],
  ])('refuses %s', async (query, message) => {
    const { status, body } = await get(`/email/hard_bounces?${query}`);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });
});

describe('credentials', () => {
  it.each([
    ['/sms/invalid_phone_numbers', 'sms.invalid_phone_numbers'],
    ['/email/hard_bounces', 'email.hard_bounces'],
  ])('%s needs a key with %s', async (url, permission) => {
    const missing = await get(url, null);
    expect(missing.status).toBe(401);
    expect(missing.body.message).toMatch(/API key/);
    const wrong = await get(url, 'key_not-a-real-key');
    expect(wrong.status).toBe(401);
    const bare = await get(url, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain(permission);
    const ok = await get(url);
    expect(Number(ok.headers['x-ratelimit-limit'])).toBe(250000);
  });
});
