import { createHash } from 'node:crypto';
import type { PoolClient } from '../../platform/db/pool.js';
import { recordHardBouncesIn } from '../subscriptions/hard-bounces.js';
import { recordInvalidPhoneNumbersIn } from '../subscriptions/invalid-phone-numbers.js';
import type { RecordResult } from '../../platform/lib/records-body.js';
import { topUpUninstalls } from '../uninstalls/uninstalls.js';
import { failOnIssues } from './apply-issues.js';
import { SPECS, type ApplyRun, type DeclaredWorkspace, type Path } from './apply-specs.js';
import { formatPath } from './parse.js';
import { resolveRecordTime } from './schema.js';
import { upsert, type UpsertCounts } from './upsert.js';
import { segmentsByApiIds } from '../../profiles/segments/store.js';

/**
 * What refers to other objects (canvas schedules, live activities, scheduled exports) and the records (uninstalls,
 * hard bounces, invalid phone numbers), resolved against the objects just written and whatever was stored before.
 * Every unresolved reference is an issue; all of them are reported at once, before anything of this step is written.
 */
export async function applyReferences(run: ApplyRun): Promise<void> {
  const { client, workspaces, counts } = run;
  // References, resolved against the file's objects just written and whatever was stored before.
  const refs = await loadReferences(client, workspaces);
  // Rows in the order their issues are reported: live activities, scheduled exports, uninstalls, integrations.
  const scheduleRows = canvasScheduleRows(workspaces, refs);
  const liveRows = liveActivityRows(run, refs);
  const exportRows = scheduledExportRows(run, refs);
  const uninstallRows = uninstallRecordRows(run, refs);
  const integrationRows = cdiIntegrationRows(workspaces);
  await checkOwners(run, 'cdi_integrations', integrationRows, 'integration');
  const eventExportRows = eventExportRowsOf(workspaces);
  await checkOwners(run, 'event_exports', eventExportRows, 'event export');
  const groupRows = workspaces.flatMap((w) => w.decl.subscription_groups.map((g) => ({ workspace_id: w.id, ...g })));
  await checkOwners(run, 'subscription_groups', groupRows, 'subscription group');
  failOnIssues(run);

  counts.canvas_schedules = await upsert(client, SPECS.canvas_schedules, scheduleRows);
  counts.live_activities = await upsert(client, SPECS.live_activities, liveRows);
  counts.scheduled_exports = await upsert(client, SPECS.scheduled_exports, exportRows);
  counts.cdi_integrations = await upsert(client, SPECS.cdi_integrations, integrationRows);
  counts.event_exports = await upsert(client, SPECS.event_exports, eventExportRows);
  counts.subscription_groups = await upsert(client, SPECS.subscription_groups, groupRows);
  await applyRecords(run, uninstallRows);
}

/** Each canvas schedule, with its canvas's id and, when the file gives none, ids derived from where it is declared. */
function canvasScheduleRows(workspaces: DeclaredWorkspace[], refs: References) {
  return workspaces.flatMap((w) =>
    w.decl.canvases.flatMap((c) =>
      c.schedules.map((s, si) => {
        const scheduleId = s.schedule_id ?? derivedId(`schedule/${w.id}/${c.id}/${si}`);
        return {
          schedule_id: scheduleId,
          canvas_id: refs.canvases.get(`${w.id}/${c.id}`),
          schedule: s.schedule,
          recipients: s.recipients,
          audience: s.audience,
          trigger_properties: s.trigger_properties,
          canvas_entry_properties: s.canvas_entry_properties,
          broadcast: s.broadcast,
          dispatch_id: derivedId(`dispatch/${scheduleId}`),
        };
      }),
    ),
  );
}

/** The id of the app a declaration names (by name or api_id) in its workspace; an issue when there is none. */
function appOf(run: ApplyRun, refs: References, w: DeclaredWorkspace, ref: string, path: Path): string | undefined {
  const id = refs.apps.get(`${w.id}/name/${ref}`) ?? refs.apps.get(`${w.id}/api_id/${ref}`);
  if (!id)
    run.issues.push({
      path: formatPath(path),
      message: `no app named (or with api_id) "${ref}" in workspace "${w.decl.name}"`,
    });
  return id;
}

function liveActivityRows(run: ApplyRun, refs: References) {
  return run.workspaces.flatMap((w) =>
    w.decl.live_activities.map((l, li) => ({
      app_id: appOf(run, refs, w, l.app, [...w.path, 'live_activities', li, 'app']),
      activity_id: l.activity_id,
      content_state_shape: l.content_state_shape,
    })),
  );
}

/** Each scheduled export with its segment's id; an issue for a segment the workspace does not have. */
function scheduledExportRows(run: ApplyRun, refs: References) {
  return run.workspaces.flatMap((w) =>
    w.decl.scheduled_exports.map((e, ei) => {
      const segmentId = refs.segments.get(`${w.id}/${e.segment}`);
      if (!segmentId)
        run.issues.push({
          path: formatPath([...w.path, 'scheduled_exports', ei, 'segment']),
          message: `no segment with id "${e.segment}" in workspace "${w.decl.name}"`,
        });
      return {
        workspace_id: w.id,
        name: e.name,
        segment_id: segmentId,
        cron: e.cron,
        time_zone: e.time_zone,
        fields_to_export: e.fields_to_export,
        custom_attributes_to_export: e.custom_attributes_to_export,
        output_format: e.output_format,
        rows_per_part: e.rows_per_part,
        part_target_mb: e.part_target_mb,
        layout: e.layout,
        mode: e.mode,
        callback_endpoint: e.callback_endpoint,
        enabled: e.enabled,
      };
    }),
  );
}

function uninstallRecordRows(run: ApplyRun, refs: References) {
  return run.workspaces.flatMap((w) =>
    (w.decl.records?.uninstalls ?? []).map((u, ui) => ({
      workspace_id: w.id,
      app_id: appOf(run, refs, w, u.app, [...w.path, 'records', 'uninstalls', ui, 'app']),
      occurred_at: resolveRecordTime(u.at, run.now),
      count: u.count,
    })),
  );
}

function cdiIntegrationRows(workspaces: DeclaredWorkspace[]) {
  return workspaces.flatMap((w) =>
    w.decl.cdi_integrations.map((c) => ({
      workspace_id: w.id,
      id: c.id,
      name: c.name,
      source: c.source,
      schedule: c.schedule ?? null,
    })),
  );
}

function eventExportRowsOf(workspaces: DeclaredWorkspace[]) {
  return workspaces.flatMap((w) =>
    w.decl.event_exports.map((e) => ({
      workspace_id: w.id,
      id: e.id,
      name: e.name,
      destination: e.destination ?? null,
      format: e.format,
      event_types: e.event_types ?? null,
      flush_seconds: e.flush_seconds,
      max_events_per_file: e.max_events_per_file,
    })),
  );
}

/**
 * An integration's, event export's or subscription group's id is global: one declared by another workspace (of this or another company) is
 * not taken over.
 */
async function checkOwners(
  run: ApplyRun,
  list: 'cdi_integrations' | 'event_exports' | 'subscription_groups',
  declared: { workspace_id: string; id: string }[],
  what: string,
): Promise<void> {
  if (declared.length === 0) return;
  const { rows } = await run.client.query<{ id: string; workspace_id: string }>(
    `SELECT id, workspace_id FROM ${list} WHERE id = ANY($1::uuid[])`,
    [declared.map((r) => r.id)],
  );
  for (const r of rows) {
    const mine = declared.find((i) => i.id === r.id)!;
    if (mine.workspace_id === r.workspace_id) continue;
    const w = run.workspaces.find((x) => x.id === mine.workspace_id)!;
    const index = w.decl[list].findIndex((c) => c.id === r.id);
    run.issues.push({
      path: formatPath([...w.path, list, index, 'id']),
      message: `${what} id "${r.id}" belongs to another workspace`,
    });
  }
}

/**
 * Records go through the same writers as the internal API's, so that both do the same (a hard bounce unsubscribes
 * the address's profiles whichever way it arrives); an exact repeat of a stored record counts as unchanged.
 */
async function applyRecords(run: ApplyRun, uninstallRows: ReturnType<typeof uninstallRecordRows>): Promise<void> {
  const { client, workspaces, counts, now } = run;
  counts.uninstalls = await topUpUninstalls(client, uninstallRows);
  counts.hard_bounces = { created: 0, updated: 0, unchanged: 0 };
  counts.invalid_phone_numbers = { created: 0, updated: 0, unchanged: 0 };
  for (const w of workspaces) {
    const bounces = (w.decl.records?.hard_bounces ?? []).map((b) => ({
      email: b.email,
      time: new Date(resolveRecordTime(b.at, now)),
    }));
    if (bounces.length > 0) addRecorded(counts.hard_bounces, await recordHardBouncesIn(client, w.id, bounces, now));
    const phones = (w.decl.records?.invalid_phone_numbers ?? []).map((p) => ({
      phone: p.phone,
      reason: p.reason,
      time: new Date(resolveRecordTime(p.at, now)),
    }));
    if (phones.length > 0)
      addRecorded(counts.invalid_phone_numbers, await recordInvalidPhoneNumbersIn(client, w.id, phones, now));
  }
}

/** A stable id in UUID form for objects the file declares without one. */
function derivedId(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20, 32)}`;
}

interface References {
  /** `${workspaceId}/name/${name}` and `${workspaceId}/api_id/${apiId}` -> app id. */
  apps: Map<string, string>;
  /** `${workspaceId}/${apiId}` -> segment id. */
  segments: Map<string, string>;
  /** `${workspaceId}/${apiId}` -> canvas id. */
  canvases: Map<string, string>;
}

async function loadReferences(client: PoolClient, workspaces: DeclaredWorkspace[]): Promise<References> {
  const ids = workspaces.map((w) => w.id);
  const refs: References = { apps: new Map(), segments: new Map(), canvases: new Map() };
  const apps = await client.query<{ id: string; workspace_id: string; name: string; api_id: string }>(
    'SELECT id, workspace_id, name, api_id FROM apps WHERE workspace_id = ANY($1)',
    [ids],
  );
  for (const a of apps.rows) {
    refs.apps.set(`${a.workspace_id}/name/${a.name}`, a.id);
    refs.apps.set(`${a.workspace_id}/api_id/${a.api_id}`, a.id);
  }
  const segmentIds = workspaces.flatMap((w) => w.decl.scheduled_exports.map((e) => e.segment));
  if (segmentIds.length > 0) {
    for (const s of await segmentsByApiIds(client, ids, segmentIds))
      refs.segments.set(`${s.workspace_id}/${s.api_id}`, s.id);
  }
  const canvasIds = workspaces.flatMap((w) => w.decl.canvases.filter((c) => c.schedules.length > 0).map((c) => c.id));
  if (canvasIds.length > 0) {
    const { rows } = await client.query<{ id: string; workspace_id: string; api_id: string }>(
      'SELECT id, workspace_id, api_id FROM canvases WHERE workspace_id = ANY($1) AND api_id = ANY($2)',
      [ids, canvasIds],
    );
    for (const c of rows) refs.canvases.set(`${c.workspace_id}/${c.api_id}`, c.id);
  }
  return refs;
}

/** Adds a writer's result to an apply's counts: records written are created, exact repeats unchanged. */
function addRecorded(counts: UpsertCounts, result: RecordResult): void {
  counts.created += result.recorded;
  counts.unchanged += result.duplicates;
}
