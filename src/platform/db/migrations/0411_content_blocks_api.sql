-- Content blocks through the API (POST /content_blocks/create and /update, GET /content_blocks/info and /list;
-- docs/templates-live-activities-canvases.md): what Braze's calls carry besides a name and content. A block the
-- workspace file declares is active, without description or tags, until the API says otherwise; applying the file
-- again sets its content and leaves these as the API left them.
ALTER TABLE content_blocks
  ADD COLUMN description text,
  ADD COLUMN state text NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'draft')),
  ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
CREATE INDEX content_blocks_list ON content_blocks (workspace_id, updated_at, id);
