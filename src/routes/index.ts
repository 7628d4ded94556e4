import type { FastifyPluginAsync } from 'fastify';
import segmentsRoutes from './segments.js';

/** Every endpoint family, one plugin each. */
export const routes: FastifyPluginAsync[] = [segmentsRoutes];
