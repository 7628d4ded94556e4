import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import {
  ERROR_SCHEMA,
  EXTENSION_SCHEMA,
  LIST_SCHEMA,
  USER_SCHEMA,
  groupBody,
  scimCall,
  seedScimCompanies,
  userBody,
  type ScimCompany,
} from '../helpers/scim.js';

/* RFC 7644 3.4.3: POST /.search, /Users/.search and /Groups/.search, with the GET list's filters, selection and paging. */

const SEARCH = 'urn:ietf:params:scim:api:messages:2.0:SearchRequest';
const env = useTestEnv();
let a: ScimCompany;
let b: ScimCompany;
const users: string[] = [];
let groupId: string;

beforeAll(async () => {
  ({ a, b } = await seedScimCompanies(env));
  for (const name of ['s1', 's2', 's3']) {
    const res = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody(`${name}@search.example.com`));
    users.push(res.body.id);
  }
  groupId = (await scimCall(env, 'POST', '/scim/v2/Groups', a.token, groupBody('Searchers', [users[0]!]))).body.id;
  await scimCall(env, 'POST', '/scim/v2/Users', b.token, userBody('s1@search.example.com'));
});

const search = (url: string, body: unknown, token = a.token) => scimCall(env, 'POST', url, token, body);

describe('POST .search', () => {
  it('/Users/.search answers what the GET list answers, with attributes as an array', async () => {
    const body = {
      schemas: [SEARCH],
      filter: 'userName eq "S2@search.example.com"',
      attributes: ['userName', 'name.givenName'],
      startIndex: 1,
      count: 10,
    };
    const res = await search('/scim/v2/Users/.search', body);
    expect(res.status, res.raw).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
    const get = await scimCall(
      env,
      'GET',
      `/scim/v2/Users?filter=${encodeURIComponent(body.filter)}&attributes=userName,name.givenName&startIndex=1&count=10`,
      a.token,
    );
    expect(res.body).toEqual(get.body);
    expect(res.body.Resources).toEqual([
      {
        schemas: [USER_SCHEMA, EXTENSION_SCHEMA],
        id: users[1],
        userName: 's2@search.example.com',
        name: { givenName: 'Ada' },
      },
    ]);
  });

  it('/Groups/.search finds by member and leaves members out on request', async () => {
    const res = await search('/scim/v2/Groups/.search', {
      schemas: [SEARCH],
      filter: `members[value eq "${users[0]}"]`,
      excludedAttributes: ['members'],
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.totalResults).toBe(1);
    expect(res.body.Resources[0]).toMatchObject({ id: groupId, displayName: 'Searchers' });
    expect(res.body.Resources[0]).not.toHaveProperty('members');
  });

  it('/.search at the root lists users, then groups, paged as one list; a filter matches the types whose attributes it names', async () => {
    const all = await search('/scim/v2/.search', { schemas: [SEARCH], attributes: ['id'] });
    expect(all.status, all.raw).toBe(200);
    expect(all.body).toMatchObject({ schemas: [LIST_SCHEMA], totalResults: 4, itemsPerPage: 4 });
    expect(all.body.Resources.map((r: { id: string }) => r.id)).toEqual([...users, groupId]);
    // A page that straddles users and groups.
    const straddle = await search('/scim/v2/.search', { schemas: [SEARCH], startIndex: 3, count: 2 });
    expect(straddle.body.Resources.map((r: { id: string }) => r.id)).toEqual([users[2], groupId]);
    expect(straddle.body.Resources[1].meta.resourceType).toBe('Group');
    const byName = await search('/scim/v2/.search', { schemas: [SEARCH], filter: 'displayName eq "searchers"' });
    expect(byName.body.Resources.map((r: { id: string }) => r.id)).toEqual([groupId]);
    const byUser = await search('/scim/v2/.search', {
      schemas: [SEARCH],
      filter: 'userName eq "s3@search.example.com"',
    });
    expect(byUser.body.Resources.map((r: { id: string }) => r.id)).toEqual([users[2]]);
    const counted = await search('/scim/v2/.search', { schemas: [SEARCH], count: 0 });
    expect(counted.body).toMatchObject({ totalResults: 4, itemsPerPage: 0, Resources: [] });
  });

  it('another company sees only its own', async () => {
    const res = await search('/scim/v2/.search', { schemas: [SEARCH] }, b.token);
    expect(res.body.totalResults).toBe(1);
    expect(res.body.Resources[0].id).not.toBe(users[0]);
  });

  it.each([
    ['no SearchRequest schema', { schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'] }, 'invalidValue'],
    ['a filter no type reads', { schemas: [SEARCH], filter: 'nickName sw "a"' }, 'invalidFilter'],
    ['count a string', { schemas: [SEARCH], count: 'ten' }, 'invalidValue'],
    ['attributes a number', { schemas: [SEARCH], attributes: 5 }, 'invalidValue'],
    [
      'too many attributes',
      { schemas: [SEARCH], attributes: Array.from({ length: 51 }, (_, i) => `a${i}`) },
      'invalidValue',
    ],
    ['sortOrder unknown', { schemas: [SEARCH], sortOrder: 'up' }, 'invalidValue'],
    ['malformed JSON', '{"schemas": [', 'invalidSyntax'],
  ])('%s: 400', async (_label, body, scimType) => {
    for (const url of ['/scim/v2/.search', '/scim/v2/Users/.search', '/scim/v2/Groups/.search']) {
      const res = await search(url, body);
      expect(res.status, `${url} ${res.raw}`).toBe(400);
      expect(res.body.schemas).toEqual([ERROR_SCHEMA]);
      expect(res.body.scimType).toBe(scimType);
    }
  });

  it('needs the SCIM token', async () => {
    const res = await search('/scim/v2/.search', { schemas: [SEARCH] }, a.apiKey);
    expect(res.status).toBe(401);
  });
});
