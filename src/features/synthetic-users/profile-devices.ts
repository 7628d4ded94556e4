// Devices, the apps on them, and their push tokens.
import { bool, iso, q } from './format.js';
import type { Rng } from './rng.js';
import * as D from './synthetic-data.js';
import type { World } from './world.js';

type App = World['apps'][number];

/** The devices, push_tokens and apps arrays' elements, comma-joined. */
export interface DeviceColumns {
  devices: string;
  pushTokens: string;
  apps: string;
}

/** `appOpens` is the user's app_opened count, which each app reports as its sessions. */
export function drawDevices(
  r: Rng,
  w: World,
  country: D.Country,
  pushSubscribe: string,
  appOpens: number,
  created: number,
  lastActive: number,
): DeviceColumns {
  const deviceCount = r.chance(0.85) ? 1 : r.chance(0.8) ? 2 : 3;
  let devices = '';
  let pushTokens = '';
  let apps = '';
  const appsSeen: string[] = [];
  for (let d = 0; d < deviceCount; d++) {
    const roll = r.next();
    const deviceId = r.uuid();
    const adTracking = r.chance(roll < 0.5 ? 0.4 : 0.8);
    const carrier = r.chance(0.9) ? q(r.pick(country.carriers)) : 'null';
    let platform: string;
    let device: string;
    if (roll < 0.5) {
      platform = 'ios';
      const idfa = adTracking ? q(r.uuid().toUpperCase()) : 'null';
      device = `{"model":"${r.pick(D.IOS_MODELS)}","os":"${r.pick(D.IOS_VERSIONS)}","carrier":${carrier},"idfv":"${r.uuid().toUpperCase()}","idfa":${idfa},"device_id":"${deviceId}","ad_tracking_enabled":${bool(adTracking)}}`;
    } else if (roll < 0.95) {
      platform = 'android';
      const adId = adTracking ? q(r.uuid()) : 'null';
      device = `{"model":"${r.pick(D.ANDROID_MODELS)}","os":"${r.pick(D.ANDROID_VERSIONS)}","carrier":${carrier},"device_id":"${deviceId}","store_ad_id":${adId},"ad_tracking_enabled":${bool(adTracking)}}`;
    } else {
      const tv = r.pick(D.TV_MODELS);
      platform = tv.platform;
      device = `{"model":"${tv.model}","os":"${tv.os}","carrier":null,"device_id":"${deviceId}","tv_ad_id":"${r.uuid()}","ad_tracking_enabled":${bool(adTracking)}}`;
    }
    devices += (devices ? ',' : '') + device;
    const app = w.apps.find((a) => a.platform === platform) ?? (d === 0 ? w.apps[0] : undefined);
    if (!app) continue;
    if (!appsSeen.includes(app.nameJson)) {
      appsSeen.push(app.nameJson);
      apps += (apps ? ',' : '') + appJson(r, app, appOpens, created, lastActive);
    }
    if ((platform === 'ios' || platform === 'android') && r.chance(0.6)) {
      pushTokens += (pushTokens ? ',' : '') + pushTokenJson(r, app, platform, deviceId, pushSubscribe);
    }
  }
  return { devices, pushTokens, apps };
}

function appJson(r: Rng, app: App, appOpens: number, created: number, lastActive: number): string {
  return `{"name":${app.nameJson},"platform":${app.platformJson},"version":"${r.pick(D.APP_VERSIONS)}","sessions":${appOpens},"first_used":"${iso(created)}","last_used":"${iso(lastActive)}"}`;
}

function pushTokenJson(r: Rng, app: App, platform: 'ios' | 'android', deviceId: string, pushSubscribe: string): string {
  const token = platform === 'ios' ? r.hex(8) : `${r.hex(3).slice(0, 22)}:APA91b${r.hex(10)}`;
  const enabled = pushSubscribe !== 'unsubscribed' && r.chance(0.9);
  return `{"app":${app.nameJson},"platform":${app.platformJson},"token":"${token}","device_id":"${deviceId}","notifications_enabled":${bool(enabled)}}`;
}
