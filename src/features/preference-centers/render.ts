/**
 * The Liquid of a preference center's pages, as Braze documents it for API-built centers, and nothing more (no
 * filters, conditions or loops): docs/preference-centers.md lists what is resolved. Every value put into the page is
 * HTML-escaped (quotes included), which also keeps it inside the quoted JavaScript strings Braze's example puts the
 * states in. Any other `{{ ... }}` or `{% ... %}` renders as nothing, as an unknown Liquid variable does.
 */

/** The user as the page shows them. */
export interface PageUser {
  externalId: string | null;
  email: string | null;
  firstName: string | null;
  lastName: string | null;
  /** The global email state; a user never given one counts as `subscribed`, Braze's default. */
  emailState: 'opted_in' | 'subscribed' | 'unsubscribed';
  /** group id (lower case) -> state; a group never set for the user is `unsubscribed`. */
  groupStates: Map<string, 'subscribed' | 'unsubscribed'>;
}

export interface PageFrame {
  title: string;
  options: Record<string, unknown>;
  /** Where the form posts (`{{preference_center_submit_url}}`). */
  submitUrl: string;
}

/** The form field names the Liquid tags give: what the submission reads back (./page.ts). */
export const EMAIL_GLOBAL_FIELD = 'email_global_state';
export const groupField = (groupId: string) => `subscription_group[${groupId.toLowerCase()}]`;

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };
export const escapeHtml = (s: string) => s.replace(/[&<>"']/g, (c) => ESCAPES[c]!);

const STANDARD_ATTRIBUTES: Record<string, (u: PageUser) => string | null> = {
  email_address: (u) => u.email,
  first_name: (u) => u.firstName,
  last_name: (u) => u.lastName,
  user_id: (u) => u.externalId,
};

function outputValue(expr: string, user: PageUser, frame: PageFrame): string {
  if (expr === 'preference_center_submit_url') return frame.submitUrl;
  const state = /^subscribed_state\.\$\{\s*([^}\s]+)\s*\}$/.exec(expr);
  if (state) {
    const key = state[1]!;
    return key === 'email_global' ? user.emailState : (user.groupStates.get(key.toLowerCase()) ?? 'unsubscribed');
  }
  const attribute = /^\$\{\s*([a-z_]+)\s*\}$/.exec(expr);
  if (attribute) return STANDARD_ATTRIBUTES[attribute[1]!]?.(user) ?? '';
  return '';
}

function tagValue(tag: string): string {
  const field = /^form_field_name\s+:(\w+)(?:\s+(\S+))?$/.exec(tag);
  if (!field) return '';
  if (field[1] === 'email_global_state' && field[2] === undefined) return EMAIL_GLOBAL_FIELD;
  if (field[1] === 'subscription_group' && field[2] !== undefined) return groupField(field[2]);
  return '';
}

/** The page's HTML with its Liquid resolved for the user. */
export function renderLiquid(html: string, user: PageUser, frame: PageFrame): string {
  // An output's braces may hold `${...}` (Braze's attribute syntax), whose closing brace is not the output's end.
  return html.replace(
    /\{\{-?((?:\$\{[^}]*\}|[^{}])*?)-?\}\}|\{%-?([\s\S]*?)-?%\}/g,
    (_m, output?: string, tag?: string) =>
      escapeHtml(output !== undefined ? outputValue(output.trim(), user, frame) : tagValue((tag ?? '').trim())),
  );
}

/**
 * The head the options ask for (viewport meta, icon links) and the title when the page has none, put after `<head>`
 * (or in front of the page when it has no head).
 */
export function withHead(html: string, frame: PageFrame): string {
  const parts: string[] = [];
  const viewport = frame.options['meta-viewport-content'];
  if (typeof viewport === 'string') parts.push(`<meta name="viewport" content="${escapeHtml(viewport)}">`);
  // Stored options were checked when written through the API; older rows are read defensively all the same.
  const links: unknown = frame.options['links-tags'];
  for (const link of Array.isArray(links) ? (links as Record<string, unknown>[]) : []) {
    const attrs = (['rel', 'type', 'sizes', 'color', 'href'] as const)
      .filter((k) => typeof link[k] === 'string')
      .map((k) => `${k}="${escapeHtml(link[k] as string)}"`);
    parts.push(`<link ${attrs.join(' ')}>`);
  }
  if (!/<title[\s>]/i.test(html)) parts.push(`<title>${escapeHtml(frame.title)}</title>`);
  if (parts.length === 0) return html;
  const head = /<head(\s[^>]*)?>/i.exec(html);
  if (!head) return `${parts.join('\n')}\n${html}`;
  const at = head.index + head[0].length;
  return `${html.slice(0, at)}\n${parts.join('\n')}${html.slice(at)}`;
}

/** A page of our own (a refused or expired link, a refused form): the reason, escaped, and nothing else. */
export function messagePage(title: string, message: string): string {
  return (
    `<!doctype html>\n<html lang="en"><head><meta charset="utf-8"><meta name="robots" content="noindex">` +
    `<title>${escapeHtml(title)}</title></head><body><h1>${escapeHtml(title)}</h1><p>${escapeHtml(message)}</p></body></html>`
  );
}
