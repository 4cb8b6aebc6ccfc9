#!/usr/bin/env python3
"""An independent writer of LRBC segments, written from shared/spec/lrbc-v1.md alone.

The integration tests run it as a separate process: it creates a segment in /dev/shm,
prints one JSON line describing every byte it wrote (the expected `dump --json`), and
then obeys commands read from stdin, one per line:

    tick            frame_seq += 1, action_seq += 1 (and write_seq, frame_time_ns)
    shrink BYTES    ftruncate the file
    unlink          remove the name
    replace [ENVS]  unlink and create a new segment under the same name
    quit            remove the segment and exit (also on end of input)

Standard library only.
"""

import argparse
import json
import mmap
import os
import struct
import sys
import time

MAGIC = 0x4C524243
HEADER = 4096


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def align(v, a):
    return (v + a - 1) // a * a


class Writer:
    def __init__(self, args, envs=None):
        self.a = args
        self.envs = envs if envs is not None else args.envs
        self.path = "/dev/shm/" + args.name
        self.build()

    # -- layout -----------------------------------------------------------------
    def build(self):
        a, n = self.a, self.envs
        lucky = a.layout == "lucky"
        ext = a.layout == "ext"
        obs_names = ["obs_%d_%s" % (i, "ä" if i == 1 else "x") for i in range(a.obs)]
        act_names = ["act_%d" % i for i in range(a.act)]
        if a.no_names:
            obs_names, act_names = [], []
        names = b"".join(s.encode() + b"\0" for s in obs_names) + b"\0"
        names += b"".join(s.encode() + b"\0" for s in act_names) + b"\0"
        ring_hdr = 192 if lucky else 64
        ring = a.ring

        at = HEADER
        regions = []

        def take(name, length, alignment=128):
            nonlocal at
            off = align(at, alignment)
            at = off + length
            regions.append({"name": name, "offset": off, "length": length})
            return off

        regions.append({"name": "header", "offset": 0, "length": HEADER})
        obs = take("obs", n * a.obs * 4)
        act = take("act", n * a.act * 4)
        rew = take("rewards", n * 4)
        dones = take("dones", n)
        trunc = take("truncateds", n) if ext else 0
        resets = take("resets", n)
        names_off = 0
        names_len = 0
        if (ext or lucky) and not a.no_names:
            names_off = take("names", len(names))
            names_len = len(names)
        s2c = take("cmd_s2c", ring_hdr + ring)
        c2s = take("cmd_c2s", ring_hdr + ring)
        img = 0
        w = h = c = 0
        if a.image and not lucky:
            w, h, c = (int(v) for v in a.image.split("x"))
            img = take("image", n * w * h * c)
        ctl_s2c = ctl_c2s = 0
        if ext and a.ctl:
            ctl_s2c = take("ctl_s2c", 64 + a.ctl, 4096)
            at = align(at, 4096)
            ctl_c2s = take("ctl_c2s", 64 + a.ctl, 4096)
            at = align(at, 4096)
        size = align(at, 4096) + a.extra
        self.size = size

        hdr = bytearray(HEADER)
        H = {}  # the expected header, by spec name

        def put(name, off, fmt, value):
            struct.pack_into(fmt, hdr, off, value)
            H[name] = value

        pid = a.server_pid if a.server_pid is not None else os.getpid()
        put("magic", 0, "<I", MAGIC)
        put("version", 4, "<I", 1)
        self.frame_seq = 41
        if lucky:
            put("engine_pid", 8, "<I", pid)
            put("client_pid", 12, "<I", 0)
            put("num_envs", 16, "<I", n)
            put("obs_size", 20, "<I", a.obs)
            put("act_size", 24, "<I", a.act)
            put("frame_seq", 32, "<q", self.frame_seq)
            put("action_seq", 40, "<q", self.frame_seq)
            put("obs_offset", 48, "<Q", obs)
            put("act_offset", 56, "<Q", act)
            put("reward_offset", 64, "<Q", rew)
            put("done_offset", 72, "<Q", dones)
            put("reset_offset", 80, "<Q", resets)
            put("schema_offset", 88, "<Q", names_off)
            put("cmd_in_offset", 96, "<Q", c2s)
            put("cmd_out_offset", 104, "<Q", s2c)
            put("total_size", 112, "<Q", size)
            put("engine_ready", 120, "<I", 1)
            put("client_ready", 124, "<I", 0)
            for r in regions:
                if r["name"] == "names":
                    r["length"] = len(names)
        else:
            put("server_pid", 8, "<I", pid)
            put("client_pid", 12, "<I", 0)
            put("mode", 16, "<B", a.mode)
            put("num_envs", 20, "<I", n)
            put("obs_size", 24, "<I", a.obs)
            put("act_size", 28, "<I", a.act)
            put("frame_seq", 32, "<Q", self.frame_seq)
            put("action_seq", 40, "<Q", self.frame_seq)
            put("obs_offset", 48, "<Q", obs)
            put("act_offset", 56, "<Q", act)
            put("rewards_offset", 64, "<Q", rew)
            put("dones_offset", 72, "<Q", dones)
            put("resets_offset", 80, "<Q", resets)
            put("cmd_s2c_offset", 88, "<Q", s2c)
            put("cmd_c2s_offset", 96, "<Q", c2s)
            put("cmd_ring_size", 104, "<I", ring)
            put("image_offset", 112, "<Q", img)
            put("image_width", 120, "<I", w)
            put("image_height", 124, "<I", h)
            put("image_channels", 128, "<I", c)
            put("gpu_available", 132, "<B", 1)
            put("gpu_obs_mode", 133, "<B", 2)
            handle = bytes((i * 7 + 3) % 256 for i in range(64))
            hdr[134:198] = handle
            H["gpu_obs_handle"] = handle.hex()
            put("gpu_device_id", 200, "<I", 3)
            ext_vals = [
                ("total_size", 256, "<Q", size),
                ("truncateds_offset", 264, "<Q", trunc),
                ("names_offset", 272, "<Q", names_off),
                ("names_size", 280, "<I", names_len),
                ("service_flags", 284, "<I", 0b1011011),
                ("write_seq", 288, "<Q", 10),
                ("image_seq", 296, "<Q", 5),
                ("frame_time_ns", 304, "<Q", time.monotonic_ns()),
                ("action_time_ns", 312, "<Q", time.monotonic_ns()),
                ("ctl_s2c_offset", 320, "<Q", ctl_s2c),
                ("ctl_c2s_offset", 328, "<Q", ctl_c2s),
                ("ctl_ring_size", 336, "<I", a.ctl if ctl_s2c else 0),
            ]
            for name, off, fmt, v in ext_vals:
                if ext:
                    put(name, off, fmt, v)
                else:
                    H[name] = 0
        self.lucky, self.ext = lucky, ext
        self.hdr, self.H, self.regions = hdr, H, regions
        self.offs = dict(obs=obs, act=act, rew=rew, dones=dones, trunc=trunc,
                         resets=resets, names=names_off, s2c=s2c, c2s=c2s, img=img)
        self.names_bytes = names if names_off else b""
        self.obs_names, self.act_names = (obs_names, act_names) if names_off else ([], [])
        self.corrupt()

    def corrupt(self):
        k, hdr = self.a.corrupt, self.hdr
        if not k:
            return
        if k == "bad_magic":
            struct.pack_into("<I", hdr, 0, 0x12345678)
        elif k == "bad_version":
            struct.pack_into("<I", hdr, 4, 7)
        elif k == "small":
            self.size = 100
        elif k == "region_outside":
            struct.pack_into("<Q", hdr, 64, self.size - 2)  # rewards past the end
        elif k == "overlap":
            struct.pack_into("<Q", hdr, 56, self.offs["obs"] + 4)  # act inside obs
        elif k == "overflow":
            struct.pack_into("<I", hdr, 20, 0xFFFFFFFF)  # num_envs
            struct.pack_into("<I", hdr, 24, 0xFFFFFFFF)  # obs_size
        elif k == "names_unterminated":
            self.names_bytes = self.names_bytes[:-1] + b"z"
        elif k == "names_not_utf8":
            self.names_bytes = b"\xff\xfe" + self.names_bytes[2:]
        elif k == "ring_not_pow2":
            struct.pack_into("<I", hdr, 104, 1000)
        else:
            raise SystemExit("unknown corruption " + k)

    # -- contents ---------------------------------------------------------------
    def create(self):
        fd = os.open(self.path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        os.ftruncate(fd, self.size)
        self.fd = fd
        self.obs = self.act = self.rewards = self.dones = self.truncs = self.resets = []
        if self.size < HEADER:
            os.pwrite(fd, bytes(self.hdr[: self.size]), 0)
            self.mm = None
            return
        self.mm = mmap.mmap(fd, self.size)
        mm, o, n, a = self.mm, self.offs, self.envs, self.a
        mm[0:HEADER] = bytes(self.hdr)
        if self.names_bytes:
            mm[o["names"]:o["names"] + len(self.names_bytes)] = self.names_bytes
        if self.lucky:
            for r in ("s2c", "c2s"):
                struct.pack_into("<I", mm, o[r] + 128, a.ring)
        self.obs = [f32((e * 1000 + j) / 7.0 - 3.0) for e in range(n) for j in range(a.obs)]
        self.act = [f32(-(e * 100 + j) / 3.0) for e in range(n) for j in range(a.act)]
        self.rewards = [f32(e * 0.25 - 1.0 / 3.0) for e in range(n)]
        self.dones = [1 if e % 3 == 0 else 0 for e in range(n)]
        self.truncs = [1 if e % 5 == 1 else 0 for e in range(n)]
        self.resets = [1 if e % 4 == 2 else 0 for e in range(n)]
        struct.pack_into("<%df" % len(self.obs), mm, o["obs"], *self.obs)
        struct.pack_into("<%df" % len(self.act), mm, o["act"], *self.act)
        struct.pack_into("<%df" % n, mm, o["rew"], *self.rewards)
        mm[o["dones"]:o["dones"] + n] = bytes(self.dones)
        mm[o["resets"]:o["resets"] + n] = bytes(self.resets)
        if self.ext:
            mm[o["trunc"]:o["trunc"] + n] = bytes(self.truncs)

    def expected(self):
        a = self.a
        out = {
            "layout": {"ext": "lrbc-v1-ext", "seed": "lrbc-v1", "lucky": "luckyrobots-ipc"}[a.layout],
            "size": self.size,
            "header": self.H,
            "regions": sorted(self.regions, key=lambda r: r["offset"]),
            "names": {"obs": self.obs_names, "act": self.act_names},
            "snapshot": {
                "consistent": True,
                "frame_seq": self.frame_seq,
                "rewards": self.rewards if self.mm else [],
                "dones": self.dones if self.mm else [],
                "truncateds": self.truncs if self.ext else None,
            },
            "pid": os.getpid(),
        }
        if self.mm and a.env is not None:
            e = a.env
            out["env"] = {
                "index": e,
                "obs": self.obs[e * a.obs:(e + 1) * a.obs],
                "act": self.act[e * a.act:(e + 1) * a.act],
            }
        return out

    def tick(self):
        self.frame_seq += 1
        if self.lucky:
            struct.pack_into("<q", self.mm, 40, self.frame_seq)
            struct.pack_into("<q", self.mm, 32, self.frame_seq)
        else:
            if self.ext:
                ws = struct.unpack_from("<Q", self.mm, 288)[0]
                struct.pack_into("<Q", self.mm, 288, ws + 1)
            struct.pack_into("<Q", self.mm, 40, self.frame_seq)
            struct.pack_into("<Q", self.mm, 32, self.frame_seq)
            if self.ext:
                struct.pack_into("<Q", self.mm, 304, time.monotonic_ns())
                struct.pack_into("<Q", self.mm, 288, ws + 2)

    def remove(self):
        try:
            os.unlink(self.path)
        except FileNotFoundError:
            pass


def parse_args(argv=None):
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--layout", choices=["ext", "seed", "lucky"], default="ext")
    p.add_argument("--envs", type=int, default=6)
    p.add_argument("--obs", type=int, default=5)
    p.add_argument("--act", type=int, default=3)
    p.add_argument("--image", default="4x3x3")
    p.add_argument("--ring", type=int, default=4096)
    p.add_argument("--ctl", type=int, default=4096)
    p.add_argument("--mode", type=int, default=0)
    p.add_argument("--extra", type=int, default=0, help="bytes of slack at the end")
    p.add_argument("--env", type=int, default=None, help="include this env in the expectation")
    p.add_argument("--server-pid", type=int, default=None)
    p.add_argument("--no-names", action="store_true")
    p.add_argument("--corrupt", default=None)
    return p.parse_args(argv)


def main():
    a = parse_args()
    w = Writer(a)
    w.create()
    print(json.dumps(w.expected()), flush=True)
    for line in sys.stdin:
        cmd = line.split()
        if not cmd:
            continue
        if cmd[0] == "tick":
            w.tick()
            print("ok", flush=True)
        elif cmd[0] == "shrink":
            os.ftruncate(w.fd, int(cmd[1]))
            print("ok", flush=True)
        elif cmd[0] == "unlink":
            w.remove()
            print("ok", flush=True)
        elif cmd[0] == "replace":
            w.remove()
            envs = int(cmd[1]) if len(cmd) > 1 else w.envs + 1
            w = Writer(a, envs)
            w.create()
            print(json.dumps(w.expected()), flush=True)
        elif cmd[0] == "quit":
            break
    w.remove()


if __name__ == "__main__":
    main()
