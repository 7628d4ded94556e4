import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackRefusedError, postCallback } from '../../src/pipelines/exports/finish/callback.js';
import { callbackPolicy, callbackRefusal, isPrivateAddress } from '../../src/pipelines/exports/request/request-body.js';

let receiver: Server;
let port: number;
const received: unknown[] = [];
let answer = 200;

beforeAll(async () => {
  receiver = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      received.push(JSON.parse(data));
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  port = (receiver.address() as AddressInfo).port;
});
afterAll(() => receiver?.close());

const strict = callbackPolicy({ CALLBACK_ALLOW_PRIVATE: false, CALLBACK_ALLOWED_HOSTS: '' });

describe('export callbacks', () => {
  it('classifies private, loopback and link-local addresses', () => {
    for (const a of [
      '127.0.0.1',
      '10.0.0.1',
      '172.16.5.4',
      '192.168.1.1',
      '169.254.169.254',
      '100.64.0.1',
      '0.0.0.0',
      '::1',
      'fd00::1',
      'fe80::1',
      '::ffff:127.0.0.1',
    ]) {
      expect(isPrivateAddress(a), a).toBe(true);
    }
    for (const a of ['8.8.8.8', '172.32.0.1', '2001:4860:4860::8888']) expect(isPrivateAddress(a), a).toBe(false);
  });

  it('refuses a loopback address, and a name that resolves only to one, without sending anything', async () => {
    await expect(postCallback(`http://127.0.0.1:${port}/cb`, { success: true }, strict)).rejects.toBeInstanceOf(
      CallbackRefusedError,
    );
    // The machine's own name passes the URL check but resolves to loopback: refused at connect time.
    const name = hostname();
    expect(callbackRefusal(`http://${name}:${port}/cb`, strict)).toBeNull();
    await expect(postCallback(`http://${name}:${port}/cb`, { success: true }, strict)).rejects.toBeInstanceOf(
      CallbackRefusedError,
    );
    expect(received).toEqual([]);
  });

  it('delivers to a host the operator allows, and rejects a non-2xx answer so the job retries', async () => {
    const allowed = callbackPolicy({
      CALLBACK_ALLOW_PRIVATE: false,
      CALLBACK_ALLOWED_HOSTS: ` ${hostname()} , other.example `,
    });
    expect(await postCallback(`http://${hostname()}:${port}/cb`, { success: true, url: 'u' }, allowed)).toBe(200);
    expect(received).toEqual([{ success: true, url: 'u' }]);
    answer = 500;
    await expect(
      postCallback(`http://${hostname()}:${port}/cb`, { success: false, error: 'e' }, allowed),
    ).rejects.toThrow(/HTTP 500/);
    const open = callbackPolicy({ CALLBACK_ALLOW_PRIVATE: true, CALLBACK_ALLOWED_HOSTS: '' });
    answer = 204;
    expect(await postCallback(`http://127.0.0.1:${port}/cb`, { success: true }, open)).toBe(204);
  });
});
