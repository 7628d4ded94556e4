import { z } from 'zod';
import { queryInteger, queryIsoTime } from '../platform/http/schemas.js';
import { DAY_MS } from '../platform/lib/iso-time.js';

/** The query every daily series takes (the KPI series, and the event and purchase series with `unit`). */
export const DailySeriesQuery = z.object({
  length: z.string({ error: 'length is required: an integer from 1 to 100' }).pipe(queryInteger('length', 1, 100)),
  // A date alone names a whole day: the series ends at that day's last millisecond.
  ending_at: queryIsoTime('ending_at')
    .transform((t) => (t.hasTime ? t.date : new Date(t.date.getTime() + DAY_MS - 1)))
    .optional(),
  app_id: z
    .string({ error: 'app_id must be one app id' })
    .min(1, 'app_id must not be empty')
    .max(255, 'app_id is at most 255 characters')
    .optional(),
});

/** A series answer: `{message, data: [{time, <key>}]}`, each API naming its value differently. */
export const seriesResponse = <K extends string>(key: K) =>
  z.object({
    message: z.string(),
    data: z.array(z.object({ time: z.string() }).extend({ [key]: z.number() } as Record<K, z.ZodNumber>)),
  });
