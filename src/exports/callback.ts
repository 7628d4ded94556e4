import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import { isPrivateAddress, type CallbackPolicy } from './request.js';

/** A callback that must not be retried: the operator does not allow its address. */
export class CallbackRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CallbackRefusedError';
  }
}

const TIMEOUT_MS = 10_000;

/**
 * Resolves like dns.lookup but refuses private and loopback addresses, so the check applies to the address actually
 * connected to (a name that resolves to an internal address is refused, whatever it looked like).
 */
function guardedLookup(policy: CallbackPolicy, host: string): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const allowed = policy.allowPrivate || policy.allowedHosts.has(host) ? addresses : addresses.filter((a) => !isPrivateAddress(a.address));
      if (allowed.length === 0) {
        return callback(new CallbackRefusedError(`callback host ${host} resolves only to private or loopback addresses`), '', 0);
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
      return callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

/** POSTs the JSON body; resolves on 2xx, rejects otherwise (the job retries with backoff). */
export function postCallback(endpoint: string, body: unknown, policy: CallbackPolicy): Promise<number> {
  const url = new URL(endpoint);
  const host = url.hostname.replace(/^\[|\]$/g, '').toLowerCase();
  if (!policy.allowPrivate && !policy.allowedHosts.has(host) && (host === 'localhost' || isPrivateAddress(host))) {
    return Promise.reject(new CallbackRefusedError(`callback host ${host} is a private or loopback address`));
  }
  const payload = Buffer.from(JSON.stringify(body));
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      url,
      {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'content-length': payload.length, 'user-agent': 'ces-export-callback/1' },
        lookup: guardedLookup(policy, host),
        timeout: TIMEOUT_MS,
      },
      (res) => {
        res.resume();
        res.on('end', () => {
          const status = res.statusCode ?? 0;
          if (status >= 200 && status < 300) resolve(status);
          else reject(new Error(`callback answered HTTP ${status}`));
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`callback timed out after ${TIMEOUT_MS} ms`)));
    req.on('error', (err) => reject((err as { cause?: unknown }).cause instanceof CallbackRefusedError ? (err as { cause: Error }).cause : err));
    req.end(payload);
  });
}
