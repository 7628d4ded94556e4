/** The shared query of the deliverability lists (hard bounces, invalid phone numbers): a half-open time range [start, end) and an offset page. */
export interface ListPage {
  /** Midnight UTC of start_date: entries at or after it. */
  start?: Date;
  /** Midnight UTC of end_date: entries strictly before it. */
  end?: Date;
  limit: number;
  offset: number;
}

export const DELIVERABILITY_DEFAULT_LIMIT = 100;
export const DELIVERABILITY_MAX_LIMIT = 500;
/** At most this many phone numbers in one `phone_numbers[]` filter. */
export const MAX_FILTER_VALUES = 500;
