import type { Rng } from './rng.js';
import type { World } from './world.js';

/**
 * The user_aliases array's elements. Each alias is also pushed onto `aliasLines` as a COPY line of profile_aliases,
 * the lookup table that finds the profile by alias.
 */
export function drawUserAliases(r: Rng, w: World, indexText: string, id: number, aliasLines: string[]): string {
  let userAliases = '';
  if (r.chance(0.7)) {
    const name = `amp-${w.seedTag}-${indexText}`;
    userAliases = `{"alias_name":"${name}","alias_label":"amplitude_id"}`;
    aliasLines.push(`${w.workspaceId}\tamplitude_id\t${name}\t${id}\n`);
  }
  if (r.chance(0.25)) {
    const name = `shop-${w.seedTag}-${indexText}`;
    userAliases += (userAliases ? ',' : '') + `{"alias_name":"${name}","alias_label":"shopify_customer_id"}`;
    aliasLines.push(`${w.workspaceId}\tshopify_customer_id\t${name}\t${id}\n`);
  }
  return userAliases;
}
