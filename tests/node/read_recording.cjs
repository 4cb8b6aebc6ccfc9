// Reads a recording as Foxglove's app reads a file (npm @mcap/core's indexed reader,
// chunks decompressed by @mcap/support's handlers) and decodes every message of every
// channel as the app does (decode.cjs). Prints one JSON summary: per topic, its
// messages and decoding failures; the first frame; ring entries; camera images.
//
// node read_recording.cjs FILE.mcap
"use strict";
const fs = require("fs/promises");
const { McapIndexedReader } = require("@mcap/core");
const { loadDecompressHandlers } = require("@mcap/support");
const { decoderFor, noteOf, toJson } = require("./decode.cjs");

async function main() {
  const file = await fs.open(process.argv[2], "r");
  const size = (await file.stat()).size;
  const readable = {
    size: async () => BigInt(size),
    read: async (offset, length) => {
      const buf = Buffer.alloc(Number(length));
      await file.read(buf, 0, Number(length), Number(offset));
      return new Uint8Array(buf.buffer, buf.byteOffset, buf.byteLength);
    },
  };
  const decompressHandlers = await loadDecompressHandlers();
  const reader = await McapIndexedReader.Initialize({ readable, decompressHandlers });
  const topics = {};
  const decoders = new Map();
  for (const [id, ch] of reader.channelsById) {
    const schema = reader.schemasById.get(ch.schemaId);
    const t = (topics[ch.topic] = { encoding: ch.messageEncoding, schema: schema?.name ?? null, messages: 0, failures: 0, error: null });
    try {
      decoders.set(id, decoderFor(ch.messageEncoding, schema?.name, schema?.data));
    } catch (e) {
      t.error = String(e?.message ?? e);
    }
  }
  const summary = { compressions: [...new Set(reader.chunkIndexes.map((c) => c.compression))], topics, firstFrame: null, ringEntries: [], images: {} };
  for await (const m of reader.readMessages()) {
    const ch = reader.channelsById.get(m.channelId);
    const t = topics[ch.topic];
    t.messages += 1;
    const decode = decoders.get(m.channelId);
    let v;
    try {
      if (!decode) throw new Error(t.error);
      v = decode(m.data);
    } catch (e) {
      t.failures += 1;
      t.error ??= String(e?.message ?? e);
      continue;
    }
    const note = noteOf(ch.topic, v);
    if (ch.topic === "/lrbc/frame") summary.firstFrame ??= note;
    else if (note && "ring" in note) summary.ringEntries.push(note);
    else if (note && "width" in note) summary.images[ch.topic] ??= note;
  }
  await file.close();
  console.log(toJson(summary));
}

main().catch((e) => {
  console.error(String(e?.stack ?? e));
  process.exit(1);
});
