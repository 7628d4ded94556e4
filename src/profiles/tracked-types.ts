/**
 * The normalized forms of accepted objects: what a /users/track request stages and what a bulk import applies.
 * Times are canonical ISO strings (`YYYY-MM-DDTHH:MM:SS.mmmZ`) so that they compare as strings, here and in SQL.
 */

/** How an object names its user: exactly one of the spec's four identifiers. Emails are lower-cased. */
export type Identity =
  | { type: 'external_id'; value: string }
  | { type: 'service_id'; value: string }
  | { type: 'email'; value: string }
  | { type: 'user_alias'; label: string; name: string };

interface Targeted {
  identity: Identity;
  /** A missing profile may be created: only for external_id, and only without `_update_existing_only`. */
  create: boolean;
  /**
   * What makes the object the same across retries of its apply (its staged row and place, its import line, its CDI
   * run and row), set by the pipeline that applies it and never staged; the event log derives the id of the object's
   * event (an event, a purchase, the subscription state change an attributes object makes) from it
   * (src/profiles/event-log.ts). Absent: a fresh id.
   */
  logKey?: string;
}

export interface TrackEvent extends Targeted {
  name: string;
  time: string;
  app_id?: string;
  /** Validated; object values already turned into strings. Not persisted on the profile (spec). */
  properties?: Record<string, unknown>;
}

export interface TrackPurchase extends Targeted {
  product_id: string;
  currency: string;
  price: number;
  quantity: number;
  time: string;
  app_id?: string;
  properties?: Record<string, unknown>;
}

/** Standard profile columns an attributes object may set (null unsets). */
export type StandardValues = Record<string, string | number[] | null>;

export interface TrackAttributes extends Targeted {
  /** When the object was accepted: attributes are last-write-wins by this time. */
  at: string;
  standard: StandardValues;
  /** Custom attributes; null removes one. */
  custom: Record<string, unknown>;
  /** `subscription_groups`: the user's state in each group, by group id (lower case). */
  groups?: { id: string; state: 'subscribed' | 'unsubscribed' }[];
}

export interface TrackObjects {
  events: TrackEvent[];
  purchases: TrackPurchase[];
  attributes: TrackAttributes[];
}

export type TrackArray = 'events' | 'attributes' | 'purchases';

/** A refused object, as the public API reports it. */
export interface ObjectError {
  type: string;
  input_array: TrackArray;
  index: number;
}
