import { iso } from './format.js';
import type { Rng } from './rng.js';
import * as D from './synthetic-data.js';

/** Where a user came from and whether they can be reached: attribution and subscription columns, as COPY text. */
export interface Marketing {
  /** The four attributed_* columns, tab-separated. */
  attribution: string;
  pushSubscribe: string;
  emailSubscribe: string;
  pushOptedInAt: string;
  /** Milliseconds, or -1 while the app is still installed. */
  uninstalledAt: number;
}

export function drawMarketing(r: Rng, created: number, lastActive: number, now: number): Marketing {
  const attribution = r.chance(0.55)
    ? `${r.pick(D.ATTRIBUTION.campaigns)}\t${r.pick(D.ATTRIBUTION.sources)}\t${r.pick(D.ATTRIBUTION.adgroups)}\t${r.pick(D.ATTRIBUTION.ads)}`
    : '\\N\t\\N\t\\N\t\\N';
  const pushRoll = r.next();
  const pushSubscribe = pushRoll < 0.45 ? 'opted_in' : pushRoll < 0.85 ? 'subscribed' : 'unsubscribed';
  const emailRoll = r.next();
  const emailSubscribe = emailRoll < 0.3 ? 'opted_in' : emailRoll < 0.85 ? 'subscribed' : 'unsubscribed';
  const pushOptedInAt = pushSubscribe === 'opted_in' ? iso(r.between(created, lastActive)) : '\\N';
  const uninstalledAt = r.chance(0.08) ? r.between(lastActive, now) : -1;
  return { attribution, pushSubscribe, emailSubscribe, pushOptedInAt, uninstalledAt };
}
