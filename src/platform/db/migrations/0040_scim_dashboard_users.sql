-- SCIM dashboard users: what 0001 left out.

-- The unfiltered ListResponse pages a company's users by creation time (startIndex/count), ties broken by id.
CREATE INDEX dashboard_users_list ON dashboard_users (company_id, created_at, id);

-- "Who" as data, not only as the human-readable actor text: the token (a stable id that survives a rename) and the
-- X-Request-Origin the identity provider sent. No FK on the token: the trail outlives a revoked or deleted token.
ALTER TABLE dashboard_user_audit ADD COLUMN scim_token_id uuid;
ALTER TABLE dashboard_user_audit ADD COLUMN request_origin text;

-- An operator reads one user's history, or a company's recent changes.
CREATE INDEX dashboard_user_audit_user ON dashboard_user_audit (company_id, dashboard_user_id, at);
CREATE INDEX dashboard_user_audit_company ON dashboard_user_audit (company_id, at);
