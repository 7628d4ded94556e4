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
  // The catalog lifecycle (docs/catalogs.md), as the public API names them.
  'catalogs.get',
  'catalogs.create',
  'catalogs.delete',
  'catalogs.add_items',
  'catalogs.update_items',
  'catalogs.update_item',
  'catalogs.create_fields',
  'catalogs.delete_fields',
  'catalogs.create_selection',
  'catalogs.delete_selection',
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
  // The suppression lists' writes (docs/read-endpoints.md), and the spam list's read (beyond the original).
  'email.blacklist',
  'email.bounce.remove',
  'email.spam.remove',
  'email.spam',
  'sms.invalid_phone_numbers.remove',
  // Synchronous track (docs/ingestion.md).
  'users.track.sync',
  // Content blocks (docs/templates-live-activities-canvases.md).
  'content_blocks.create',
  'content_blocks.update',
  'content_blocks.info',
  'content_blocks.list',
  // Analytics: what happened, when (docs/analytics.md).
  'events.list',
  'events.get',
  'events.data_series',
  'purchases.product_list',
  'purchases.quantity_series',
  'purchases.revenue_series',
  'kpi.new_users.data_series',
  'kpi.dau.data_series',
  'kpi.mau.data_series',
  // Cloud Data Ingestion (docs/cdi.md).
  'cdi.integration_list',
  'cdi.integration_sync',
  'cdi.integration_job_status',
  // Segment details and sizes, custom attributes (docs/read-endpoints.md).
  'segments.details',
  'segments.data_series',
  'custom_attributes.get',
  // Subscription groups (docs/subscription-groups.md).
  'subscription.status.set',
  'subscription.status.get',
  'subscription.groups.get',
  // Preference centers' writes and user links (docs/preference-centers.md).
  'preference_center.update',
  'preference_center.user.get',
] as const;

export type Permission = (typeof PERMISSIONS)[number];

export function isPermission(value: string): value is Permission {
  return (PERMISSIONS as readonly string[]).includes(value);
}
