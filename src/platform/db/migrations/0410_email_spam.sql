-- The spam list beside the hard bounces (docs/read-endpoints.md, "Suppression lists"): addresses that reported mail as
-- spam, recorded through POST /internal/records/spam, listed by GET /email/spam, removed by POST /email/spam/remove.
CREATE TABLE email_spam (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  email        text NOT NULL,
  reported_at  timestamptz NOT NULL
);
CREATE INDEX email_spam_list ON email_spam (workspace_id, reported_at DESC, id DESC);
CREATE INDEX email_spam_email ON email_spam (workspace_id, lower(email), reported_at DESC, id DESC);
