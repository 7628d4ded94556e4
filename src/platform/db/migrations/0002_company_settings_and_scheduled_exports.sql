-- Company-wide settings from the workspace file, e.g. {"scim": {"departments": [...], "permissions": [...]}}
-- extending the built-in SCIM department and permission lists.
ALTER TABLE companies ADD COLUMN settings jsonb NOT NULL DEFAULT '{}';

-- Recurring segment exports declared in the workspace file; the export worker turns each into a BullMQ job
-- scheduler (cron) that writes to the workspace's bucket.
CREATE TABLE scheduled_exports (
  id                           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id                 uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name                         text NOT NULL,
  segment_id                   uuid NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
  cron                         text NOT NULL,
  time_zone                    text NOT NULL DEFAULT 'UTC',
  fields_to_export             text[] NOT NULL,
  custom_attributes_to_export  text[],
  output_format                text NOT NULL DEFAULT 'gzip' CHECK (output_format IN ('zip', 'gzip')),
  callback_endpoint            text,
  enabled                      boolean NOT NULL DEFAULT true,
  created_at                   timestamptz NOT NULL DEFAULT now(),
  updated_at                   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);
