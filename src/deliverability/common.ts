/** The shared query of the deliverability lists: a half-open time range [start, end) and an offset page. */
export interface DeliverabilityPage {
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

/** E.164: a plus, a non-zero country digit, at most 15 digits in all. */
export const E164 = /^\+[1-9]\d{1,14}$/;
