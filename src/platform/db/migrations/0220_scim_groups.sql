-- SCIM Groups (RFC 7643 4.2): what identity providers push (Okta Group Push, Entra ID group provisioning), and the
-- role a group carries through our Group extension: the permissions it grants its members, stored by workspace,
-- team and permission-set id like a user's (src/features/scim/user-rows.ts StoredPermissions). A user's effective access is
-- its own permissions plus its groups' grants.
CREATE TABLE scim_groups (
  id            uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  company_id    uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  display_name  text NOT NULL,
  external_id   text,
  -- NULL: the group grants nothing (a group without a role).
  grants        jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now()
);
-- displayName is unique in a company, ignoring letter case (it is how Okta and Entra ID match a pushed group).
CREATE UNIQUE INDEX scim_groups_display_name ON scim_groups (company_id, lower(display_name));
CREATE INDEX scim_groups_list ON scim_groups (company_id, created_at, id);
CREATE INDEX scim_groups_external_id ON scim_groups (company_id, external_id) WHERE external_id IS NOT NULL;

-- Both ends cascade: deleting a group or a user ends its memberships at once (and with them the grants).
CREATE TABLE scim_group_members (
  group_id   uuid NOT NULL REFERENCES scim_groups(id) ON DELETE CASCADE,
  user_id    uuid NOT NULL REFERENCES dashboard_users(id) ON DELETE CASCADE,
  -- RFC 7643 2.4: `display` is immutable, set by the client; NULL shows the member's userName.
  display    text,
  added_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (group_id, user_id)
);
CREATE INDEX scim_group_members_user ON scim_group_members (user_id);

-- The group's own trail (create, update, delete), beside the users' trail, which records each membership change
-- and what it did to the member's effective permissions.
CREATE TABLE scim_group_audit (
  id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  company_id     uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  group_id       uuid NOT NULL,
  actor          text NOT NULL,
  action         text NOT NULL CHECK (action IN ('create', 'update', 'delete')),
  changes        jsonb NOT NULL,
  scim_token_id  uuid,
  request_origin text,
  at             timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX scim_group_audit_group ON scim_group_audit (company_id, group_id, at);

ALTER TABLE dashboard_user_audit DROP CONSTRAINT dashboard_user_audit_action_check;
ALTER TABLE dashboard_user_audit ADD CONSTRAINT dashboard_user_audit_action_check
  CHECK (action IN ('create', 'update', 'delete', 'deactivate', 'reactivate', 'join_group', 'leave_group', 'group_grants'));
