#!/usr/bin/env python3
"""An independent LRBC client (trainer), written from shared/spec/lrbc-v1.md alone, in
the style of the seed's SharedMemoryClient: numpy views over the segment when numpy is
installed, plain struct otherwise.

    lrbc_client.py --name NAME [--steps N] [--reset-env I --reset-at K]

Steps the engine in lock-step (spec 3.1): write actions, set reset flags, increment
action_seq, spin until frame_seq equals it. Counts every frame. At the end prints one
JSON object: steps, frames_missed, frames_repeated, final frame_seq/action_seq, the
observations of env 0 as read through the header's offsets, and for --reset-env the
reset flag seen after the reset frame.
"""

import argparse
import ctypes
import json
import mmap
import os
import struct
import time

try:
    import numpy as np
except ImportError:  # the tests run without numpy too
    np = None

MAGIC = 0x4C524243


class Client:
    def __init__(self, name):
        self.fd = os.open("/dev/shm/" + name, os.O_RDWR)
        size = os.fstat(self.fd).st_size
        self.mm = mmap.mmap(self.fd, size)
        magic, version = struct.unpack_from("<II", self.mm, 0)
        if magic != MAGIC or version != 1:
            raise SystemExit("not an LRBC v1 segment: magic 0x%08x version %d" % (magic, version))
        (self.num_envs, self.obs_size, self.act_size) = struct.unpack_from("<III", self.mm, 20)
        (self.obs_off, self.act_off, self.rew_off, self.dones_off, self.resets_off) = struct.unpack_from(
            "<QQQQQ", self.mm, 48)
        self.mode = self.mm[16]
        if np is not None:
            self.obs = np.ndarray((self.num_envs, self.obs_size), dtype=np.float32, buffer=self.mm, offset=self.obs_off)
            self.actions = np.ndarray((self.num_envs, self.act_size), dtype=np.float32, buffer=self.mm,
                                      offset=self.act_off)
            self.resets = np.ndarray((self.num_envs,), dtype=np.uint8, buffer=self.mm, offset=self.resets_off)
        # Counters as ctypes words: aligned, atomic-width reads and writes (as the seed's
        # client does).
        self.frame_seq = ctypes.c_uint64.from_buffer(self.mm, 32)
        self.action_seq = ctypes.c_uint64.from_buffer(self.mm, 40)
        struct.pack_into("<I", self.mm, 12, os.getpid())

    def u64(self, off):
        return {32: self.frame_seq, 40: self.action_seq}[off].value

    def write_actions(self, step):
        n = self.num_envs * self.act_size
        if np is not None:
            self.actions[:] = np.float32((step % 7) / 7.0 - 0.5)
        else:
            struct.pack_into("<%df" % n, self.mm, self.act_off, *([(step % 7) / 7.0 - 0.5] * n))

    def set_reset(self, env):
        if np is not None:
            self.resets[env] = 1
        else:
            self.mm[self.resets_off + env] = 1

    def reset_flag(self, env):
        return self.mm[self.resets_off + env]

    def obs_env0(self):
        return list(struct.unpack_from("<%df" % self.obs_size, self.mm, self.obs_off))

    def close(self):
        struct.pack_into("<I", self.mm, 12, 0)
        del self.frame_seq, self.action_seq
        if np is not None:
            del self.obs, self.actions, self.resets


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--reset-env", type=int, default=None)
    p.add_argument("--reset-at", type=int, default=10)
    p.add_argument("--timeout", type=float, default=10.0)
    a = p.parse_args()
    c = Client(a.name)
    missed = repeated = 0
    reset_flag_after = None
    obs_before_reset = obs_after_reset = None
    action_seq = c.u64(40)
    frame_seq = c.u64(32)
    if frame_seq != action_seq:
        raise SystemExit("engine not idle at attach: frame_seq %d action_seq %d" % (frame_seq, action_seq))
    start = time.monotonic()
    for step in range(a.steps):
        c.write_actions(step)
        if a.reset_env is not None and step == a.reset_at:
            obs_before_reset = list(struct.unpack_from(
                "<%df" % c.obs_size, c.mm, c.obs_off + 4 * c.obs_size * a.reset_env))
            c.set_reset(a.reset_env)
        action_seq += 1
        # An aligned 8-byte store through ctypes: atomic on the platforms the spec targets.
        c.action_seq.value = action_seq
        deadline = time.monotonic() + a.timeout
        spins = 0
        while True:
            f = c.frame_seq.value
            if f == action_seq:
                break
            if f > action_seq:
                repeated += 1
                break
            spins += 1
            if spins % 1000 == 0:
                if time.monotonic() > deadline:
                    raise SystemExit("no frame for action_seq %d (frame_seq %d)" % (action_seq, f))
                time.sleep(0)
        if f != frame_seq + 1:
            missed += abs(f - frame_seq - 1)
        frame_seq = f
        if a.reset_env is not None and step == a.reset_at:
            reset_flag_after = c.reset_flag(a.reset_env)
            obs_after_reset = list(struct.unpack_from(
                "<%df" % c.obs_size, c.mm, c.obs_off + 4 * c.obs_size * a.reset_env))
    elapsed = time.monotonic() - start
    out = {
        "steps": a.steps,
        "frames_missed": missed,
        "frames_repeated": repeated,
        "frame_seq": c.u64(32),
        "action_seq": c.u64(40),
        "obs_env0": c.obs_env0(),
        "numpy": np is not None,
        "steps_per_sec": a.steps / elapsed if elapsed > 0 else 0.0,
    }
    if a.reset_env is not None:
        out["reset_flag_after"] = reset_flag_after
        out["obs_before_reset"] = obs_before_reset
        out["obs_after_reset"] = obs_after_reset
    c.close()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
