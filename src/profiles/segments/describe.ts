import type { SegmentFilter } from './filter.js';

/**
 * A segment's filter in words, for the `description` of GET /segments/details (the public API's "human-readable
 * description of filters"). One sentence, generated from the stored filter so that it never disagrees with what the
 * segment selects: `Users where country is "US" and custom event "played" done at least 3 times, the last
 * time within the past 7 days.`
 */
export function describeFilter(filter: SegmentFilter): string {
  if ('all' in filter && filter.all.length === 0) return 'All users.';
  return `Users where ${clause(filter, true)}.`;
}

type Comparison = Extract<SegmentFilter, { attribute: string }> | Extract<SegmentFilter, { custom_attribute: string }>;
type Count = Extract<SegmentFilter, { custom_event: string }> | Extract<SegmentFilter, { purchase: string }>;

const OPS: Record<string, string> = {
  eq: 'is',
  neq: 'is not',
  gt: 'is greater than',
  gte: 'is at least',
  lt: 'is less than',
  lte: 'is at most',
  contains: 'contains',
  starts_with: 'starts with',
};

/** A condition; `top` is false inside a group, where a group of several is parenthesised. */
function clause(f: SegmentFilter, top: boolean): string {
  if ('all' in f) return group(f.all, 'and', top);
  if ('any' in f) return group(f.any, 'or', top);
  if ('not' in f) return `not (${clause(f.not, true)})`;
  if ('random_bucket' in f) return randomBucket(f.random_bucket);
  if ('custom_event' in f || 'purchase' in f) return counted(f);
  return comparison(f);
}

function group(parts: SegmentFilter[], word: 'and' | 'or', top: boolean): string {
  // An empty `all` inside a group matches everyone; `any` is never empty (the schema refuses it).
  if (parts.length === 0) return 'every user';
  if (parts.length === 1) return clause(parts[0]!, top);
  const text = parts.map((p) => clause(p, false)).join(` ${word} `);
  return top ? text : `(${text})`;
}

const value = (v: string | number | boolean): string => (typeof v === 'string' ? JSON.stringify(v) : String(v));

function comparison(f: Comparison): string {
  const subject = 'attribute' in f ? f.attribute : `custom attribute ${JSON.stringify(f.custom_attribute)}`;
  switch (f.op) {
    case 'exists':
      return `${subject} is set`;
    case 'not_exists':
      return `${subject} is not set`;
    case 'in':
      return `${subject} is one of ${f.value.map(value).join(', ')}`;
    default:
      return `${subject} ${OPS[f.op]} ${value(f.value)}`;
  }
}

function randomBucket(range: { gte?: number; lt?: number }): string {
  const from = range.gte ?? 0;
  if (range.lt === undefined) return `random bucket is at least ${from}`;
  return `random bucket is from ${from} to ${range.lt - 1}`;
}

const times = (n: number): string => (n === 1 ? 'once' : `${n} times`);

function counted(f: Count): string {
  const what =
    'custom_event' in f
      ? `custom event ${JSON.stringify(f.custom_event)} done`
      : `product ${JSON.stringify(f.purchase)} purchased`;
  const { gte, lte } = f.count ?? {};
  let howOften: string;
  if (gte !== undefined && lte !== undefined) howOften = `between ${gte} and ${lte} times`;
  else if (lte !== undefined) howOften = `at most ${times(lte)}`;
  else howOften = `at least ${times(Math.max(gte ?? 1, 1))}`;
  // As compiled (filter.ts): "at most n" without a window includes users who never did it.
  const never = lte !== undefined && (gte ?? 0) === 0 && f.within_days === undefined ? ' (never included)' : '';
  // The count is over all time; the window bounds the last time only (filter.ts compares `last`).
  const days = f.within_days === 1 ? 'day' : `${f.within_days} days`;
  const window = f.within_days === undefined ? '' : `, the last time within the past ${days}`;
  return `${what} ${howOften}${window}${never}`;
}
