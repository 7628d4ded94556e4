import type { FastifyPluginAsync, FastifyReply } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicBaseUrl } from '../platform/config.js';
import { SCIM_JSON, scimHeadersNote, scimRouteConfig, scimSchemaCommon } from './scim-common.js';
import {
  SCIM_ATTRIBUTE_TYPES,
  SCIM_MUTABILITIES,
  SCIM_RETURNED,
  SCIM_UNIQUENESS,
  discoveryDocuments,
  discoveryList,
  findResourceType,
  findSchema,
} from '../features/scim/discovery.js';

// The same authentication, daily budget and error bodies as /scim/v2/Users.
const config = scimRouteConfig;
const common = scimSchemaCommon;
const headersNote = `${scimHeadersNote} Query parameters (filter, paging, attributes) are ignored (RFC 7644 4).`;

const Meta = z.object({ resourceType: z.string(), location: z.string() });

/** Sub-attributes nest (permissions.appGroup.team), so they are described once here and passed through as they are. */
const Attribute = z.looseObject({
  name: z.string(),
  type: z.enum(SCIM_ATTRIBUTE_TYPES),
  multiValued: z.boolean(),
  description: z.string(),
  required: z.boolean(),
  caseExact: z.boolean(),
  mutability: z.enum(SCIM_MUTABILITIES),
  returned: z.enum(SCIM_RETURNED),
  uniqueness: z.enum(SCIM_UNIQUENESS),
  canonicalValues: z.array(z.string()).optional(),
  referenceTypes: z.array(z.string()).optional(),
  subAttributes: z.array(z.record(z.string(), z.unknown())).optional(),
});

const SchemaResource = z.object({
  schemas: z.array(z.string()),
  id: z.string().describe('The schema URI'),
  name: z.string(),
  description: z.string(),
  attributes: z.array(Attribute),
  meta: Meta,
});

const ResourceType = z.object({
  schemas: z.array(z.string()),
  id: z.string(),
  name: z.string(),
  description: z.string(),
  endpoint: z.string(),
  schema: z.string(),
  schemaExtensions: z.array(z.object({ schema: z.string(), required: z.boolean() })),
  meta: Meta,
});

const Supported = z.object({ supported: z.boolean() });
const ServiceProviderConfig = z.looseObject({
  schemas: z.array(z.string()),
  documentationUri: z.string().optional(),
  patch: Supported,
  bulk: z.object({ supported: z.boolean(), maxOperations: z.number().int(), maxPayloadSize: z.number().int() }),
  filter: z.object({ supported: z.boolean(), maxResults: z.number().int() }),
  changePassword: Supported,
  sort: Supported,
  etag: Supported,
  authenticationSchemes: z.array(
    z.looseObject({ type: z.string(), name: z.string(), description: z.string(), primary: z.boolean().optional() }),
  ),
  meta: Meta,
});

const listOf = <T extends z.ZodType>(resource: T) =>
  z.object({
    schemas: z.array(z.string()),
    totalResults: z.number().int(),
    startIndex: z.number().int(),
    itemsPerPage: z.number().int(),
    Resources: z.array(resource),
  });

const SchemaParams = z.object({
  id: z.string().describe('A schema URI, e.g. urn:ietf:params:scim:schemas:core:2.0:User'),
});
const ResourceTypeParams = z.object({ id: z.string().describe('A resource type id: User') });

const scim = (reply: FastifyReply) => reply.type(SCIM_JSON);

/** RFC 7644 4: what identity providers read to learn what this SCIM service supports. */
const scimDiscoveryRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const docs = discoveryDocuments(publicBaseUrl(app.ctx.config));

  app.get(
    '/scim/v2/ServiceProviderConfig',
    {
      config,
      schema: {
        ...common,
        summary: 'SCIM features this service supports (ServiceProviderConfig)',
        description: `${headersNote} PATCH and filter are supported; bulk, sort, ETags and password changes are not.`,
        response: { 200: ServiceProviderConfig },
      },
    },
    async (_req, reply) => scim(reply).send(docs.serviceProviderConfig),
  );

  app.get(
    '/scim/v2/Schemas',
    {
      config,
      schema: {
        ...common,
        summary: 'SCIM schemas (ListResponse)',
        description: `${headersNote} The core User and Group schemas, our extensions of both, and the ServiceProviderConfig and ResourceType schemas.`,
        response: { 200: listOf(SchemaResource) },
      },
    },
    async (_req, reply) => scim(reply).send(discoveryList(docs.schemas)),
  );

  app.get(
    '/scim/v2/Schemas/:id',
    {
      config,
      schema: {
        ...common,
        summary: 'One SCIM schema, by URI',
        description: `${headersNote} 404 for a schema this service does not serve.`,
        params: SchemaParams,
        response: { 200: SchemaResource },
      },
    },
    async (req, reply) => scim(reply).send(findSchema(docs, req.params.id)),
  );

  app.get(
    '/scim/v2/ResourceTypes',
    {
      config,
      schema: {
        ...common,
        summary: 'SCIM resource types (ListResponse)',
        description: `${headersNote} Two resource types: User and Group.`,
        response: { 200: listOf(ResourceType) },
      },
    },
    async (_req, reply) => scim(reply).send(discoveryList(docs.resourceTypes)),
  );

  app.get(
    '/scim/v2/ResourceTypes/:id',
    {
      config,
      schema: {
        ...common,
        summary: 'One SCIM resource type, by id',
        description: `${headersNote} 404 for any id but User and Group.`,
        params: ResourceTypeParams,
        response: { 200: ResourceType },
      },
    },
    async (req, reply) => scim(reply).send(findResourceType(docs, req.params.id)),
  );
};

export default scimDiscoveryRoutes;
