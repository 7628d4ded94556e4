import { z } from 'zod';

/** Schemas shared by several route families. */

export const MessageResponse = z.object({ message: z.string() });

/** `page` from 0, as the list endpoints take it; a non-integer or negative page is refused. */
export const PageParam = z.coerce
  .number({ error: 'page must be an integer of 0 or more' })
  .int('page must be an integer of 0 or more')
  .min(0, 'page must be an integer of 0 or more')
  .default(0);

export const SortDirectionParam = z.enum(['asc', 'desc'], { error: "sort_direction must be 'asc' or 'desc'" }).default('asc');

/** Query booleans arrive as strings. */
export const QueryBoolean = z
  .enum(['true', 'false'], { error: "must be 'true' or 'false'" })
  .transform((v) => v === 'true');

export const LIST_PAGE_SIZE = 100;
