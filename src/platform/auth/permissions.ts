/** Every permission string an API key can carry: the spec's, plus those of the endpoints we add beyond it. */
export const PERMISSIONS = [
  // From the spec.
  'users.export.segment',
  'users.track',
  'users.alias.update',
  'templates.email.create',
  'templates.email.update',
  'messages.live_activity.update',
  'canvas.trigger.schedule.update',
  'catalogs.replace_items',
  'catalogs.replace_item',
  'catalogs.get_item',
  'preference_center.list',
  'preference_center.get',
  'email.status',
  'sms.invalid_phone_numbers',
  'email.hard_bounces',
  'canvas.list',
  'feed.list',
  'segments.list',
  'kpi.uninstalls.data_series',
  // Beyond the spec, named as the public API names them.
  'users.export.status',
  'users.import',
  'users.alias.new',
  'templates.email.info',
  'templates.email.list',
  'canvas.trigger.schedule.create',
  'canvas.trigger.schedule.delete',
  'catalogs.get_items',
  'catalogs.create_item',
  'catalogs.delete_item',
  'catalogs.delete_items',
  'messages.live_activity.register',
  'internal.records.write',
  // The user-data endpoints (docs/user-data.md).
  'users.export.ids',
  'users.delete',
  'users.identify',
  'users.merge',
  'users.external_ids.rename',
  'users.external_ids.remove',
  'email.unsubscribe',
  // Cloud Data Ingestion (docs/cdi.md).
  'cdi.integration_list',
  'cdi.integration_sync',
  'cdi.integration_job_status',
  // Subscription groups (docs/subscription-groups.md).
  'subscription.status.set',
  'subscription.status.get',
  'subscription.groups.get',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}
