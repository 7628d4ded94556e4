// One user as one COPY line of profiles. This is the hot loop of a million-user load, so JSON is written as text from
// pieces known to need no escaping (the vocabulary is checked once, in vocabulary.ts); only free text goes through
// JSON.stringify.
import { copyJson, copyText } from './copy-text.js';
import { DAY, iso, round } from './format.js';
import { drawUserAliases } from './profile-aliases.js';
import { drawCustomAttributes } from './profile-custom-attributes.js';
import { drawDevices } from './profile-devices.js';
import { drawCustomEvents, drawPurchases } from './profile-history.js';
import { drawIdentity } from './profile-identity.js';
import { drawMarketing } from './profile-marketing.js';
import { drawCampaignsReceived, drawCanvasesReceived, drawCardsClicked } from './profile-messaging.js';
import { Rng, fmix32 } from './rng.js';
import type { World } from './world.js';

/**
 * User `index` of the world's seed, under profile id `id`; its alias rows are pushed onto `aliasLines`.
 *
 * Every part is drawn from the one stream `r`, in turn: the order of the calls below, and of the draws inside each,
 * is what makes user `index` of a seed the same person in every load. Reordering any draw changes everyone.
 */
export function profileLine(w: World, index: number, id: number, aliasLines: string[]): string {
  const r = new Rng(fmix32(w.seedHash ^ Math.imul(index ^ 0x27d4eb2d, 0x9e3779b1)) ^ index);
  const now = w.now;

  // When: created within two years; about half of the older users have not been seen for 90 days or more.
  const created = now - 3_600_000 - r.int(730 * DAY);
  const isNew = created > now - 90 * DAY;
  const lastActive =
    isNew || r.chance(0.55) ? Math.max(created, now - r.int(89 * DAY)) : r.between(created, now - 90 * DAY);

  const who = drawIdentity(r, w, index, created);
  const marketing = drawMarketing(r, created, lastActive, now);
  const events = drawCustomEvents(r, created, lastActive);
  const purchases = drawPurchases(r, created, lastActive);
  const devices = drawDevices(r, w, who.country, marketing.pushSubscribe, events.appOpens, created, lastActive);
  // Messaging received in the last 90 days.
  const recentFloor = Math.max(created, now - 89 * DAY);
  const campaigns = drawCampaignsReceived(r, w, recentFloor, now);
  const canvases = drawCanvasesReceived(r, w, recentFloor, now);
  const cardsClicked = drawCardsClicked(r, w);
  const customAttributes = drawCustomAttributes(r, purchases.revenue, marketing.emailSubscribe, lastActive);
  const userAliases = drawUserAliases(r, w, who.indexText, id, aliasLines);

  const { uninstalledAt } = marketing;
  const updated = Math.max(lastActive, uninstalledAt);
  // The language is the stream's last draw, made here as the line is written.
  return (
    `${id}\t${w.workspaceId}\t${who.serviceId}\t${who.externalId}\t${who.randomBucket}\t${iso(created)}\t${iso(updated)}\t` +
    `${copyText(who.first)}\t${copyText(who.last)}\t${who.email}\t${who.dob}\t${copyText(who.city.name)}\t${who.country.code}\t${who.phone}\t` +
    `${r.pick(who.country.languages)}\t${who.city.tz}\t${who.coordinates}\t${who.gender}\t${round(purchases.revenue, 2)}\t${marketing.attribution}\t` +
    `${marketing.pushSubscribe}\t${marketing.emailSubscribe}\t${marketing.pushOptedInAt}\t${uninstalledAt < 0 ? '\\N' : iso(uninstalledAt)}\t` +
    `${copyJson(customAttributes)}\t[${userAliases}]\t[${devices.devices}]\t[${devices.pushTokens}]\t[${devices.apps}]\t` +
    `{${events.json}}\t{${purchases.json}}\t[${campaigns}]\t[${canvases}]\t[${cardsClicked}]\n`
  );
}
