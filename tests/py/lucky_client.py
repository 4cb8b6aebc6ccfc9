#!/usr/bin/env python3
"""A client of the luckyrobots IPC layout, written from shared/spec/lrbc-v1.md section 8:
waits for engine_ready, attaches (client_pid, client_ready), steps in lock-step
(action_seq += 1, wait until frame_seq grows), sends the JSON commands ResetAgent and
SetSimulationMode through cmd_in and reads the responses from cmd_out (u64 head/tail,
16-byte envelope header, entries split at the end of the data area).

    lucky_client.py --name NAME [--steps N] [--bad-mode]

Prints one JSON object. Standard library only.
"""

import argparse
import ctypes
import json
import mmap
import os
import struct
import time

MAGIC = 0x4C524243


class Ring:
    def __init__(self, mm, off):
        self.mm, self.off = mm, off
        self.cap = struct.unpack_from("<I", mm, off + 128)[0] or 256 * 1024
        self.head = ctypes.c_uint64.from_buffer(mm, off)
        self.tail = ctypes.c_uint64.from_buffer(mm, off + 64)

    def _write(self, pos, data):
        i = pos & (self.cap - 1)
        first = min(len(data), self.cap - i)
        base = self.off + 192
        self.mm[base + i:base + i + first] = data[:first]
        if first < len(data):
            self.mm[base:base + len(data) - first] = data[first:]

    def _read(self, pos, n):
        i = pos & (self.cap - 1)
        first = min(n, self.cap - i)
        base = self.off + 192
        out = bytes(self.mm[base + i:base + i + first])
        if first < n:
            out += bytes(self.mm[base:base + n - first])
        return out

    def push(self, corr, method, payload):
        size = (16 + len(payload) + 7) & ~7
        head, tail = self.head.value, self.tail.value
        if head - tail + size > self.cap:
            raise SystemExit("command ring full")
        self._write(head, struct.pack("<IIII", corr, method, len(payload), 0) + payload)
        self.head.value = head + size

    def pop(self):
        head, tail = self.head.value, self.tail.value
        if head == tail:
            return None
        corr, status, length = struct.unpack("<III", self._read(tail, 12))
        payload = self._read(tail + 16, length)
        self.tail.value = tail + ((16 + length + 7) & ~7)
        return corr, status, payload


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--name", required=True)
    p.add_argument("--steps", type=int, default=100)
    p.add_argument("--bad-mode", action="store_true")
    a = p.parse_args()
    path = "/dev/shm/" + a.name
    deadline = time.monotonic() + 10
    while not os.path.exists(path):
        if time.monotonic() > deadline:
            raise SystemExit("no segment")
        time.sleep(0.05)
    fd = os.open(path, os.O_RDWR)
    mm = mmap.mmap(fd, os.fstat(fd).st_size)
    magic, version = struct.unpack_from("<II", mm, 0)
    assert magic == MAGIC and version == 1, (hex(magic), version)
    ready = ctypes.c_uint32.from_buffer(mm, 120)
    while ready.value == 0:
        if time.monotonic() > deadline:
            raise SystemExit("engine never ready")
        time.sleep(0.01)
    n, obs_size, act_size = struct.unpack_from("<III", mm, 16)
    act_off, = struct.unpack_from("<Q", mm, 56)
    reset_off, = struct.unpack_from("<Q", mm, 80)
    schema_off, cmd_in_off, cmd_out_off, total = struct.unpack_from("<QQQQ", mm, 88)
    frame = ctypes.c_int64.from_buffer(mm, 32)
    action = ctypes.c_int64.from_buffer(mm, 40)
    client_pid = ctypes.c_uint32.from_buffer(mm, 12)
    client_ready = ctypes.c_uint32.from_buffer(mm, 124)
    client_pid.value = os.getpid()
    client_ready.value = 1

    names = bytes(mm[schema_off:schema_off + 4096])
    obs_names, act_names, pos = [], [], 0
    for lst in (obs_names, act_names):
        while True:
            end = names.index(b"\0", pos)
            if end == pos:
                pos += 1
                break
            lst.append(names[pos:end].decode())
            pos = end + 1

    last = frame.value
    lags = 0
    for step in range(a.steps):
        struct.pack_into("<%df" % (n * act_size), mm, act_off, *([0.1] * (n * act_size)))
        if step == 3:
            mm[reset_off] = 1
        action.value = action.value + 1
        t = time.monotonic() + 5
        while frame.value <= last:
            if time.monotonic() > t:
                raise SystemExit("step timeout")
        if frame.value != action.value:
            lags += 1
        last = frame.value
    reset_cleared = mm[reset_off] == 0

    cmd_in, cmd_out = Ring(mm, cmd_in_off), Ring(mm, cmd_out_off)
    responses = {}
    mode = "warp" if a.bad_mode else "fast"
    cmd_in.push(1, 1, json.dumps({"agent_name": "", "simulation_contract": {"friction_range": [0.5, 1.0]}}).encode())
    cmd_in.push(2, 2, json.dumps({"mode": mode}).encode())
    t = time.monotonic() + 5
    while len(responses) < 2 and time.monotonic() < t:
        r = cmd_out.pop()
        if r is None:
            time.sleep(0.001)
            continue
        corr, status, payload = r
        responses[corr] = {"status": status, "body": json.loads(payload) if payload else {}}
    client_ready.value = 0
    client_pid.value = 0
    print(json.dumps({
        "steps": a.steps, "frame_seq": last, "lags": lags, "reset_cleared": reset_cleared,
        "obs_names": obs_names, "act_names": act_names, "size_ok": total == os.fstat(fd).st_size,
        "responses": {str(k): v for k, v in responses.items()},
    }), flush=True)
    del frame, action, client_pid, client_ready, ready, cmd_in, cmd_out


if __name__ == "__main__":
    main()
