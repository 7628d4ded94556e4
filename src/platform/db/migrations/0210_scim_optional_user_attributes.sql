-- SCIM users whose identity provider sends only the RFC 7643 core (scim-sanity, Okta without a mapping for our
-- extension): department and permissions become optional. NULL is RFC 7643's "unassigned" (a create without them,
-- or a PATCH remove): the attribute is absent from the resource. A user without permissions of its own gets what
-- its groups grant. Permissions `{}` (assigned, empty) still renders as empty lists, as the spec's clients expect.
ALTER TABLE dashboard_users ALTER COLUMN department DROP NOT NULL;
ALTER TABLE dashboard_users ALTER COLUMN permissions DROP NOT NULL;
-- displayName as the identity provider sent it (RFC 7643 4.1.1); NULL when none was sent.
ALTER TABLE dashboard_users ADD COLUMN display_name text;
