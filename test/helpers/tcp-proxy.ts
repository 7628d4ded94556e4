import { createConnection, createServer, type Server, type Socket } from 'node:net';

/**
 * A TCP proxy in front of a real server, on a free loopback port, that can break connections the way a dying peer
 * does: reset (RST) every open connection, or reset each new one as it arrives. What the client sees is what the
 * kernel gives it in those cases, `read ECONNRESET` with no address, not an error a test made up.
 */
export interface TcpProxy {
  port: number;
  /** Resets every connection now open through the proxy (both ends). */
  resetOpen(): number;
  /** While true, each new connection is accepted and reset at its first bytes, before any reaches the server. */
  resetNew: boolean;
  close(): Promise<void>;
}

export async function startTcpProxy(
  targetPort: number,
  targetHost = '127.0.0.1',
  /** The port to listen on: a free one by default; a given one to come back where a closed proxy was. */
  listenPort = 0,
): Promise<TcpProxy> {
  const open = new Set<{ client: Socket; upstream: Socket }>();
  const state = { resetNew: false };
  const server: Server = createServer((client) => {
    if (state.resetNew) {
      // Once the client has written its first bytes (PostgreSQL's startup message), as a server dying mid-handshake:
      // the client is inside its connect and reads ECONNRESET, with no address on the error.
      client.once('data', () => client.resetAndDestroy());
      client.on('error', () => {});
      return;
    }
    const upstream = createConnection({ port: targetPort, host: targetHost });
    const pair = { client, upstream };
    open.add(pair);
    const drop = () => {
      open.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop).on('close', drop);
    upstream.on('error', drop).on('close', drop);
    client.pipe(upstream);
    upstream.pipe(client);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(listenPort, '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as { port: number };
  return {
    port,
    get resetNew() {
      return state.resetNew;
    },
    set resetNew(value: boolean) {
      state.resetNew = value;
    },
    resetOpen() {
      const pairs = [...open];
      open.clear();
      for (const { client, upstream } of pairs) {
        client.resetAndDestroy();
        upstream.resetAndDestroy();
      }
      return pairs.length;
    },
    async close() {
      for (const { client, upstream } of open) {
        client.destroy();
        upstream.destroy();
      }
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}
