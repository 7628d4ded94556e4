import { z } from 'zod';
import { badRequest } from '../errors.js';
import { parseIsoTime } from './iso-time.js';

/** Records one internal request may carry; each kind is written in one statement per batch. */
export const MAX_RECORDS_PER_REQUEST = 5_000;

/** When the thing happened: ISO 8601 (no zone means UTC); now when omitted. */
export const RecordTime = z
  .string({ error: 'time must be an ISO 8601 time' })
  .max(64, 'time must be an ISO 8601 time')
  .transform((text, ctx) => {
    const parsed = parseIsoTime(text);
    if (!parsed) {
      ctx.addIssue({ code: 'custom', message: 'time must be an ISO 8601 time such as 2024-01-31T23:59:59Z' });
      return z.NEVER;
    }
    return parsed.date;
  })
  .optional();

/** `{records: [...]}`, 1 to MAX_RECORDS_PER_REQUEST entries. */
export function recordsBody<T extends z.ZodType>(record: T) {
  return z.strictObject({
    records: z
      .array(record, { error: 'records must be an array of record objects' })
      .min(1, 'records must hold at least one record')
      .max(MAX_RECORDS_PER_REQUEST, `records holds at most ${MAX_RECORDS_PER_REQUEST} entries a request`),
  });
}

export interface RecordResult {
  /** Records written. */
  recorded: number;
  /** Records that repeat one already stored (same address, time and reason), skipped so retries are harmless. */
  duplicates: number;
}

/** Refuses a batch naming ids the workspace does not have; names the first few, with their index. */
export function refuseUnknown(field: string, values: (string | undefined)[], known: ReadonlySet<string>): void {
  const unknown: string[] = [];
  values.forEach((v, i) => {
    if (v !== undefined && !known.has(v)) unknown.push(`records[${i}].${field} ${JSON.stringify(v)}`);
  });
  if (unknown.length === 0) return;
  const more = unknown.length > 5 ? ` and ${unknown.length - 5} more` : '';
  throw badRequest(`Unknown ${field}: ${unknown.slice(0, 5).join(', ')}${more}; nothing was recorded`);
}
