import { lookup as dnsLookup, type LookupAddress } from 'node:dns';
import http from 'node:http';
import https from 'node:https';
import net, { isIP, type LookupFunction } from 'node:net';
import tls from 'node:tls';
import { urlHost } from '../../../platform/lib/ip-address.js';
import { callbackRefusal, isPrivateAddress, type CallbackPolicy } from '../request/request-body.js';

/** A callback that must not be retried: the operator does not allow its address. */
export class CallbackRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CallbackRefusedError';
  }
}

/** The whole exchange, connection included, must end within this. */
const TIMEOUT_MS = 10_000;

/**
 * Resolves like dns.lookup but drops private and loopback addresses, refusing a name that has nothing else, so the
 * socket only ever connects to an approved address (no second resolution can swap it).
 */
function guardedLookup(host: string): LookupFunction {
  return (hostname, options, callback) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses: LookupAddress[]) => {
      if (err) return callback(err, '', 0);
      const allowed = addresses.filter((a) => !isPrivateAddress(a.address));
      if (allowed.length === 0) {
        return callback(
          new CallbackRefusedError(`callback host ${host} resolves only to private or loopback addresses`),
          '',
          0,
        );
      }
      if (options.all) return (callback as unknown as (e: null, a: LookupAddress[]) => void)(null, allowed);
      return callback(null, allowed[0]!.address, allowed[0]!.family);
    });
  };
}

function refusalIn(err: unknown): Error {
  const cause = (err as { cause?: unknown }).cause;
  return cause instanceof CallbackRefusedError ? cause : (err as Error);
}

/**
 * Opens the connection and checks the peer's address before any byte goes out (TLS hello included). Node does not
 * call `lookup` for an IP literal, and the literal check happens before; this check of the address actually connected
 * to is the backstop whatever the host was. Resolves to the socket (TLS once its handshake is done).
 */
function connectChecked(url: URL, host: string, trusted: boolean, signal: AbortSignal): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const port = Number(url.port) || (url.protocol === 'https:' ? 443 : 80);
    const socket = net.connect({ host, port, ...(trusted ? {} : { lookup: guardedLookup(host) }) });
    let secure: tls.TLSSocket | undefined;
    const fail = (err: unknown) => {
      signal.removeEventListener('abort', onAbort);
      secure?.destroy();
      socket.destroy();
      reject(refusalIn(err));
    };
    const onAbort = () => fail(new Error(`callback timed out after ${TIMEOUT_MS} ms`));
    // The error listeners stay: until the request takes the socket over, an error must not go unheard.
    const done = (s: net.Socket) => {
      signal.removeEventListener('abort', onAbort);
      resolve(s);
    };
    signal.addEventListener('abort', onAbort, { once: true });
    socket.once('error', fail);
    socket.once('connect', () => {
      const remote = socket.remoteAddress;
      if (!trusted && (!remote || isPrivateAddress(remote))) {
        return fail(new CallbackRefusedError(`callback host ${host} connected to a private or loopback address`));
      }
      if (url.protocol !== 'https:') return done(socket);
      secure = tls.connect({ socket, host, servername: isIP(host) ? undefined : host, ALPNProtocols: ['http/1.1'] });
      secure.once('error', fail);
      secure.once('secureConnect', () => done(secure!));
    });
  });
}

/**
 * POSTs the JSON body; resolves on 2xx, rejects otherwise (the job retries with backoff), and never follows a
 * redirect. A host the policy does not allow is refused with CallbackRefusedError, before anything is sent.
 */
export async function postCallback(endpoint: string, body: unknown, policy: CallbackPolicy): Promise<number> {
  const refusal = callbackRefusal(endpoint, policy);
  if (refusal) throw new CallbackRefusedError(refusal);
  const url = new URL(endpoint);
  const host = urlHost(url);
  const trusted = policy.allowPrivate || policy.allowedHosts.has(host);
  const signal = AbortSignal.timeout(TIMEOUT_MS);
  const socket = await connectChecked(url, host, trusted, signal);
  const payload = Buffer.from(JSON.stringify(body));
  const client = url.protocol === 'https:' ? https : http;
  return new Promise((resolve, reject) => {
    const req = client.request(
      url,
      {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'content-length': payload.length,
          'user-agent': 'ces-export-callback/1',
        },
        defaultPort: url.protocol === 'https:' ? 443 : 80,
        // The socket is already connected to a checked address; no agent, so it is never pooled or reused.
        createConnection: () => socket,
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
    const onAbort = () => req.destroy(new Error(`callback timed out after ${TIMEOUT_MS} ms`));
    signal.addEventListener('abort', onAbort, { once: true });
    req.on('close', () => signal.removeEventListener('abort', onAbort));
    req.on('error', reject);
    req.end(payload);
  });
}
