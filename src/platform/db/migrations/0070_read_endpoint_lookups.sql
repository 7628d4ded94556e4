-- Lookups of the deliverability reads by address (`email=` on hard bounces, `phone_numbers[]=` on invalid numbers),
-- each in the lists' own order so a filtered page is an index range, and the uninstall series of one app.
CREATE INDEX hard_bounces_email ON hard_bounces (workspace_id, lower(email), bounced_at DESC, id DESC);
CREATE INDEX invalid_phone_numbers_phone ON invalid_phone_numbers (workspace_id, phone, detected_at DESC, id DESC);
CREATE INDEX uninstall_events_app ON uninstall_events (app_id, occurred_at);
