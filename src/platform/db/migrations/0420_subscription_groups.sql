-- Subscription groups (docs/subscription-groups.md): declared in the workspace file, each of one channel; a user's
-- state in a group is a row of its own, written by /subscription/status/set, /v2/subscription/status/set and the
-- `subscription_groups` of a /users/track attributes object.
CREATE TABLE subscription_groups (
  -- A UUID, as the public API's group ids are: the natural key, stable across applies, global like an integration's.
  id           uuid PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name         text NOT NULL,
  channel      text NOT NULL CHECK (channel IN ('email', 'sms')),
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, id)
);

-- A user's state in a group. A user with no row for a group has never been set in it ("Unknown"). The row goes with
-- the profile (a deletion or an erasure) and with the group's workspace.
CREATE TABLE subscription_group_states (
  profile_id   bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
  group_id     uuid NOT NULL,
  workspace_id uuid NOT NULL,
  state        text NOT NULL CHECK (state IN ('subscribed', 'unsubscribed')),
  -- When the state was set (an API call's time, an attributes object's acceptance): the latest wins, so an object
  -- accepted before a call but applied after it does not undo the call.
  set_at       timestamptz NOT NULL,
  PRIMARY KEY (profile_id, group_id),
  FOREIGN KEY (workspace_id, group_id) REFERENCES subscription_groups (workspace_id, id) ON DELETE CASCADE
);
CREATE INDEX subscription_group_states_group ON subscription_group_states (workspace_id, group_id);
