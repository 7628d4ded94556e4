import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import {
  DELIVERABILITY_DEFAULT_LIMIT,
  DELIVERABILITY_MAX_LIMIT,
  MAX_FILTER_VALUES,
} from '../platform/lib/list-page.js';
import { listHardBounces } from '../features/subscriptions/hard-bounces.js';
import { listSpam } from '../features/subscriptions/spam.js';
import { listUnsubscribes } from '../features/subscriptions/unsubscribes.js';
import { E164, listInvalidPhoneNumbers } from '../features/subscriptions/invalid-phone-numbers.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { QueryStringList, mergeArrayParam, queryInteger, queryUtcDate } from '../platform/http/schemas.js';

const rangeAndPage = {
  start_date: queryUtcDate('start_date').optional(),
  end_date: queryUtcDate('end_date').optional(),
  limit: queryInteger('limit', 1, DELIVERABILITY_MAX_LIMIT).default(DELIVERABILITY_DEFAULT_LIMIT),
  offset: queryInteger('offset', 0).default(0),
};

function checkRange(q: { start_date?: Date; end_date?: Date }, ctx: z.RefinementCtx): void {
  if (q.start_date && q.end_date && q.start_date >= q.end_date) {
    ctx.addIssue({ code: 'custom', path: ['start_date'], message: 'start_date must be before end_date' });
  }
}

// An unencoded `+` in a query string arrives as a space; E.164 numbers always start with `+`, and addresses never
// contain spaces, so a space is put back as the `+` the client meant.
const plusFromSpace = (s: string) => s.replace(/ /g, '+');

export const InvalidPhoneNumbersQuery = z
  .object({
    ...rangeAndPage,
    phone_numbers: QueryStringList,
    'phone_numbers[]': QueryStringList,
    reason: z
      .enum(['provider_error', 'deactivated'], { error: "reason must be 'provider_error' or 'deactivated'" })
      .optional(),
  })
  .superRefine(checkRange)
  .transform(({ phone_numbers: plain, 'phone_numbers[]': bracketed, ...rest }, ctx) => {
    const phoneNumbers = mergeArrayParam(plain, bracketed).map(plusFromSpace);
    if (phoneNumbers.length > MAX_FILTER_VALUES) {
      ctx.addIssue({
        code: 'custom',
        path: ['phone_numbers'],
        message: `phone_numbers takes at most ${MAX_FILTER_VALUES} numbers`,
      });
    }
    const bad = phoneNumbers.find((p) => !E164.test(p));
    if (bad !== undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['phone_numbers'],
        message: `phone_numbers must be E.164 numbers such as +15555550123; got ${JSON.stringify(bad.slice(0, 32))}`,
      });
    }
    return { ...rest, phone_numbers: phoneNumbers };
  });

export const HardBouncesQuery = z
  .object({
    ...rangeAndPage,
    email: z
      .string({ error: 'email must be one address' })
      .max(254, 'email is at most 254 characters')
      .transform(plusFromSpace)
      .pipe(z.string().regex(/^[^\s@]+@[^\s@]+$/, 'email must be an email address'))
      .optional(),
  })
  .superRefine(checkRange);

export const UnsubscribesQuery = z
  .object({
    ...rangeAndPage,
    sort_direction: z.enum(['asc', 'desc'], { error: "sort_direction must be 'asc' or 'desc'" }).default('desc'),
    email: z
      .string({ error: 'email must be one address' })
      .max(254, 'email is at most 254 characters')
      .transform(plusFromSpace)
      .pipe(z.string().regex(/^[^\s@]+@[^\s@]+$/, 'email must be an email address'))
      .optional(),
  })
  .superRefine(checkRange);

export const SpamResponse = z.object({
  emails: z.array(z.object({ email: z.string(), reported_at: z.string() })),
  message: z.string(),
});

export const InvalidPhoneNumbersResponse = z.object({
  sms: z.array(z.object({ phone: z.string(), invalid_detected_at: z.string(), reason: z.string() })),
  message: z.string(),
});
export const HardBouncesResponse = z.object({
  emails: z.array(z.object({ email: z.string(), unsubscribed_at: z.string() })),
  message: z.string(),
});

const paging =
  `Newest first, ties in insertion order. start_date and end_date (YYYY-MM-DD) are midnight UTC; the range is [start_date, end_date). ` +
  `limit defaults to ${DELIVERABILITY_DEFAULT_LIMIT} (at most ${DELIVERABILITY_MAX_LIMIT}); raise offset until fewer than limit entries return.`;

/** GET /email/spam: the spam list, beyond the original. */
function spamRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/email/spam',
    {
      config: { permission: 'email.spam', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Addresses on the spam list',
        description:
          `${paging} Filter with email (case-insensitive). Beyond the original, which edits its spam list (POST /email/spam/remove) ` +
          'but has no call that reads it.',
        tags: ['deliverability'],
        querystring: HardBouncesQuery,
        response: { 200: SpamResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const emails = await listSpam(app.ctx.pool, apiKeyOf(req).workspaceId, {
        start: q.start_date,
        end: q.end_date,
        limit: q.limit,
        offset: q.offset,
        email: q.email,
      });
      return { emails, message: 'success' };
    },
  );
}

/** GET /email/unsubscribes */
function unsubscribesRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/email/unsubscribes',
    {
      config: { permission: 'email.unsubscribe', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Unsubscribed email addresses',
        description:
          `${paging.replace('Newest first, ties in insertion order.', 'Newest first (sort_direction=asc: oldest first), ties by address.')} ` +
          'Each address once, at its latest unsubscription, whether unsubscribed per address (POST /email/status) or on a profile ' +
          '(email_subscribe in an attributes object). Filter with email (case-insensitive).',
        tags: ['deliverability'],
        querystring: UnsubscribesQuery,
        response: { 200: HardBouncesResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const emails = await listUnsubscribes(app.ctx.pool, apiKeyOf(req).workspaceId, {
        start: q.start_date,
        end: q.end_date,
        limit: q.limit,
        offset: q.offset,
        email: q.email,
        ascending: q.sort_direction === 'asc',
      });
      return { emails, message: 'success' };
    },
  );
}

const deliverabilityRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/sms/invalid_phone_numbers',
    {
      config: { permission: 'sms.invalid_phone_numbers', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Invalid phone numbers',
        description: `${paging} Filter with phone_numbers[] (E.164) and reason.`,
        tags: ['deliverability'],
        querystring: InvalidPhoneNumbersQuery,
        response: { 200: InvalidPhoneNumbersResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const sms = await listInvalidPhoneNumbers(app.ctx.pool, apiKeyOf(req).workspaceId, {
        start: q.start_date,
        end: q.end_date,
        limit: q.limit,
        offset: q.offset,
        phoneNumbers: q.phone_numbers,
        reason: q.reason,
      });
      return { sms, message: 'success' };
    },
  );
  app.get(
    '/email/hard_bounces',
    {
      config: { permission: 'email.hard_bounces', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Hard-bounced email addresses',
        description: `${paging} Filter with email (case-insensitive).`,
        tags: ['deliverability'],
        querystring: HardBouncesQuery,
        response: { 200: HardBouncesResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const emails = await listHardBounces(app.ctx.pool, apiKeyOf(req).workspaceId, {
        start: q.start_date,
        end: q.end_date,
        limit: q.limit,
        offset: q.offset,
        email: q.email,
      });
      return { emails, message: 'success' };
    },
  );
  spamRoute(base);
  unsubscribesRoute(base);
};

export default deliverabilityRoutes;
