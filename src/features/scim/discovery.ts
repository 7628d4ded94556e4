import { notFound } from '../../platform/errors.js';
import { SCIM_EXTENSION_SCHEMA, SCIM_LIMITS, SCIM_LIST_SCHEMA, SCIM_USER_SCHEMA } from './schemas.js';
import { SCIM_GROUP_EXTENSION_SCHEMA, SCIM_GROUP_SCHEMA } from './group-schemas.js';
import {
  attr,
  complex,
  dashboardAttributes,
  effectivePermissionsAttribute,
  groupAttributes,
  groupExtensionAttributes,
  readOnly,
  userAttributes,
  type ScimAttribute,
} from './schema-attributes.js';

export { SCIM_ATTRIBUTE_TYPES, SCIM_MUTABILITIES, SCIM_RETURNED, SCIM_UNIQUENESS } from './schema-attributes.js';

/**
 * The SCIM discovery documents (RFC 7644 4): what this service provider supports (RFC 7643 5), the schemas of its
 * resources (RFC 7643 7) and its resource types, User and Group (RFC 7643 6). Plain data built from the limits and URNs
 * the User endpoints use, so the two cannot drift apart; only `location`s depend on the deployment (the public base
 * URL).
 */

export const SCIM_SCHEMA_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Schema';
export const SCIM_SERVICE_PROVIDER_CONFIG_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ServiceProviderConfig';
export const SCIM_RESOURCE_TYPE_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:ResourceType';

interface Meta {
  resourceType: 'Schema' | 'ResourceType' | 'ServiceProviderConfig';
  location: string;
}

export interface ScimSchemaResource {
  schemas: [typeof SCIM_SCHEMA_SCHEMA];
  id: string;
  name: string;
  description: string;
  attributes: ScimAttribute[];
  meta: Meta;
}

export interface ScimResourceType {
  schemas: [typeof SCIM_RESOURCE_TYPE_SCHEMA];
  id: string;
  name: string;
  description: string;
  endpoint: string;
  schema: string;
  schemaExtensions: { schema: string; required: boolean }[];
  meta: Meta;
}

export interface ScimServiceProviderConfig {
  schemas: [typeof SCIM_SERVICE_PROVIDER_CONFIG_SCHEMA];
  documentationUri: string;
  patch: { supported: boolean };
  bulk: { supported: boolean; maxOperations: number; maxPayloadSize: number };
  filter: { supported: boolean; maxResults: number };
  changePassword: { supported: boolean };
  sort: { supported: boolean };
  etag: { supported: boolean };
  authenticationSchemes: {
    type: string;
    name: string;
    description: string;
    specUri?: string;
    documentationUri?: string;
    primary: boolean;
  }[];
  meta: Meta;
}

export interface ScimDiscoveryList<T> {
  schemas: [typeof SCIM_LIST_SCHEMA];
  totalResults: number;
  startIndex: number;
  itemsPerPage: number;
  Resources: T[];
}

const supported = (name: string, description: string) =>
  complex(name, description, [attr('supported', 'boolean', `Whether ${name} is supported.`, { required: true })], {
    required: true,
  });

/** RFC 7643 8.7.2: every attribute of the service provider configuration is readOnly. */
const serviceProviderConfigAttributes: ScimAttribute[] = [
  attr(
    'documentationUri',
    'reference',
    "An HTTP-addressable URL pointing to the service provider's human-consumable help documentation.",
    { referenceTypes: ['external'] },
  ),
  supported('patch', 'A complex type that specifies PATCH configuration options.'),
  complex(
    'bulk',
    'A complex type that specifies bulk configuration options.',
    [
      attr('supported', 'boolean', 'Whether bulk operations are supported.', { required: true }),
      attr('maxOperations', 'integer', 'The maximum number of operations of one bulk request.', { required: true }),
      attr('maxPayloadSize', 'integer', 'The maximum payload size of one bulk request, in bytes.', { required: true }),
    ],
    { required: true },
  ),
  complex(
    'filter',
    'A complex type that specifies FILTER options.',
    [
      attr('supported', 'boolean', 'Whether filtering is supported.', { required: true }),
      attr('maxResults', 'integer', 'The maximum number of resources returned in one response.', { required: true }),
    ],
    { required: true },
  ),
  supported('changePassword', 'A complex type that specifies configuration options related to changing a password.'),
  supported('sort', 'A complex type that specifies sort result options.'),
  supported('etag', 'A complex type that specifies ETag configuration options.'),
  complex(
    'authenticationSchemes',
    'A complex type that specifies supported authentication scheme properties.',
    [
      attr('type', 'string', 'The authentication scheme.', {
        required: true,
        canonicalValues: ['oauth', 'oauth2', 'oauthbearertoken', 'httpbasic', 'httpdigest'],
      }),
      attr('name', 'string', 'The common authentication scheme name, e.g., HTTP Basic.', { required: true }),
      attr('description', 'string', 'A description of the authentication scheme.', { required: true }),
      attr('specUri', 'reference', "An HTTP-addressable URL pointing to the authentication scheme's specification.", {
        referenceTypes: ['external'],
      }),
      attr(
        'documentationUri',
        'reference',
        "An HTTP-addressable URL pointing to the authentication scheme's usage documentation.",
        { referenceTypes: ['external'] },
      ),
      attr('primary', 'boolean', 'Whether this is the preferred authentication scheme.'),
    ],
    { multiValued: true, required: true },
  ),
].map(readOnly);

/** RFC 7643 8.7.2. */
const resourceTypeAttributes: ScimAttribute[] = [
  attr('id', 'string', "The resource type's server unique id; the same as its name here."),
  attr('name', 'string', 'The resource type name, used in meta.resourceType.', { required: true }),
  attr('description', 'string', "The resource type's human-readable description."),
  attr(
    'endpoint',
    'reference',
    "The resource type's HTTP-addressable endpoint relative to the base URL, e.g., /Users.",
    { required: true, referenceTypes: ['uri'] },
  ),
  attr('schema', 'reference', "The resource type's primary (base) schema URI.", {
    required: true,
    caseExact: true,
    referenceTypes: ['uri'],
  }),
  complex(
    'schemaExtensions',
    "A list of URIs of the resource type's schema extensions.",
    [
      attr('schema', 'reference', 'The URI of a schema extension.', {
        required: true,
        caseExact: true,
        referenceTypes: ['uri'],
      }),
      attr('required', 'boolean', 'Whether the extension is required for the resource type.', { required: true }),
    ],
    { multiValued: true },
  ),
].map(readOnly);

/** Everything the discovery endpoints serve, for the deployment whose public base URL is `baseUrl`. */
export interface DiscoveryDocuments {
  serviceProviderConfig: ScimServiceProviderConfig;
  schemas: ScimSchemaResource[];
  resourceTypes: ScimResourceType[];
}

export function discoveryDocuments(baseUrl: string): DiscoveryDocuments {
  const scimBase = `${baseUrl}/scim/v2`;
  return {
    serviceProviderConfig: serviceProviderConfig(baseUrl, scimBase),
    schemas: schemaResources(scimBase),
    resourceTypes: resourceTypes(scimBase),
  };
}

/** RFC 7643 5: what this service supports of the protocol, and how a client authenticates. */
function serviceProviderConfig(baseUrl: string, scimBase: string): ScimServiceProviderConfig {
  return {
    schemas: [SCIM_SERVICE_PROVIDER_CONFIG_SCHEMA],
    documentationUri: `${baseUrl}/docs`,
    patch: { supported: true },
    bulk: { supported: false, maxOperations: 0, maxPayloadSize: 0 },
    filter: { supported: true, maxResults: SCIM_LIMITS.maxCount },
    changePassword: { supported: false },
    sort: { supported: false },
    etag: { supported: false },
    authenticationSchemes: [
      {
        type: 'oauthbearertoken',
        name: 'OAuth Bearer Token',
        description: 'A SCIM token of the company in Authorization: Bearer, with an X-Request-Origin header',
        specUri: 'https://www.rfc-editor.org/info/rfc6750',
        primary: true,
      },
    ],
    meta: { resourceType: 'ServiceProviderConfig', location: `${scimBase}/ServiceProviderConfig` },
  };
}

/** RFC 7643 7: every schema this service serves, each with its attributes. */
function schemaResources(scimBase: string): ScimSchemaResource[] {
  const schema = (id: string, name: string, description: string, attributes: ScimAttribute[]): ScimSchemaResource => ({
    schemas: [SCIM_SCHEMA_SCHEMA],
    id,
    name,
    description,
    attributes,
    meta: { resourceType: 'Schema', location: `${scimBase}/Schemas/${id}` },
  });
  return [
    schema(SCIM_USER_SCHEMA, 'User', 'A dashboard user of the company', userAttributes),
    schema(
      SCIM_EXTENSION_SCHEMA,
      'DashboardUser',
      'The dashboard access of a user: department, permissions and last sign-in. Responses carry it and the same attributes at the root; a request may give them in either place (the root wins).',
      [...dashboardAttributes('Also at the root of the User, with the same value.'), effectivePermissionsAttribute],
    ),
    schema(
      SCIM_GROUP_SCHEMA,
      'Group',
      'A group of dashboard users, as an identity provider pushes it',
      groupAttributes,
    ),
    schema(
      SCIM_GROUP_EXTENSION_SCHEMA,
      'DashboardGroup',
      "The group's role: the permissions it grants each member. A user's effective permissions are its own plus its groups'.",
      groupExtensionAttributes,
    ),
    schema(
      SCIM_SERVICE_PROVIDER_CONFIG_SCHEMA,
      'Service Provider Configuration',
      "Schema for representing the service provider's configuration",
      serviceProviderConfigAttributes,
    ),
    schema(
      SCIM_RESOURCE_TYPE_SCHEMA,
      'ResourceType',
      'Specifies the schema that describes a SCIM resource type',
      resourceTypeAttributes,
    ),
  ];
}

/** RFC 7643 6: the resource types, Users and Groups, each with its extension. */
function resourceTypes(scimBase: string): ScimResourceType[] {
  return [
    {
      schemas: [SCIM_RESOURCE_TYPE_SCHEMA],
      id: 'User',
      name: 'User',
      description: 'Dashboard users of the company',
      endpoint: '/Users',
      schema: SCIM_USER_SCHEMA,
      schemaExtensions: [{ schema: SCIM_EXTENSION_SCHEMA, required: false }],
      meta: { resourceType: 'ResourceType', location: `${scimBase}/ResourceTypes/User` },
    },
    {
      schemas: [SCIM_RESOURCE_TYPE_SCHEMA],
      id: 'Group',
      name: 'Group',
      description: 'Groups of dashboard users; a group carries a role (the permissions it grants)',
      endpoint: '/Groups',
      schema: SCIM_GROUP_SCHEMA,
      schemaExtensions: [{ schema: SCIM_GROUP_EXTENSION_SCHEMA, required: false }],
      meta: { resourceType: 'ResourceType', location: `${scimBase}/ResourceTypes/Group` },
    },
  ];
}

/** RFC 7644 4: a list of schemas or resource types is a ListResponse holding all of them (no paging, no filter). */
export function discoveryList<T>(resources: T[]): ScimDiscoveryList<T> {
  return {
    schemas: [SCIM_LIST_SCHEMA],
    totalResults: resources.length,
    startIndex: 1,
    itemsPerPage: resources.length,
    Resources: resources,
  };
}

/** Schema URIs, like attribute names, are compared ignoring letter case (RFC 7643 2.1). */
export function findSchema(docs: DiscoveryDocuments, id: string): ScimSchemaResource {
  const found = docs.schemas.find((s) => s.id.toLowerCase() === id.toLowerCase());
  if (!found) throw notFound('Schema not found');
  return found;
}

export function findResourceType(docs: DiscoveryDocuments, id: string): ScimResourceType {
  const found = docs.resourceTypes.find((t) => t.id.toLowerCase() === id.toLowerCase());
  if (!found) throw notFound('ResourceType not found');
  return found;
}
