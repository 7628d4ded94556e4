/**
 * The event log's types (the table is `event_log`, written by src/profiles/event-log.ts in the transaction that applies
 * each change to the profile): what happened to a person, one immutable row per event, named as Braze's Currents names
 * its event types, plus `users.Deleted` and `users.Merged`, which carry identifiers only, so that a warehouse can apply
 * an erasure or a merge downstream.
 */

export const EVENT_TYPES = [
  'users.behaviors.CustomEvent',
  'users.behaviors.Purchase',
  'users.behaviors.subscription.GlobalStateChange',
  'users.behaviors.subscriptiongroup.StateChange',
  'users.behaviors.Uninstall',
  'users.canvas.Entry',
  'users.Deleted',
  'users.Merged',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

/**
 * What set an email subscription state (GlobalStateChange's `state_change_source`): `api`, an attributes object of
 * /users/track; `email_status`, POST /email/status; `cdi`, a Cloud Data Ingestion row; `bounce`, a hard bounce;
 * `blocklist`, POST /email/blocklist (or /email/blacklist).
 */
export type StateChangeSource = 'api' | 'email_status' | 'cdi' | 'bounce' | 'blocklist';

/** The fields each type carries beyond the common ones, as the log's `data` column holds them. */
export interface EventData {
  'users.behaviors.CustomEvent': Record<string, never>;
  'users.behaviors.Purchase': { price: number; currency: string; quantity: number };
  'users.behaviors.subscription.GlobalStateChange': {
    /** `subscribed`, `unsubscribed` or `opted_in`, as the profile's email_subscribe says it. */
    subscription_status: string;
    channel: 'email';
    email_address: string | null;
    /** What set it (StateChangeSource). */
    state_change_source: StateChangeSource;
  };
  'users.behaviors.subscriptiongroup.StateChange': {
    /** The group's id (Currents' `subscription_group_id`). */
    subscription_group_id: string;
    /** `subscribed` or `unsubscribed`, as the state is stored. */
    subscription_status: string;
    channel: 'email' | 'sms';
    /** What set it: `api` (/users/track) or `subscription_status` (/subscription/status/set and its v2). */
    state_change_source: string;
    /** The user's address on an email group, number on an SMS group, when the profile has one. */
    email_address: string | null;
    phone_number: string | null;
  };
  'users.behaviors.Uninstall': Record<string, never>;
  'users.canvas.Entry': {
    canvas_id: string;
    canvas_name: string | null;
    canvas_variation_id: string | null;
    in_control_group: boolean;
  };
  'users.Deleted': Record<string, never>;
  /** The identifiers the merged user had; `user_id` and `external_user_id` of the row are the kept profile's. */
  'users.Merged': { merged_user_id: string; merged_external_user_id: string | null };
}

/** One event of the log, as a delivery reads it. */
export interface LoggedEvent<T extends EventType = EventType> {
  /** Stable: the same across retries of the same accepted object (a UUID). */
  id: string;
  type: T;
  workspaceId: string;
  /** When the event entered the log (its transaction's time): the hour its file is delivered under. */
  acceptedAt: Date;
  /** When it happened (an event's `time`, a purchase's `time`; for the other types, when it was applied). */
  time: Date;
  /** Our `service_id` of the profile (Currents' `user_id`). */
  userId: string | null;
  externalUserId: string | null;
  appId: string | null;
  /** A custom event's name, a purchase's product id; null for the other types. */
  name: string | null;
  /** A custom event's or purchase's properties; null when none. */
  properties: Record<string, unknown> | null;
  data: EventData[T];
}

/** An event to log, as a writer of profiles knows it. */
export interface EventEntry<T extends EventType = EventType> {
  type: T;
  workspaceId: string;
  /**
   * What makes the event the same across retries of the same accepted object (a staged row's id and the object's
   * place in it, an import's line...): its id is derived from it. Null: a fresh id (the writer has no such key, and
   * its transaction is the only one that can log the event).
   */
  key: string | null;
  /** The profile the event is about. */
  profileId: number | null;
  /**
   * Its `service_id` and `external_id` as they are when the batch commits: given by a writer that read them under the
   * lock that keeps them so (ingestion's, which renames and merges take whole), or for a profile gone by then (a
   * deletion); read here when not given.
   */
  userId?: string | null;
  externalUserId?: string | null;
  /** When it happened, ISO 8601. */
  time: string;
  appId?: string | null;
  name?: string | null;
  properties?: Record<string, unknown> | null;
  data?: EventData[T];
}
