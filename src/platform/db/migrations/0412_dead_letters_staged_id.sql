-- POST /users/track/sync looks up whether its staged rows became dead letters once applied (src/pipelines/ingest/
-- accept/track-sync.ts): by staged id, read per request.
CREATE INDEX ingest_dead_letters_staged ON ingest_dead_letters (staged_id) WHERE staged_id IS NOT NULL;
