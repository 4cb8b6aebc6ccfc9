"""An independent reader of an export (`lrbc-inspector export FILE --parquet OUT`): pandas
reads the file through pyarrow. Prints one JSON object.

    python3 read_export.py OUT.parquet
"""

import json
import math
import sys

import pandas as pd
import pyarrow.parquet as pq


def main() -> None:
    path = sys.argv[1]
    table = pq.read_table(path)
    metadata = {
        k.decode(): v.decode()
        for k, v in (table.schema.metadata or {}).items()
        if k.decode().startswith("lrbc.")
    }
    df = pd.read_parquet(path)
    obs_lengths: dict[int, list[int]] = {}
    act_lengths: dict[int, list[int]] = {}
    for env, obs, act in zip(df["env"], df["observation"], df["action"]):
        obs_lengths.setdefault(int(env), [])
        act_lengths.setdefault(int(env), [])
        if obs is not None:
            obs_lengths[int(env)].append(len(obs))
        if act is not None:
            act_lengths[int(env)].append(len(act))
    nan_rows = [
        {"frame_seq": int(r.frame_seq), "env": int(r.env)}
        for r in df[df["reward"].isna()].itertuples()
    ]
    nan_obs = [
        int(r.frame_seq)
        for r in df[df["env"] == 0].itertuples()
        if r.observation is not None and math.isnan(r.observation[0])
    ]
    per_frame = df.groupby("frame_seq")["env"].count()
    print(
        json.dumps(
            {
                "rows": len(df),
                "frames": int(df["frame_seq"].nunique()),
                "envs_per_frame": sorted({int(n) for n in per_frame}),
                "columns": list(df.columns),
                "types": {f.name: str(f.type) for f in table.schema},
                "nan_rows": nan_rows,
                "nan_obs_frames": nan_obs,
                # Per env: the distinct lengths of its lists, and how many were null.
                "obs_lengths": {e: sorted(set(v)) for e, v in obs_lengths.items()},
                "obs_nulls": {
                    int(e): int(n)
                    for e, n in df[df["observation"].isna()].groupby("env").size().items()
                },
                "act_lengths": {e: sorted(set(v)) for e, v in act_lengths.items()},
                "time_s_first": float(df["time_s"].iloc[0]) if len(df) else None,
                "time_s_increasing": bool(df["time_s"].is_monotonic_increasing),
                "metadata": metadata,
            }
        )
    )


if __name__ == "__main__":
    main()
