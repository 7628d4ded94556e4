// Messaging a user received: campaigns and canvases of the last 90 days, and content cards clicked.
import { DAY, bool, iso } from './format.js';
import type { Rng } from './rng.js';
import * as D from './synthetic-data.js';
import type { World } from './world.js';

/** The campaigns_received array's elements, received no earlier than `recentFloor`. */
export function drawCampaignsReceived(r: Rng, w: World, recentFloor: number, now: number): string {
  let campaigns = '';
  const campaignCount = r.chance(0.75) ? 0 : r.chance(0.8) ? 1 : 2;
  const campaignStart = r.int(w.campaigns.length);
  for (let c = 0; c < campaignCount; c++) {
    const campaign = w.campaigns[(campaignStart + c) % w.campaigns.length]!;
    const converted = r.chance(0.2);
    let entry =
      `{${campaign.json},"last_received":"${iso(r.between(recentFloor, now))}",` +
      `"engaged":{"opened_email":${bool(r.chance(0.4))},"opened_push":${bool(r.chance(0.25))},"clicked_email":${bool(r.chance(0.1))},"clicked_triggered_in_app_message":${bool(r.chance(0.05))}},` +
      `"converted":${bool(converted)},"multiple_converted":{"Primary Conversion Event - A":${bool(converted)},"Conversion Event - B":${bool(converted && r.chance(0.3))}}`;
    if (campaign.variations.length > 0) {
      const inControl = r.chance(0.1);
      const v = r.pick(campaign.variations);
      entry += inControl
        ? `,"variation_name":"Control","variation_api_id":"${campaign.controlId}","in_control":true`
        : `,${v},"in_control":false`;
    }
    campaigns += (campaigns ? ',' : '') + entry + '}';
  }
  return campaigns;
}

/** The canvases_received array's elements, entered no earlier than `recentFloor`. */
export function drawCanvasesReceived(r: Rng, w: World, recentFloor: number, now: number): string {
  let canvases = '';
  const canvasCount = r.chance(0.8) ? 0 : r.chance(0.8) ? 1 : 2;
  const canvasStart = r.int(w.canvases.length);
  for (let c = 0; c < canvasCount && c < w.canvases.length; c++) {
    const canvas = w.canvases[(canvasStart + c) % w.canvases.length]!;
    const entered = r.between(recentFloor, now);
    const lastMessage = Math.min(now, entered + r.int(2 * DAY));
    const inControl = r.chance(0.1);
    let steps = '';
    const stepCount = inControl ? 0 : 1 + r.int(2);
    for (let k = 0; k < stepCount; k++) {
      steps +=
        (steps ? ',' : '') +
        `{${canvas.steps[k]},"last_received":"${iso(Math.min(lastMessage, entered + k * 3_600_000))}"}`;
    }
    canvases +=
      (canvases ? ',' : '') +
      `{${canvas.json},"last_received_message":"${iso(lastMessage)}","last_entered":"${iso(entered)}",` +
      `"variation_name":"${inControl ? 'Control' : r.pick(D.CANVAS_VARIATIONS)}","in_control":${bool(inControl)},` +
      `"last_entered_control_at":${inControl ? `"${iso(entered)}"` : 'null'},"last_exited":"${iso(Math.min(now, lastMessage + r.int(5 * DAY)))}",` +
      `"steps_received":[${steps}]}`;
  }
  return canvases;
}

/** The cards_clicked array's elements. */
export function drawCardsClicked(r: Rng, w: World): string {
  let cardsClicked = '';
  if (r.chance(0.3)) {
    const n = Math.min(w.cards.length, 1 + r.int(2));
    const start = r.int(w.cards.length);
    for (let c = 0; c < n; c++) cardsClicked += (cardsClicked ? ',' : '') + w.cards[(start + c) % w.cards.length];
  }
  return cardsClicked;
}
