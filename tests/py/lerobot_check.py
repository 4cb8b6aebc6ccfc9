#!/usr/bin/env python3
"""Reads a LeRobot v3.0 dataset written by `lrbc-inspector export --lerobot` and checks
every frame against the recording it came from.

    lerobot_check.py (--lerobot | --pyarrow) DATASET FRAMES.parquet EPISODES.csv

--lerobot loads it with LeRobot's own LeRobotDataset (lerobot 0.4.4 and its torch);
--pyarrow reads it the way LeRobot's loader does (sorted data and episode files,
concatenated; the features of info.json; tasks by pandas index), without torch.
FRAMES.parquet is `export --parquet` of the recording (a row per frame and env),
EPISODES.csv its `export --episodes`: the dataset's episode i is the i-th complete
episode (ending done, truncated or reset) of an env the frames hold rows of, in the
order they ended. Every row's observation.state, action, next.reward, next.done and
next.truncated must equal the recording's, frame_index and timestamp count from 0, index
is the row's place; camera images are PNG (--pyarrow) that LeRobot decodes into
3×H×W values in [0, 1] (--lerobot). Prints one JSON line of what it checked; exits 1 on a mismatch.
"""

import csv
import glob
import json
import os
import sys
import tempfile


def fail(msg):
    print("lerobot_check: " + msg, file=sys.stderr, flush=True)
    sys.exit(1)


def main(argv):
    if len(argv) != 5 or argv[1] not in ("--lerobot", "--pyarrow"):
        print(__doc__, file=sys.stderr)
        return 2
    mode, root, frames_path, episodes_path = argv[1:]
    import pyarrow.parquet as pq
    frames = pq.read_table(frames_path).to_pydict()
    by_key = {}
    for i in range(len(frames["frame_seq"])):
        by_key[(frames["frame_seq"][i], frames["env"][i])] = i
    recorded = {e for e, o in zip(frames["env"], frames["observation"]) if o is not None}
    with open(episodes_path) as f:
        eps = [r for r in csv.DictReader(f)
               if r["complete"] == "true" and r["ending"] in ("done", "truncated", "reset")
               and int(r["env"]) in recorded]
    info = json.load(open(os.path.join(root, "meta/info.json")))
    fps = info["fps"]

    def expect(ep_index, frame_index):
        e = eps[ep_index]
        k = by_key.get((int(e["first_frame"]) + frame_index, int(e["env"])))
        if k is None:
            fail("episode %d frame %d: not in the recording" % (ep_index, frame_index))
        return k

    checked = 0
    if mode == "--lerobot":
        os.environ["HF_HUB_OFFLINE"] = "1"
        os.environ["HF_DATASETS_OFFLINE"] = "1"
        os.environ["HF_DATASETS_CACHE"] = tempfile.mkdtemp()
        import numpy as np
        import torch
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
        ds = LeRobotDataset("local/lrbc", root=root)
        m = ds.meta
        if len(ds) != m.total_frames or ds.num_episodes != m.total_episodes:
            fail("%d rows, %d episodes; info says %d, %d" % (len(ds), ds.num_episodes, m.total_frames, m.total_episodes))
        if m.total_episodes != len(eps):
            fail("%d episodes; the recording has %d to put in" % (m.total_episodes, len(eps)))
        for i in range(len(ds)):
            it = ds[i]
            ep, fi = it["episode_index"].item(), it["frame_index"].item()
            if it["index"].item() != i:
                fail("row %d: index %d" % (i, it["index"].item()))
            k = expect(ep, fi)
            obs = np.array(frames["observation"][k], np.float32)
            act = np.array(frames["action"][k], np.float32)
            if it["observation.state"].dtype != torch.float32 or not np.array_equal(it["observation.state"].numpy(), obs):
                fail("row %d: observation.state differs" % i)
            if not np.array_equal(it["action"].numpy(), act):
                fail("row %d: action differs" % i)
            if it["next.reward"].item() != np.float32(frames["reward"][k]):
                fail("row %d: next.reward %r, recorded %r" % (i, it["next.reward"].item(), frames["reward"][k]))
            if bool(it["next.done"].item()) != frames["done"][k]:
                fail("row %d: next.done" % i)
            if "next.truncated" in it and bool(it["next.truncated"].item()) != bool(frames["truncated"][k]):
                fail("row %d: next.truncated" % i)
            if abs(it["timestamp"].item() - fi / fps) > 1e-4:
                fail("row %d: timestamp %r" % (i, it["timestamp"].item()))
            if not isinstance(it["task"], str):
                fail("row %d: task %r" % (i, it["task"]))
            for k, f in info["features"].items():
                if f["dtype"] == "image":
                    h, w, _ = f["shape"]
                    img = it[k]
                    if tuple(img.shape) != (3, h, w) or img.dtype != torch.float32 or img.min() < 0 or img.max() > 1:
                        fail("row %d: %s of shape %r" % (i, k, tuple(img.shape)))
            e = m.episodes[ep]
            if not e["dataset_from_index"] <= i < e["dataset_to_index"]:
                fail("row %d: outside its episode's range" % i)
            checked += 1
        # A window of actions around each row, as training asks for.
        ds2 = LeRobotDataset("local/lrbc", root=root, episodes=[0],
                             delta_timestamps={"action": [0.0, 1 / fps, 2 / fps]})
        b = next(iter(torch.utils.data.DataLoader(ds2, batch_size=2)))
        if tuple(b["action"].shape[:2]) != (2, 3):
            fail("delta_timestamps: action batch of shape %r" % (tuple(b["action"].shape),))
        if m.stats is None or "observation.state" not in m.stats:
            fail("no stats")
        task = ds[0]["task"]
    else:
        import pandas as pd
        data = pq.ParquetDataset(sorted(glob.glob(os.path.join(root, "data/*/*.parquet")))).read()
        meta = pq.ParquetDataset(sorted(glob.glob(os.path.join(root, "meta/episodes/*/*.parquet")))).read()
        tasks = pd.read_parquet(os.path.join(root, "meta/tasks.parquet"))
        if not info["codebase_version"].startswith("v3."):
            fail("codebase_version %r" % info["codebase_version"])
        expected = {k for k, f in info["features"].items() if f["dtype"] != "video"}
        if set(data.column_names) != expected:
            fail("columns %r, features %r" % (sorted(data.column_names), sorted(expected)))
        if data.num_rows != info["total_frames"]:
            fail("%d rows, total_frames %d" % (data.num_rows, info["total_frames"]))
        if meta.num_rows != info["total_episodes"] or info["total_episodes"] != len(eps):
            fail("%d episodes in meta, %d in info, %d to put in" % (meta.num_rows, info["total_episodes"], len(eps)))
        if meta["episode_index"].to_pylist() != list(range(meta.num_rows)):
            fail("episode_index of meta/episodes")
        if tasks["task_index"].tolist() != list(range(len(tasks))) or not all(isinstance(t, str) for t in tasks.index):
            fail("tasks.parquet: %r" % (tasks,))
        task = tasks.iloc[0].name
        rows = data.to_pydict()
        if rows["index"] != list(range(data.num_rows)):
            fail("index is not the row's place")
        for k, f in info["features"].items():
            shape = tuple(f["shape"])
            if f["dtype"] == "image":
                for v in rows[k][:50]:
                    if not isinstance(v, dict) or not v.get("bytes", b"").startswith(b"\x89PNG"):
                        fail("%s: not PNG bytes in a struct<bytes, path>" % k)
            elif shape != (1,):
                if not all(len(v) == shape[0] for v in rows[k]):
                    fail("%s: a row of another length than %r" % (k, shape))
            elif isinstance(rows[k][0], list):
                fail("%s: shape [1] must be a scalar column" % k)
        for e in meta.to_pylist():
            lo, hi = e["dataset_from_index"], e["dataset_to_index"]
            if hi - lo != e["length"] or set(rows["episode_index"][lo:hi]) != {e["episode_index"]}:
                fail("episode %d: rows %d..%d" % (e["episode_index"], lo, hi))
            if rows["frame_index"][lo:hi] != list(range(hi - lo)):
                fail("episode %d: frame_index" % e["episode_index"])
        for i in range(data.num_rows):
            k = expect(rows["episode_index"][i], rows["frame_index"][i])
            if rows["observation.state"][i] != frames["observation"][k] or rows["action"][i] != frames["action"][k]:
                fail("row %d: observation.state or action differs" % i)
            if rows["next.reward"][i] != frames["reward"][k] and not (rows["next.reward"][i] != rows["next.reward"][i]):
                fail("row %d: next.reward" % i)
            if rows["next.done"][i] != frames["done"][k]:
                fail("row %d: next.done" % i)
            if "next.truncated" in rows and rows["next.truncated"][i] != bool(frames["truncated"][k]):
                fail("row %d: next.truncated" % i)
            checked += 1
        stats = json.load(open(os.path.join(root, "meta/stats.json")))
        for k in expected:
            for s in ("min", "max", "mean", "std", "count", "q01", "q10", "q50", "q90", "q99"):
                if s not in stats.get(k, {}):
                    fail("stats.json: %s has no %s" % (k, s))
    print(json.dumps({"mode": mode[2:], "rows": checked, "episodes": len(eps), "fps": fps, "task": task}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
