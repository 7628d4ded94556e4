import type { FastifyInstance } from 'fastify';

/** Called with the route (as registered) and status of every answer. */
export type ResponseObserver = (method: string, url: string, status: number) => void;

/** Every answer carries its request id as X-Request-Id; when an observer is given, it sees every answer's status. */
export function registerResponseHooks(app: FastifyInstance, observe: ResponseObserver | undefined): void {
  app.addHook('onSend', async (req, reply) => {
    reply.header('X-Request-Id', req.id);
  });
  if (observe) {
    app.addHook('onResponse', async (req, reply) => {
      if (req.routeOptions.url) observe(req.method, req.routeOptions.url, reply.statusCode);
    });
  }
}
