import type { FastifyPluginAsync } from 'fastify';
import segmentsRoutes from './segments.js';
import scimRoutes from './scim.js';
import catalogsRoutes from './catalogs.js';

/** Every endpoint family, one plugin each. */
export const routes: FastifyPluginAsync[] = [segmentsRoutes, catalogsRoutes, scimRoutes];
