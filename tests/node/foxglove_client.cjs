// Reads a run served by `lrbc-inspector serve` with Foxglove's own client library
// (npm @foxglove/ws-protocol, with ws), as Foxglove's apps do: subscribes to every
// channel and decodes every message as the app does (decode.cjs). Prints one JSON
// summary: what the server advertised, the frames, images and ring entries received,
// and each channel that failed to decode.
//
// node foxglove_client.cjs ws://HOST:PORT FRAMES IMAGES
"use strict";
const { FoxgloveClient } = require("@foxglove/ws-protocol");
const WebSocket = require("ws");
const { decoderFor, noteOf, toJson } = require("./decode.cjs");

const [url, wantFrames, wantImages] = [
  process.argv[2],
  Number(process.argv[3] ?? 50),
  Number(process.argv[4] ?? 0),
];

const client = new FoxgloveClient({ ws: new WebSocket(url, ["foxglove.sdk.v1"]) });
const summary = {
  server: null,
  channels: [],
  frames: 0,
  seqs: [],
  rewards: 0,
  images: 0,
  imageSchema: null,
  ringEntries: [],
  failures: {},
  errors: [],
};
// Subscription id → its channel's topic and decoder.
const subs = new Map();
let done = false;

function finish(code) {
  if (done) return;
  done = true;
  summary.seqsIncreasing = summary.seqs.every((s, i) => i === 0 || BigInt(s) > BigInt(summary.seqs[i - 1]));
  summary.seqs = summary.seqs.slice(0, 5);
  console.log(toJson(summary));
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
    if (ch.topic.startsWith("/lrbc/camera/") && summary.imageSchema === null) summary.imageSchema = ch.schemaName;
    // Binary schemas come base64 in the advertisement.
    const schema = ch.encoding === "flatbuffer" ? Buffer.from(ch.schema, "base64") : null;
    let decode = null;
    try {
      decode = decoderFor(ch.encoding, ch.schemaName, schema);
    } catch (e) {
      summary.failures[ch.topic] = String(e?.message ?? e);
    }
    subs.set(client.subscribe(ch.id), { topic: ch.topic, decode });
  }
});
client.on("message", ({ subscriptionId, data }) => {
  const sub = subs.get(subscriptionId);
  if (!sub || !sub.decode) return;
  let v;
  try {
    v = sub.decode(new Uint8Array(data.buffer, data.byteOffset, data.byteLength));
  } catch (e) {
    summary.failures[sub.topic] ??= String(e?.message ?? e);
    return;
  }
  const note = noteOf(sub.topic, v);
  if (sub.topic === "/lrbc/frame") {
    summary.frames += 1;
    summary.seqs.push(note.frame_seq);
    summary.rewards = note.rewards.length;
  } else if (sub.topic.startsWith("/lrbc/camera/")) {
    summary.images += 1;
  } else if (note && "ring" in note && summary.ringEntries.length < 100) {
    summary.ringEntries.push(note);
  }
  if (summary.frames >= wantFrames && summary.images >= wantImages && summary.ringEntries.length > 0) finish(0);
});
