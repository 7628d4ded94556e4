-- SCIM users as identity providers manage them (RFC 7643 core attributes the spec leaves out).
--   active:      false is how Okta and Entra ID deprovision (they PATCH or PUT it rather than DELETE). A deactivated
--                user stays readable and filterable so that the provider can re-read and reactivate it.
--   external_id: the provider's own id for the user (caseExact, looked up by `externalId eq`).
--   emails:      the provider's email entries [{value, type?, primary?}], kept and returned as sent.
ALTER TABLE dashboard_users ADD COLUMN active boolean NOT NULL DEFAULT true;
ALTER TABLE dashboard_users ADD COLUMN external_id text;
ALTER TABLE dashboard_users ADD COLUMN emails jsonb NOT NULL DEFAULT '[]';

CREATE INDEX dashboard_users_external_id ON dashboard_users (company_id, external_id) WHERE external_id IS NOT NULL;

-- A change of `active` is recorded as what it means to an admin reading the trail.
ALTER TABLE dashboard_user_audit DROP CONSTRAINT dashboard_user_audit_action_check;
ALTER TABLE dashboard_user_audit ADD CONSTRAINT dashboard_user_audit_action_check
  CHECK (action IN ('create', 'update', 'delete', 'deactivate', 'reactivate'));
