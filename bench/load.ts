/**
 * The benchmarks' HTTP load client: HTTP/1.1 over kept-alive sockets, sending prebuilt request bytes and reading
 * only a response's status line and Content-Length.
 *
 * Why not node:http: the load generator shares the two cores with the service it measures. Through node:http it
 * spent about 0.5 ms of CPU a request (3.1-4.9 s in a 30 s phase at 250 requests/s), time taken from the service;
 * and a reply that reaches a busy client is read late, which the client then counts as the service's latency. In
 * the slowest 1% of one such phase, 28 of the 109 ms went by between the service's last byte and the client's
 * reading of it (measured with the service's own http.server diagnostics channels).
 */
import net from 'node:net';

export interface Reply {
  status: number;
  /** From just before the request's first byte was written to the reply's last byte being read. */
  ms: number;
  body: Buffer;
}

/** The bytes of one HTTP/1.1 request with a JSON body. */
export function requestBytes(method: string, pathname: string, headers: Record<string, string>, body: string): Buffer {
  const head = [
    `${method} ${pathname} HTTP/1.1`,
    'host: 127.0.0.1',
    'content-type: application/json',
    `content-length: ${Buffer.byteLength(body)}`,
  ];
  for (const [name, value] of Object.entries(headers)) head.push(`${name}: ${value}`);
  return Buffer.concat([Buffer.from(`${head.join('\r\n')}\r\n\r\n`, 'latin1'), Buffer.from(body)]);
}

const HEADER_END = Buffer.from('\r\n\r\n');

interface Pending {
  started: number;
  resolve: (reply: Reply) => void;
  reject: (err: Error) => void;
}

/** One kept-alive socket carrying one request at a time. */
class Connection {
  private buffered: Buffer = Buffer.alloc(0);
  private pending: Pending | null = null;

  constructor(
    readonly socket: net.Socket,
    private readonly done: (conn: Connection, reusable: boolean) => void,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.read(chunk));
    const fail = (err: Error) => {
      const pending = this.pending;
      this.pending = null;
      this.done(this, false);
      pending?.reject(err);
    };
    socket.on('error', fail);
    socket.on('close', () => fail(new Error('connection closed before the reply')));
  }

  send(request: Buffer, pending: Pending): void {
    this.pending = pending;
    this.socket.write(request);
  }

  private read(chunk: Buffer): void {
    this.buffered = this.buffered.length === 0 ? chunk : Buffer.concat([this.buffered, chunk]);
    const headerEnd = this.buffered.indexOf(HEADER_END);
    if (headerEnd < 0) return;
    const head = this.buffered.toString('latin1', 0, headerEnd);
    const length = /\r\ncontent-length:\s*(\d+)/i.exec(head);
    // The service answers every request with a Content-Length (Fastify does for the JSON it sends).
    if (!length) {
      this.socket.destroy(new Error(`reply without content-length: ${head.split('\r\n')[0]}`));
      return;
    }
    const end = headerEnd + HEADER_END.length + Number(length[1]);
    if (this.buffered.length < end) return;
    const reply = {
      status: Number(head.slice(9, 12)),
      ms: performance.now() - this.pending!.started,
      body: this.buffered.subarray(headerEnd + HEADER_END.length, end),
    };
    const closing = /\r\nconnection:\s*close/i.test(head);
    this.buffered = Buffer.alloc(0);
    const pending = this.pending!;
    this.pending = null;
    if (closing) this.socket.end();
    this.done(this, !closing);
    pending.resolve(reply);
  }
}

/**
 * Requests to one host and port over up to `maxConnections` sockets: an idle one when there is one, else a new one
 * (an open-loop phase never waits for a socket, as with node:http's Agent and maxSockets 256).
 */
export class LoadClient {
  private readonly idle: Connection[] = [];
  private readonly all = new Set<Connection>();
  private waiting: (() => void)[] = [];

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly maxConnections = 256,
  ) {}

  async send(request: Buffer): Promise<Reply> {
    const started = performance.now();
    const conn = await this.connection();
    return new Promise((resolve, reject) => conn.send(request, { started, resolve, reject }));
  }

  private async connection(): Promise<Connection> {
    const idle = this.idle.pop();
    if (idle) return idle;
    if (this.all.size >= this.maxConnections) {
      await new Promise<void>((r) => this.waiting.push(r));
      return this.connection();
    }
    const socket = net.connect(this.port, this.host);
    const conn = new Connection(socket, (c, reusable) => this.release(c, reusable));
    this.all.add(conn);
    await new Promise<void>((resolve, reject) => {
      socket.once('connect', resolve);
      socket.once('error', reject);
    });
    return conn;
  }

  private release(conn: Connection, reusable: boolean): void {
    if (reusable) this.idle.push(conn);
    else if (this.all.delete(conn)) {
      const at = this.idle.indexOf(conn);
      if (at >= 0) this.idle.splice(at, 1);
    }
    this.waiting.shift()?.();
  }

  close(): void {
    for (const conn of this.all) conn.socket.destroy();
    this.all.clear();
    this.idle.length = 0;
  }
}
