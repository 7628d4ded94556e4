import { badRequest } from '../../platform/errors.js';

/**
 * RFC 7644 3.5.2.1 for the multi-valued attributes of a User: `add` of a value the user already has changes nothing
 * and succeeds. "Already has" compares what identifies a value (an email's address, a workspace's or a team's name
 * or id), never what the server filled in (`appGroupId`, `teamId`), so a PATCH that re-sends what the identity
 * provider sent at creation is a no-op.
 */

export type Doc = Record<string, unknown>;

export const isObject = (v: unknown): v is Doc => typeof v === 'object' && v !== null && !Array.isArray(v);
export const asList = (v: unknown): unknown[] => (Array.isArray(v) ? v : v === undefined || v === null ? [] : [v]);

const sameText = (a: unknown, b: unknown) =>
  typeof a === 'string' && typeof b === 'string' && a.toLowerCase() === b.toLowerCase();
const isTrue = (v: unknown) => v === true || (typeof v === 'string' && v.toLowerCase() === 'true');

/** Whether a workspace entry is the one `other` names: by name (exact, as workspaces are named) or by id. */
export const sameWorkspace = (entry: unknown, other: unknown) =>
  isObject(entry) &&
  isObject(other) &&
  ((other.appGroupName != null && entry.appGroupName === other.appGroupName) ||
    sameText(entry.appGroupId, other.appGroupId));

const sameTeam = (entry: unknown, other: unknown) =>
  isObject(entry) &&
  isObject(other) &&
  ((other.teamName != null && entry.teamName === other.teamName) || sameText(entry.teamId, other.teamId));

/** Strings of both lists, each once, in first-seen order. Non-lists are left for the body validation to refuse. */
function union(current: unknown, added: unknown): unknown[] {
  const out = [...asList(current)];
  for (const v of asList(added)) if (!out.includes(v)) out.push(v);
  return out;
}

const setNames = (sets: unknown) =>
  asList(sets)
    .map((s) => (isObject(s) ? s.appGroupPermissionSetName : s))
    .map(String)
    .sort();

/**
 * Adds workspace entries: a workspace the user does not have is appended; one it has gains the permissions and
 * teams added (a team it has gains the team permissions). A workspace holds one permission set or direct
 * permissions, so an add that would change which set, or switch between the two, is refused: that is a replace.
 */
export function addWorkspaces(current: unknown, value: unknown): unknown[] {
  const entries = [...asList(current)];
  for (const added of asList(value)) {
    const existing = entries.find((e) => sameWorkspace(e, added));
    if (!existing || !isObject(existing) || !isObject(added)) {
      entries.push(added);
      continue;
    }
    const name = String(existing.appGroupName ?? existing.appGroupId);
    const addsDirect = added.appGroupPermissions != null || added.team != null;
    if (existing.appGroupPermissionSets != null || added.appGroupPermissionSets != null) {
      const sameSet =
        JSON.stringify(setNames(existing.appGroupPermissionSets)) ===
        JSON.stringify(setNames(added.appGroupPermissionSets));
      if (sameSet && !addsDirect) continue;
      throw badRequest(
        `permissions.appGroup: workspace "${name}" already has ${existing.appGroupPermissionSets != null ? 'a permission set' : 'direct permissions'}; ` +
          'a workspace carries one permission set or direct permissions, so change it with replace (or remove it first)',
        { scimType: 'invalidValue' },
      );
    }
    if (added.appGroupPermissions != null)
      existing.appGroupPermissions = union(existing.appGroupPermissions, added.appGroupPermissions);
    if (added.team == null) continue;
    const teams = [...asList(existing.team)];
    for (const team of asList(added.team)) {
      const same = teams.find((t) => sameTeam(t, team));
      if (same && isObject(same) && isObject(team))
        same.teamPermissions = union(same.teamPermissions, team.teamPermissions);
      else teams.push(team);
    }
    existing.team = teams;
  }
  return entries;
}

/**
 * Adds email entries: an address the user has (in any letter case) is updated with what was sent rather than
 * repeated. Returns the entries the operation touched, for keepOnePrimary.
 */
export function addEmails(emails: unknown[], value: unknown): Doc[] {
  const touched: Doc[] = [];
  for (const added of asList(value)) {
    const same = isObject(added) ? emails.find((e) => isObject(e) && sameText(e.value, added.value)) : undefined;
    if (same && isObject(same) && isObject(added)) {
      Object.assign(same, added);
      touched.push(same);
    } else {
      emails.push(added);
      if (isObject(added)) touched.push(added);
    }
  }
  return touched;
}

/**
 * RFC 7644 3.5.2: setting `primary` true on a value sets it false on the others (RFC 7643 2.4: true at most once).
 * Only entries the operation did not touch are changed: one operation that sends two primaries is refused by the
 * body validation instead of silently picking one.
 */
export function keepOnePrimary(emails: unknown[], touched: Doc[]): void {
  if (!touched.some((t) => isTrue(t.primary))) return;
  for (const e of emails) if (isObject(e) && !touched.includes(e) && isTrue(e.primary)) e.primary = false;
}
