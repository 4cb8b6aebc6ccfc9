// A channel's messages decoded as Foxglove's app decodes them: JSON by JSON.parse, and
// FlatBuffers with `flatbuffers_reflection` from the channel's binary schema, the root
// table found by the schema's name (as the app's parseFlatbufferSchema does).
"use strict";
const { ByteBuffer } = require("flatbuffers");
const { Parser, Table, Schema } = require("flatbuffers_reflection");

// A function of a message's bytes (Uint8Array) to its object; throws, as the app's
// decoder would, when the channel cannot be decoded.
function decoderFor(encoding, schemaName, schemaData) {
  if (encoding === "json") {
    const text = new TextDecoder();
    return (data) => JSON.parse(text.decode(data));
  }
  if (encoding === "flatbuffer") {
    const raw = Schema.getRootAsSchema(new ByteBuffer(schemaData));
    const objects = raw.unpack().objects;
    const typeIndex = objects.findIndex((o) => o.name === schemaName);
    if (typeIndex === -1) throw new Error(`no table ${schemaName} in the channel's schema`);
    const toObject = new Parser(raw).toObjectLambda(typeIndex, false);
    return (data) => {
      const bb = new ByteBuffer(data);
      const table = new Table(bb, typeIndex, bb.readInt32(bb.position()) + bb.position(), false);
      return toObject(table);
    };
  }
  throw new Error(`messages encoded as ${encoding} are not decoded`);
}

// What a test compares of a decoded message of `topic`.
function noteOf(topic, v) {
  if (topic === "/lrbc/frame") {
    return { frame_seq: String(v.frame_seq), rewards: Array.from(v.rewards ?? []), envs: Array.from(v.envs ?? []) };
  }
  if (topic.startsWith("/lrbc/ring/") && !topic.endsWith("/header")) {
    return { ring: v.ring, method: v.method, correlation_id: v.correlation_id, payload_type: v.payload_type };
  }
  if (topic.startsWith("/lrbc/camera/") || topic.startsWith("/lrbc/stream/")) {
    return { width: v.width ?? null, height: v.height ?? null, format: v.encoding ?? v.format ?? null };
  }
  return null;
}

// JSON with 64-bit integers as strings.
function toJson(v) {
  return JSON.stringify(v, (_k, x) => (typeof x === "bigint" ? x.toString() : x));
}

module.exports = { decoderFor, noteOf, toJson };
