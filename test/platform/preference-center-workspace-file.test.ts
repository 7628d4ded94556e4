import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile, WorkspaceFileError } from '../../src/features/workspace/parse.js';
import { useTestEnv } from '../helpers/context.js';
import { callApi, type Method } from '../helpers/http.js';

/**
 * The workspace file's preference centers and the API agree (docs/preference-centers.md): the API may create centers
 * the file does not name and update those it does, and applying the file again removes nothing the API added or set.
 */

const env = useTestEnv({ config: { RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE: '1000' } });
const tag = randomUUID().slice(0, 8);
const KEY = `ces_key_prefs_${tag}_000000000000000`;

const file = (centers: string) => `
company:
  name: Prefs Co ${tag}
workspaces:
  - name: Prefs WS ${tag}
    api_keys:
      - { name: ops, secret: ${KEY}, permissions: all }
    preference_centers:
${centers}
`;
const DECLARED = `      - id: pc-news
        name: newsletters
        title: From the file
        page_html: "<p>file page</p>"
        options: { meta-viewport-content: "width=device-width" }`;

const apply = async (text: string) => applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text));
const call = (method: Method, url: string, body?: unknown) => callApi(env.app, method, url, { key: KEY, body });
const detail = async (id: string) => (await call('GET', `/preference_center/v1/${id}`)).body;

describe('the workspace file and the preference center API', () => {
  it('applying the file again keeps the centers the API created and what it set on the declared one', async () => {
    await apply(file(DECLARED));
    expect(await detail('pc-news')).toMatchObject({ name: 'newsletters', state: 'active', confirmation_page_html: '' });

    const created = await call('POST', '/preference_center/v1', {
      name: 'from_api',
      preference_center_page_html: '<p>api page</p>',
      confirmation_page_html: '<p>api thanks</p>',
    });
    expect(created.status).toBe(201);
    const updated = await call('PUT', '/preference_center/v1/pc-news', {
      preference_center_page_html: '<p>api edit</p>',
      confirmation_page_html: '<p>api confirmation</p>',
      state: 'draft',
      options: { 'links-tags': [{ rel: 'icon', href: 'https://example.com/i.png' }] },
    });
    expect(updated.status).toBe(200);

    const summary = await apply(file(DECLARED));
    expect(summary.counts.preference_centers).toEqual({ created: 0, updated: 1, unchanged: 0 });
    const list = (await call('GET', '/preference_center/v1/list')).body.preference_centers;
    expect(list.map((c: { name: string }) => c.name).sort()).toEqual(['from_api', 'newsletters']);
    expect(await detail(created.body.preference_center_api_id)).toMatchObject({
      preference_center_page_html: '<p>api page</p>',
    });
    // The file's fields win; those it leaves out keep what the API set; options are merged.
    expect(await detail('pc-news')).toMatchObject({
      preference_center_title: 'From the file',
      preference_center_page_html: '<p>file page</p>',
      confirmation_page_html: '<p>api confirmation</p>',
      state: 'draft',
      preference_center_options: {
        'meta-viewport-content': 'width=device-width',
        'links-tags': [{ rel: 'icon', href: 'https://example.com/i.png' }],
      },
    });
    // A third apply finds everything as declared.
    expect((await apply(file(DECLARED))).counts.preference_centers).toEqual({ created: 0, updated: 0, unchanged: 1 });
  });

  it('refuses a name another center has, in the file or through the API, and changes nothing', async () => {
    const before = (await call('GET', '/preference_center/v1/list')).body;
    const clash = `${DECLARED}
      - { id: pc-other, name: from_api }`;
    await expect(apply(file(clash))).rejects.toThrow(
      /another preference center of this workspace .* is named "from_api"/,
    );
    const twice = `${DECLARED}
      - { id: pc-twice, name: newsletters }`;
    await expect(apply(file(twice))).rejects.toBeInstanceOf(WorkspaceFileError);
    expect((await call('GET', '/preference_center/v1/list')).body).toEqual(before);
    const taken = await call('POST', '/preference_center/v1', {
      name: 'newsletters',
      preference_center_page_html: 'p',
      confirmation_page_html: 'c',
    });
    expect(taken.body).toEqual({ message: 'A preference center with this name already exists' });
  });
});
