import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicBaseUrl } from '../platform/config.js';
import { AppError, statusOf } from '../platform/errors.js';
import { PAGE_PATH, verifyPageLink } from '../features/preference-centers/links.js';
import { preferenceCenterPage, submitPreferenceCenter } from '../features/preference-centers/page.js';
import { messagePage } from '../features/preference-centers/render.js';

/**
 * The users' preference center pages, public: the signed token in the path is the credential
 * (src/features/preference-centers/links.ts). GET shows the page; the page's form POSTs back to the same address and
 * gets the confirmation page. Refusals are pages too (a person reads them), never JSON.
 */

const PageParams = z.object({ token: z.string().min(1).max(1000) });
/** A form field may repeat; the last value counts. Fields are short: a state, an id. */
const MAX_FORM_FIELDS = 500;
const FORM_BYTES = 64 * 1024;

const pageConfig = { auth: 'none' as const, errors: [403, 404] };
/** The form's body: a refused form (400), one too large (413), or not a form nor JSON (415). */
const formConfig = { auth: 'none' as const, errors: [400, 403, 404, 413, 415] };

/**
 * A page, with the headers a page of someone else's HTML on the API's own origin needs: sandboxed (scripts and its
 * form run, but in an origin of their own, so the page's script can reach nothing of the API's origin with a
 * browser's stored credentials), never framed, never cached, and no Referer (the address is the credential) to the
 * images and icons it loads.
 */
function sendPage(reply: FastifyReply, status: number, html: string): FastifyReply {
  return reply
    .code(status)
    .type('text/html; charset=utf-8')
    .header('content-security-policy', "sandbox allow-scripts allow-forms allow-popups; frame-ancestors 'none'")
    .header('x-content-type-options', 'nosniff')
    .header('referrer-policy', 'no-referrer')
    .header('cache-control', 'no-store')
    .send(html);
}

/** Our refusals as pages; anything else (a fault, a dependency away) goes to the one error handler. */
function sendRefusal(reply: FastifyReply, err: unknown): FastifyReply {
  if (!(err instanceof AppError) || statusOf(err.code) >= 500) throw err;
  const title = err.code === 'bad_request' ? 'Your choices were not saved' : 'This link does not work';
  return sendPage(reply, statusOf(err.code), messagePage(title, err.message));
}

const preferenceCenterPageRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  // Only these routes take form bodies: this plugin's scope is theirs alone.
  app.addContentTypeParser(
    'application/x-www-form-urlencoded',
    { parseAs: 'string', bodyLimit: FORM_BYTES },
    (_req, body, done) => {
      const params = new URLSearchParams(body as string);
      const form: Record<string, string> = Object.create(null) as Record<string, string>;
      let n = 0;
      for (const [k, v] of params) {
        if (++n > MAX_FORM_FIELDS) return done(new AppError('bad_request', 'This form has too many fields'), undefined);
        form[k] = v;
      }
      done(null, { ...form });
    },
  );
  /** The page `render` makes for a link's token, or the refusal page (an altered or expired link, a refused form). */
  const answerPage = async (
    reply: FastifyReply,
    token: string,
    render: (link: ReturnType<typeof verifyPageLink>, url: string) => Promise<string>,
  ) => {
    try {
      const link = verifyPageLink(app.ctx.config, token);
      return sendPage(reply, 200, await render(link, `${publicBaseUrl(app.ctx.config)}${PAGE_PATH}/${token}`));
    } catch (err) {
      return sendRefusal(reply, err);
    }
  };

  app.get(
    `${PAGE_PATH}/:token`,
    {
      config: pageConfig,
      schema: {
        summary: "A user's preference center page",
        description: 'The address GET /preference_center/v1/{id}/url/{userID} gives. 403 when altered or expired.',
        tags: ['preference centers'],
        params: PageParams,
        security: [],
      },
    },
    (req, reply) => answerPage(reply, req.params.token, (link, url) => preferenceCenterPage(app.ctx.pool, link, url)),
  );
  app.post(
    `${PAGE_PATH}/:token`,
    {
      config: formConfig,
      schema: {
        summary: "A user's preference center form",
        description:
          'The form of the page (application/x-www-form-urlencoded): records the choices, answers the confirmation page.',
        tags: ['preference centers'],
        params: PageParams,
        security: [],
      },
    },
    (req, reply) =>
      answerPage(reply, req.params.token, (link, url) =>
        submitPreferenceCenter(app.ctx.pool, link, url, (req.body ?? {}) as Record<string, string>),
      ),
  );
};

export default preferenceCenterPageRoutes;
