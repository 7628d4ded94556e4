import type { FastifyPluginAsync } from 'fastify';
import segmentsRoutes from './segments.js';
import usersExportRoutes from './users-export.js';
import usersTrackRoutes from './users-track.js';
import usersAliasRoutes from './users-alias.js';
import usersDataRoutes from './users-data.js';
import emailStatusRoutes from './email-status.js';
import importsRoutes from './imports.js';
import scimRoutes from './scim.js';
import scimDiscoveryRoutes from './scim-discovery.js';
import scimGroupRoutes from './scim-groups.js';
import scimSearchRoutes from './scim-search.js';
import catalogsRoutes from './catalogs.js';
import catalogLifecycleRoutes from './catalog-lifecycle.js';
import emailTemplatesRoutes from './email-templates.js';
import contentBlockRoutes from './content-blocks.js';
import liveActivitiesRoutes from './live-activities.js';
import canvasSchedulesRoutes from './canvas-schedules.js';
import preferenceCenterRoutes from './preference-centers.js';
import preferenceCenterPageRoutes from './preference-center-pages.js';
import canvasListRoutes from './canvas-list.js';
import feedRoutes from './feed.js';
import kpiRoutes from './kpi.js';
import analyticsRoutes from './analytics.js';
import deliverabilityRoutes from './deliverability.js';
import suppressionRoutes from './suppressions.js';
import recordsRoutes from './records.js';
import cdiRoutes from './cdi.js';
import customAttributesRoutes from './custom-attributes.js';
import subscriptionGroupRoutes from './subscription-groups.js';

/** Every endpoint family, one plugin each. */
export const routes: FastifyPluginAsync[] = [
  segmentsRoutes,
  usersExportRoutes,
  usersTrackRoutes,
  usersAliasRoutes,
  usersDataRoutes,
  emailStatusRoutes,
  importsRoutes,
  catalogsRoutes,
  catalogLifecycleRoutes,
  emailTemplatesRoutes,
  contentBlockRoutes,
  liveActivitiesRoutes,
  canvasSchedulesRoutes,
  preferenceCenterRoutes,
  preferenceCenterPageRoutes,
  canvasListRoutes,
  feedRoutes,
  kpiRoutes,
  analyticsRoutes,
  deliverabilityRoutes,
  suppressionRoutes,
  recordsRoutes,
  cdiRoutes,
  customAttributesRoutes,
  subscriptionGroupRoutes,
  scimRoutes,
  scimGroupRoutes,
  scimSearchRoutes,
  scimDiscoveryRoutes,
];
