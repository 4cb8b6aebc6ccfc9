"""Another MCAP writer's copy of a recording: the PyPI `mcap` package reads FILE and
writes its schemas, channels, messages and metadata to OUT with chunks of COMPRESSION
(zstd, lz4 or none) and the writer's own chunk size, as the `mcap` CLI or Foxglove's
exports would. Prints one JSON object: the messages copied.

    python3 recompress.py FILE OUT zstd|lz4|none
"""

import json
import sys

from mcap.reader import make_reader
from mcap.writer import CompressionType, Writer


def main() -> None:
    src, out, kind = sys.argv[1], sys.argv[2], sys.argv[3]
    compression = {
        "zstd": CompressionType.ZSTD,
        "lz4": CompressionType.LZ4,
        "none": CompressionType.NONE,
    }[kind]
    copied = 0
    with open(src, "rb") as f, open(out, "wb") as o:
        reader = make_reader(f)
        header = reader.get_header()
        writer = Writer(o, compression=compression)
        writer.start(profile=header.profile, library="python mcap")
        schemas: dict[int, int] = {}
        channels: dict[int, int] = {}
        for schema, channel, message in reader.iter_messages(log_time_order=False):
            if schema is not None and schema.id not in schemas:
                schemas[schema.id] = writer.register_schema(
                    name=schema.name, encoding=schema.encoding, data=schema.data
                )
            if channel.id not in channels:
                channels[channel.id] = writer.register_channel(
                    topic=channel.topic,
                    message_encoding=channel.message_encoding,
                    schema_id=schemas.get(channel.schema_id, 0),
                    metadata=dict(channel.metadata),
                )
            writer.add_message(
                channel_id=channels[channel.id],
                log_time=message.log_time,
                publish_time=message.publish_time,
                data=message.data,
                sequence=message.sequence,
            )
            copied += 1
        for m in reader.iter_metadata():
            writer.add_metadata(m.name, dict(m.metadata))
        writer.finish()
    print(json.dumps({"messages": copied}))


if __name__ == "__main__":
    main()
