"""An independent reader of a flight recording (`lrbc-inspector record`): the PyPI `mcap`
package reads the file, the Python code flatc generates from schema/recording.fbs
decodes one frame, and from schema/foxglove_image.fbs the first camera image of each
`/lrbc/camera/...` topic; the chunks' compressions (zstd and lz4 through the package's
`zstandard` and `lz4`); the first ring entry of `/lrbc/ring/cmd_c2s` (JSON, its exact
bytes base64); the frames that carry the trainer's stamp (`action_time_ns`), and the
newest message of `/lrbc/rhythm` (the loop's rhythm, JSON). Prints one JSON object.

    python3 read_recording.py FILE.mcap
"""

import base64
import json
import math
import sys

from mcap.reader import make_reader

from foxglove.RawImage import RawImage
from lrbc.recording.Frame import Frame


def main() -> None:
    counts: dict[str, int] = {}
    encodings: dict[str, str] = {}
    schema_encodings: dict[str, str] = {}
    schema_names: dict[str, str] = {}
    first = None
    frame_seqs = []
    nan_frames = []
    images: dict[str, dict] = {}
    first_entry = None
    rhythm = None
    stamped = 0
    with open(sys.argv[1], "rb") as f:
        reader = make_reader(f)
        metadata = {m.name: dict(m.metadata) for m in reader.iter_metadata()}
        summary = reader.get_summary()
        compressions = sorted({c.compression for c in summary.chunk_indexes}) if summary else []
        for schema, channel, message in reader.iter_messages():
            counts[channel.topic] = counts.get(channel.topic, 0) + 1
            encodings[channel.topic] = channel.message_encoding
            if schema is not None:
                schema_encodings[channel.topic] = schema.encoding
                schema_names[channel.topic] = schema.name
            if channel.topic.startswith("/lrbc/camera/") and channel.topic not in images:
                img = RawImage.GetRootAs(message.data, 0)
                images[channel.topic] = {
                    "width": img.Width(),
                    "height": img.Height(),
                    "step": img.Step(),
                    "encoding": img.Encoding().decode(),
                    "frame_id": img.FrameId().decode(),
                    "data_len": img.DataLength(),
                }
            if channel.topic == "/lrbc/ring/cmd_c2s" and first_entry is None:
                first_entry = json.loads(message.data)
                raw = base64.b64decode(first_entry.pop("bytes"))
                first_entry["bytes_len"] = len(raw)
                first_entry["bytes_identifier"] = raw[4:8].decode("latin-1")
            if channel.topic == "/lrbc/rhythm":
                rhythm = json.loads(message.data)
            if channel.topic != "/lrbc/frame":
                continue
            frame = Frame.GetRootAs(message.data, 0)
            frame_seqs.append(frame.FrameSeq())
            if 0 < frame.ActionTimeNs() <= frame.FrameTimeNs():
                stamped += 1
            if frame.ObservationsLength() and math.isnan(frame.Observations(0)):
                nan_frames.append(frame.FrameSeq())
            if first is None:
                first = {
                    "frame_seq": frame.FrameSeq(),
                    "envs": [frame.Envs(i) for i in range(frame.EnvsLength())],
                    "rewards": frame.RewardsLength(),
                    "observations": frame.ObservationsLength(),
                    "actions": frame.ActionsLength(),
                }
    print(
        json.dumps(
            {
                "counts": counts,
                "message_encodings": encodings,
                "schema_encodings": schema_encodings,
                "schema_names": schema_names,
                "metadata": metadata,
                "first_frame": first,
                "frame_seq_increasing": all(
                    a < b for a, b in zip(frame_seqs, frame_seqs[1:])
                ),
                "nan_frames": nan_frames,
                "images": images,
                "compressions": compressions,
                "first_ring_entry": first_entry,
                "frames_with_action_time": stamped,
                "rhythm": rhythm,
            }
        )
    )


if __name__ == "__main__":
    main()
