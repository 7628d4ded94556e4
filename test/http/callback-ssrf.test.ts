import { lookup } from 'node:dns/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackRefusedError, postCallback } from '../../src/pipelines/exports/finish/callback.js';
import { callbackPolicy, callbackRefusal, isPrivateAddress } from '../../src/pipelines/exports/request/request-body.js';
import { classifyAddress } from '../../src/platform/lib/ip-address.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, requestExport } from '../helpers/export-fixtures.js';

const strict = callbackPolicy({ CALLBACK_ALLOW_PRIVATE: false, CALLBACK_ALLOWED_HOSTS: '' });
const open = callbackPolicy({ CALLBACK_ALLOW_PRIVATE: true, CALLBACK_ALLOWED_HOSTS: '' });

// Every spelling of a loopback or unspecified address that a URL can carry; {P} is the receivers' port.
const LOOPBACK_SPELLINGS = [
  'http://[::ffff:127.0.0.1]:{P}/x',
  'http://[0:0:0:0:0:ffff:7f00:1]:{P}/x',
  'http://[::ffff:7f00:1]:{P}/x',
  'http://[::FFFF:127.0.0.1]:{P}/x',
  'http://[::127.0.0.1]:{P}/x',
  'http://[::ffff:0:7f00:1]:{P}/x',
  'http://[64:ff9b::7f00:1]:{P}/x',
  'http://[64:ff9b:1::7f00:1]:{P}/x',
  'http://[2002:7f00:1::]:{P}/x',
  'http://[2001:0:0:0:0:0:80ff:fffe]:{P}/x',
  'http://127.1:{P}/x',
  'http://0x7f000001:{P}/x',
  'http://2130706433:{P}/x',
  'http://0177.0.0.1:{P}/x',
  'http://0.0.0.0:{P}/x',
  'http://[::]:{P}/x',
  'http://[::1]:{P}/x',
  'http://[0:0:0:0:0:0:0:1]:{P}/x',
  'https://[::ffff:127.0.0.1]:{P}/x',
];

describe('the address classifier', () => {
  const publicAddresses = [
    '8.8.8.8',
    '1.1.1.1',
    '172.32.0.1',
    '100.128.0.1',
    '198.20.0.1',
    '223.255.255.255',
    '2606:4700:4700::1111',
    '2001:4860:4860::8888',
    '2001:4860:4860:0:0:0:0:8888',
    '64:ff9b::808:808',
    '64:ff9b::8.8.8.8',
    '2002:0808:0808::1',
    '::ffff:8.8.8.8',
  ];
  const refused: Array<[string, string]> = [
    ['0.0.0.0', 'this-network'],
    ['0.1.2.3', 'this-network'],
    ['10.0.0.1', 'private'],
    ['100.64.0.1', 'shared'],
    ['100.127.255.255', 'shared'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['169.254.169.254', 'link-local'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'ietf-protocol'],
    ['192.0.2.1', 'documentation'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['198.51.100.7', 'documentation'],
    ['203.0.113.9', 'documentation'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
    ['::', 'unspecified'],
    ['0:0:0:0:0:0:0:0', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fc00::1', 'unique-local'],
    ['fd12:3456::1', 'unique-local'],
    ['fe80::1', 'link-local'],
    ['FE80::1%eth0', 'link-local'],
    ['febf::1', 'link-local'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['100::1', 'discard'],
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['::FFFF:7F00:0001', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:1', 'loopback'],
    ['0000:0000:0000:0000:0000:ffff:127.0.0.1', 'loopback'],
    ['::ffff:10.0.0.1', 'private'],
    ['::ffff:169.254.169.254', 'link-local'],
    ['::127.0.0.1', 'loopback'],
    ['::7f00:1', 'loopback'],
    ['::a00:1', 'private'],
    ['::ffff:0:7f00:1', 'loopback'],
    ['::ffff:0:10.1.2.3', 'private'],
    ['64:ff9b::7f00:1', 'loopback'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a9fe:a9fe', 'link-local'],
    ['64:ff9b:1::808:808', 'nat64-local'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:101::1', 'private'],
    ['2001:0:4136:e378:8000:63bf:80ff:fffe', 'teredo'],
    ['2001::1', 'teredo'],
    ['::2', 'this-network'],
    ['400::1', 'reserved'],
  ];

  it.each(publicAddresses)('allows %s', (a) => {
    expect(classifyAddress(a)).toBe('public');
    expect(isPrivateAddress(a)).toBe(false);
  });

  it.each(refused)('refuses %s (%s)', (a, kind) => {
    expect(isPrivateAddress(a)).toBe(true);
    expect(classifyAddress(a)).toBe(kind);
  });

  it('takes only what Node takes for an IP literal', () => {
    for (const text of [
      'example.com',
      'localhost',
      '127.1',
      '0x7f000001',
      '2130706433',
      '01.2.3.4',
      '1.2.3.256',
      '[::1]',
      '',
      ':::1',
    ]) {
      expect(classifyAddress(text), text).toBeNull();
      expect(isPrivateAddress(text), text).toBe(false);
    }
  });
});

/** A server that records every request it receives, whatever it is. */
function recorder(received: string[]): Server {
  return createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      received.push(`${req.method} ${req.url} ${data}`);
      res.writeHead(204).end();
    });
  });
}

function listen(server: Server, port: number, host: string): Promise<void> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
}

async function refusalOf(promise: Promise<unknown>): Promise<Error> {
  try {
    await promise;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a refusal, the callback was delivered');
}

/** The machine's own name when the system resolver maps it to loopback only (/etc/hosts does here), else null. */
async function loopbackName(): Promise<string | null> {
  const name = hostname();
  if (name.toLowerCase() === 'localhost') return null;
  try {
    const addresses = await lookup(name, { all: true });
    return addresses.length > 0 && addresses.every((a) => classifyAddress(a.address) === 'loopback') ? name : null;
  } catch {
    return null;
  }
}

const NO_LOOPBACK_NAME = 'SKIPPED: no name other than localhost resolves to loopback on this machine';
const nameToLoopback = await loopbackName();
if (!nameToLoopback) console.warn(NO_LOOPBACK_NAME);

describe('callbacks at send time', () => {
  const received: string[] = [];
  const v4 = recorder(received);
  const v6 = recorder(received);
  let port = 0;
  let hasV6 = false;

  beforeAll(async () => {
    await listen(v4, 0, '127.0.0.1');
    port = (v4.address() as AddressInfo).port;
    // The same port on ::1, so that whichever family a spelling reaches, a receiver records it.
    try {
      await listen(v6, port, '::1');
      hasV6 = true;
    } catch (err) {
      console.warn(
        `no IPv6 loopback receiver (${(err as Error).message}): [::1] spellings are refused but not proven unreached`,
      );
    }
  });
  afterAll(async () => {
    await new Promise((r) => v4.close(r));
    if (hasV6) await new Promise((r) => v6.close(r));
  });

  for (const spelling of LOOPBACK_SPELLINGS) {
    it(`refuses ${spelling} and sends nothing`, async () => {
      const endpoint = `${spelling.replace('{P}', String(port))}?token=s3cret`;
      const before = received.length;
      const err = await refusalOf(postCallback(endpoint, { success: true }, strict));
      expect(received.slice(before)).toEqual([]);
      expect(err).toBeInstanceOf(CallbackRefusedError);
      expect(err.message).not.toContain('s3cret');
    });
  }

  it.skipIf(!nameToLoopback)(
    `refuses a name the system resolver maps to loopback (${nameToLoopback ?? NO_LOOPBACK_NAME}), and sends nothing`,
    async () => {
      const endpoint = `http://${nameToLoopback}:${port}/x?token=s3cret`;
      // A name passes the URL check; what it resolves to is refused when the callback is sent.
      expect(callbackRefusal(endpoint, strict)).toBeNull();
      const before = received.length;
      const err = await refusalOf(postCallback(endpoint, { success: true }, strict));
      expect(received.slice(before)).toEqual([]);
      expect(err).toBeInstanceOf(CallbackRefusedError);
      expect(err.message).not.toContain('s3cret');
    },
  );

  it('delivers to the same receivers when the operator allows private addresses, so the guard is what refused', async () => {
    received.length = 0;
    expect(await postCallback(`http://127.0.0.1:${port}/a`, { n: 1 }, open)).toBe(204);
    expect(await postCallback(`http://[::ffff:127.0.0.1]:${port}/b`, { n: 2 }, open)).toBe(204);
    const expected = ['POST /a {"n":1}', 'POST /b {"n":2}'];
    if (hasV6) {
      expect(await postCallback(`http://[::1]:${port}/c`, { n: 3 }, open)).toBe(204);
      expected.push('POST /c {"n":3}');
    }
    if (nameToLoopback) {
      const allowed = callbackPolicy({ CALLBACK_ALLOW_PRIVATE: false, CALLBACK_ALLOWED_HOSTS: nameToLoopback });
      expect(await postCallback(`http://${nameToLoopback}:${port}/d`, { n: 4 }, allowed)).toBe(204);
      expected.push('POST /d {"n":4}');
    }
    expect(received).toEqual(expected);
  });

  it('treats a redirect as a failure and never follows it', async () => {
    received.length = 0;
    const hits: string[] = [];
    const redirecting = createServer((req, res) => {
      hits.push(req.url ?? '');
      res.writeHead(302, { location: `http://127.0.0.1:${port}/followed` }).end();
    });
    await listen(redirecting, 0, '127.0.0.1');
    try {
      const where = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}/r`;
      await expect(postCallback(where, { success: true }, open)).rejects.toThrow(/HTTP 302/);
      expect(hits).toEqual(['/r']);
      expect(received).toEqual([]);
    } finally {
      await new Promise((r) => redirecting.close(r));
    }
  });
});

describe('POST /users/export/segment refuses every loopback spelling', () => {
  const env = useTestEnv({ config: { CALLBACK_ALLOW_PRIVATE: 'false' }, workspaces: ['ws'] });

  beforeAll(async () => {
    await createSegment(env.ctx.pool, env.ws.workspaceId, 'seg-a');
  });

  async function exportsCount(): Promise<number> {
    const { rows } = await env.ctx.pool.query(`SELECT count(*)::int AS n FROM exports`);
    return rows[0].n as number;
  }

  const endpoints = [
    ...LOOPBACK_SPELLINGS.map((s) => s.replace('{P}', '8080')),
    'http://[::ffff:10.0.0.1]/x',
    'http://[::ffff:a9fe:a9fe]/latest/meta-data',
    'http://[fd00::1]/x',
    'http://localhost./x',
    'http://LOCALHOST/x',
    'http://api.localhost/x',
    'http://api.localhost./x',
  ];
  for (const endpoint of endpoints) {
    it(`400 for ${endpoint}, with nothing queued`, async () => {
      const before = await exportsCount();
      const res = await requestExport(env, env.ws.apiKey, {
        segment_id: 'seg-a',
        fields_to_export: ['external_id'],
        callback_endpoint: endpoint,
      });
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(/private or loopback/);
      expect(await exportsCount()).toBe(before);
    });
  }
});
