-- active_user_days without its foreign key to profiles: the check ran once per new stamp, inside the statement that
-- writes the event log and its rollups, and was the largest single part of what the rollups cost /users/track (an
-- internal query and a row lock per stamp, about a fifth of the statement: BENCHMARKS.md, "Analytics series"). What the
-- key did, deleting a person's stamps with their profile (an erasure, a merge's merged user, a deletion, a workspace
-- deleted), a statement trigger on profiles now does, once per deleting statement. Writers of stamps hold the
-- profile's row locked (they have just rewritten it), so no stamp is written for a profile being deleted.
ALTER TABLE active_user_days DROP CONSTRAINT active_user_days_profile_id_fkey;

CREATE FUNCTION profiles_forget_active_days() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  DELETE FROM active_user_days d USING gone g WHERE d.profile_id = g.id;
  RETURN NULL;
END
$$;
CREATE TRIGGER profiles_forget_active_days AFTER DELETE ON profiles REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION profiles_forget_active_days();

