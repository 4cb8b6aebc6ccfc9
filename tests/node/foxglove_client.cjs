// Reads a run served by `lrbc-inspector serve` with Foxglove's own client library
// (npm @foxglove/ws-protocol, with ws), as Foxglove's apps do, and prints one JSON
// summary: what the server advertised, and the frames and images received.
//
// node foxglove_client.cjs ws://HOST:PORT FRAMES IMAGES
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");

const [url, wantFrames, wantImages] = [
  process.argv[2],
  Number(process.argv[3] ?? 50),
  Number(process.argv[4] ?? 0),
];

// A table's field of a FlatBuffer: the absolute offset of field `index`, or 0.
function field(dv, table, index) {
  const vtable = table - dv.getInt32(table, true);
  const vtLen = dv.getUint16(vtable, true);
  const at = 4 + 2 * index;
  if (at >= vtLen) return 0;
  const off = dv.getUint16(vtable + at, true);
  return off ? table + off : 0;
}

// frame_seq (field 0) and the length of rewards (field 4) of an lrbc.recording.Frame.
function frame(dv) {
  const root = dv.getUint32(0, true);
  const seqAt = field(dv, root, 0);
  const rewardsAt = field(dv, root, 4);
  const vec = rewardsAt ? rewardsAt + dv.getUint32(rewardsAt, true) : 0;
  return {
    seq: seqAt ? Number(dv.getBigUint64(seqAt, true)) : 0,
    rewards: vec ? dv.getUint32(vec, true) : 0,
  };
}

const client = new FoxgloveClient({ ws: new WebSocket(url, ["foxglove.sdk.v1"]) });
const summary = { server: null, channels: [], frames: 0, seqs: [], rewards: 0, images: 0, imageSchema: null, errors: [] };
const subs = new Map();
let done = false;

function finish(code) {
  if (done) return;
  done = true;
  summary.seqsIncreasing = summary.seqs.every((s, i) => i === 0 || s > summary.seqs[i - 1]);
  summary.seqs = summary.seqs.slice(0, 5);
  console.log(JSON.stringify(summary));
  client.close();
  process.exit(code);
}

setTimeout(() => {
  summary.errors.push("timed out");
  finish(1);
}, 30000);

client.on("serverInfo", (info) => {
  summary.server = { name: info.name, capabilities: info.capabilities };
});
client.on("error", (e) => summary.errors.push(String(e?.message ?? e)));
client.on("close", () => finish(done ? 0 : 1));
client.on("advertise", (channels) => {
  for (const ch of channels) {
    summary.channels.push({
      topic: ch.topic,
      encoding: ch.encoding,
      schemaName: ch.schemaName,
      schemaEncoding: ch.schemaEncoding ?? null,
    });
    const image = ch.topic.startsWith("/lrbc/camera/") && summary.imageSchema === null;
    if (ch.topic === "/lrbc/frame" || (image && wantImages > 0)) {
      if (image) summary.imageSchema = ch.schemaName;
      subs.set(client.subscribe(ch.id), ch.topic);
    }
  }
});
client.on("message", ({ subscriptionId, data }) => {
  const topic = subs.get(subscriptionId);
  if (topic === "/lrbc/frame") {
    const f = frame(data);
    summary.frames += 1;
    summary.seqs.push(f.seq);
    summary.rewards = f.rewards;
  } else if (topic) {
    summary.images += 1;
  }
  if (summary.frames >= wantFrames && summary.images >= wantImages) finish(0);
});
