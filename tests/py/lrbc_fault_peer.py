#!/usr/bin/env python3
"""An independent fault-writing peer, written from shared/spec/lrbc-v1.md alone: one
process plays both the engine and the trainer of one LRBC v1 segment (with the
extension block, mode 0, lock-step) and writes, on request, faults that a well-behaved
engine never writes, so that a tool's diagnosis can be checked against a second
implementation of the spec.

    lrbc_fault_peer.py --name NAME --envs N --obs O --act A --steps S --hz HZ
                       [--faults JSON] [--ring BYTES] [--episodes]
                       [--rollout N --update SECS] [--time-limit L]

(PYTHONPATH must reach the flatbuffers runtime, numpy and the Python code flatc
generates from schema/hazel_rpc.fbs.)

The segment: /dev/shm/NAME, mode 0600, written in full under a temporary name in
/dev/shm and then linked to NAME (so it is never seen half-initialised; an existing
NAME is an error). Regions aligned to 64 bytes after the 4096-byte header: obs, act,
rewards, dones, truncateds, resets, names (observations o0.. with o1 named
`pole_angle`; actions a0..), cmd_s2c and cmd_c2s (64-byte ring header plus --ring
bytes, default 65536, a power of two). No control rings, no images. server_pid and
client_pid are this process's pid. write_seq, frame_time_ns and action_time_ns are
maintained (CLOCK_MONOTONIC).

Protocol on stdin/stdout:
- prints `{"ready": true, "name": NAME, "pid": PID, "frame_seq": 0, ...}`, then waits
  for a line `go` (`quit` or end of input before it: remove the segment and exit);
- steps S steps at HZ on a monotonic deadline schedule. Step k: the trainer writes the
  actions of step k (sin(0.05 k + env + 0.5 j)), sets the reset flags of the envs done
  or truncated in frame k-1, stores action_time_ns and action_seq = k; the engine
  reads the actions, clears the reset flags, makes write_seq odd, writes obs
  (sin(0.01 k + env + 0.1 i)), rewards (1 - 0.001 env), dones ((k + 7 env) % 97 == 0)
  and truncateds ((k + 11 env) % 389 == 0) (with --time-limit: see below), stores
  frame_time_ns, makes write_seq even, stores frame_seq = k. The trainer writes the
  next actions no earlier than a quarter of a period after the frame was published, so
  that a reader can copy it. A stall or an update (--rollout) moves the schedule on by
  its length (no burst of steps to catch up after it);
- prints `{"done": true, "steps": S, "frame_seq": S, "faults": [...], ...}` (each fault
  as applied, with the frame_seq it was published in; see below for "episodes" and
  "rhythm") and waits for `quit` or end of input; then removes the segment and exits 0.
  SIGTERM and SIGINT remove it too.
Its other fields: "hz"; "rate_hz", the stepping rate from the first action to the last
with the stalls and updates taken out (null with one step); "late_steps" and
"max_late_ms" (steps that began more than half a period after their slot, and the
latest); "elapsed_s" (from the start of the run to the last frame's publication);
"stalled_s" (the stalls' measured total, updates not included); and counts of what was
written and read ("nonfinite_actions_seen", "resets_applied", "dones", "truncateds",
"s2c_entries_read", "c2s_entries_read").

--faults is a JSON list of objects, each with "kind" and "step" (1..S, the frame_seq
it is published in):
  {"kind": "nan"|"inf"|"-inf", "step": K, "env": E, "channel": "obs"|"act"|"reward",
   "index": I}             one non-finite value in frame K: obs[E][I] and reward[E] by
                           the engine inside the seqlock, act[E][I] by the trainer as
                           part of the actions of step K (obs stay finite);
  {"kind": "done_burst", "step": K, "share": S}   dones of the first ceil(S*N) envs;
  {"kind": "stall", "step": K, "secs": T, "side": "engine"|"trainer"}
                           engine: T s between action_seq = K and frame K;
                           trainer: T s more between frame K-1 and action_seq = K
                           (after the update, when K-1 ends a rollout: a hang at the
                           update); its "measured_secs" is the whole gap from frame
                           K-1 (or the run's start) to action_seq = K;
  {"kind": "rpc_error", "step": K}   a GetAgentSchema request on cmd_c2s answered on
                           cmd_s2c by an envelope with error_message set;
  {"kind": "unanswered", "step": K}  a request on cmd_c2s that is never answered;
  {"kind": "malformed", "step": K}   an entry of 24 bytes of 0xAB on cmd_s2c.
--episodes adds "episodes" to the done line: every episode that ended, as the peer
wrote it: {"env", "first_frame", "last_frame", "return", "ending"}. An episode of env E
runs from the frame after E's previous done or truncated flag (or frame 1) to the frame
whose flag is set; its return is the sum of its rewards as float64 in frame order ("NaN",
"inf" or "-inf" when not finite); its ending is "done" (done wins over truncated),
"truncated", or "nonfinite" when one of its rewards or observations was not finite.

--rollout N --update SECS (both or neither; N >= 1, SECS in [0, 3600]): an on-policy
trainer's loop. After the frame of step k with k % N == 0 is published (and its slot
reached) and before the actions of step k+1, the trainer pauses SECS s (a policy
update, measured with time.monotonic_ns); none after the run's last step. A trainer
stall at step k+1 comes after the update; an engine stall keeps its place (between
action_seq = K and frame K) wherever it falls in a rollout. The done line then gets
  "rhythm": {"rollout_frames": N, "updates": count of update pauses made,
             "update_secs", "update_secs_min", "update_secs_max": their measured mean,
               least and greatest length in s (null with no update),
             "update_frames": the frame_seq values after which an update was made
               (N, 2N, ... below S),
             "frames": S, "elapsed_secs": from frame 1's publication to the last frame's,
             "trainer_wait_secs": updates and trainer stalls in that span (measured),
             "engine_wait_secs": engine stalls in that span (measured),
             "shares": {"stepping", "trainer", "engine"}: elapsed_secs divided into
               waiting for the trainer, for the engine and the rest; they sum to 1
               (null with one step, when elapsed_secs is 0),
             "updates_at": [[frame_seq, start_ns, secs], ...] each update's frame, start
               (CLOCK_MONOTONIC) and measured length,
             "created_ns": when the segment was made (its first frame_time_ns),
             "first_frame_ns", "last_frame_ns": when frame 1 and the last frame were
               published}.
Stalls of step 1 come before frame 1 and are in neither wait. Without --rollout there
is no "rhythm".

--time-limit L (L >= 1): episodes end only by the time limit and by faults: no
staggered dones or truncateds. An env's episode that began in frame b (frame 1 for the
first) is truncated in frame b + L - 1, its L-th frame, so envs that begin together
truncate together. A done_burst in frame K ends those envs' episodes as "done" and their
next ones begin in frame K+1 (out of step with the others); a done_burst on an
episode's L-th frame sets both flags (done wins). Non-finite values end no episode.
Reset flags as above: those of the envs done or truncated in the previous frame.

A bad argument or fault list: one line on stderr, exit 2.
"""

import argparse
import ctypes
import json
import math
import mmap
import os
import signal
import struct
import sys
import time

import flatbuffers
import numpy as np

from hazel.rpc import Envelope, GetAgentSchemaReq
from hazel.rpc.MethodId import MethodId
from hazel.rpc.Payload import Payload

MAGIC = 0x4C524243
HEADER = 4096
RING_HEADER = 64
WRAP = 0xFFFFFFFF
U32 = 0xFFFFFFFF
ERROR_MESSAGE = "GetAgentSchema failed: fault injected by lrbc_fault_peer"
MALFORMED = b"\xab" * 24
CORRELATION_BASE = 0x5EED0000


class Usage(Exception):
    """A bad argument: one line on stderr, exit 2."""


class Failure(Exception):
    """The run cannot go on: one line on stderr, exit 1."""


class Parser(argparse.ArgumentParser):
    def error(self, message):
        raise Usage(message)


def align(v, a):
    return (v + a - 1) // a * a


# -- arguments -------------------------------------------------------------------


def parse_args(argv):
    p = Parser(prog="lrbc_fault_peer.py", add_help=True)
    p.add_argument("--name", required=True)
    p.add_argument("--envs", type=int, required=True)
    p.add_argument("--obs", type=int, required=True)
    p.add_argument("--act", type=int, required=True)
    p.add_argument("--steps", type=int, required=True)
    p.add_argument("--hz", type=float, required=True)
    p.add_argument("--faults", default="[]")
    p.add_argument("--ring", type=int, default=65536)
    p.add_argument("--episodes", action="store_true")
    p.add_argument("--rollout", type=int, default=None)
    p.add_argument("--update", type=float, default=None)
    p.add_argument("--time-limit", type=int, default=None, dest="time_limit")
    a = p.parse_args(argv)
    if not a.name or "/" in a.name or a.name in (".", "..") or "\0" in a.name or len(a.name) > 200:
        raise Usage("--name must be a plain file name of /dev/shm: %r" % a.name)
    for opt in ("envs", "obs", "act", "steps"):
        if getattr(a, opt) < 1:
            raise Usage("--%s must be at least 1, not %d" % (opt, getattr(a, opt)))
    if a.envs > 1 << 24 or a.obs > 1 << 16 or a.act > 1 << 16:
        raise Usage("--envs/--obs/--act too large for this peer")
    if not (math.isfinite(a.hz) and 0.001 <= a.hz <= 100_000):
        raise Usage("--hz must be from 0.001 to 100000, not %s" % a.hz)
    if a.ring < 256 or a.ring > 1 << 30 or a.ring & (a.ring - 1):
        raise Usage("--ring must be a power of two from 256 to 2^30, not %d" % a.ring)
    if (a.rollout is None) != (a.update is None):
        raise Usage("--rollout and --update go together: --%s is missing"
                    % ("update" if a.update is None else "rollout"))
    if a.rollout is not None and a.rollout < 1:
        raise Usage("--rollout must be at least 1, not %d" % a.rollout)
    if a.update is not None and not (math.isfinite(a.update) and 0 <= a.update <= 3600):
        raise Usage("--update must be from 0 to 3600 seconds, not %s" % a.update)
    if a.time_limit is not None and a.time_limit < 1:
        raise Usage("--time-limit must be at least 1, not %d" % a.time_limit)
    a.faults = validate_faults(a.faults, a)
    return a


def validate_faults(text, a):
    try:
        faults = json.loads(text)
    except ValueError as e:
        raise Usage("--faults is not JSON: %s" % e) from None
    if not isinstance(faults, list):
        raise Usage("--faults must be a JSON list")
    allowed = {
        "nan": {"env", "channel", "index"},
        "inf": {"env", "channel", "index"},
        "-inf": {"env", "channel", "index"},
        "done_burst": {"share"},
        "stall": {"secs", "side"},
        "rpc_error": set(),
        "unanswered": set(),
        "malformed": set(),
    }
    value_steps = {}
    out = []

    def integer(f, key, lo, hi, what):
        v = f.get(key)
        if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
            raise Usage("fault %d: %s %r is outside %d..%d (%s)" % (n, key, v, lo, hi, what))
        return v

    for n, f in enumerate(faults):
        if not isinstance(f, dict):
            raise Usage("fault %d is not an object" % n)
        kind = f.get("kind")
        if kind not in allowed:
            raise Usage("fault %d: unknown kind %r (one of %s)" % (n, kind, ", ".join(allowed)))
        extra = set(f) - {"kind", "step"} - allowed[kind]
        if kind in ("nan", "inf", "-inf") and f.get("channel") == "reward":
            extra -= {"index"}
        if extra:
            raise Usage("fault %d (%s): unknown field(s) %s" % (n, kind, ", ".join(sorted(extra))))
        step = integer(f, "step", 1, a.steps, "the steps")
        f = dict(f)
        if kind in ("nan", "inf", "-inf"):
            channel = f.get("channel")
            if channel not in ("obs", "act", "reward"):
                raise Usage("fault %d: channel %r is not obs, act or reward" % (n, channel))
            integer(f, "env", 0, a.envs - 1, "the envs")
            if channel == "obs":
                integer(f, "index", 0, a.obs - 1, "the observations")
            elif channel == "act":
                integer(f, "index", 0, a.act - 1, "the actions")
            if step in value_steps:
                raise Usage("fault %d: frame %d already has a non-finite value (fault %d)"
                            % (n, step, value_steps[step]))
            value_steps[step] = n
        elif kind == "done_burst":
            share = f.get("share")
            if isinstance(share, bool) or not isinstance(share, (int, float)) or not 0 < share <= 1:
                raise Usage("fault %d: share %r is not in (0, 1]" % (n, share))
        elif kind == "stall":
            secs = f.get("secs")
            if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not 0 <= secs <= 3600:
                raise Usage("fault %d: secs %r is not in [0, 3600]" % (n, secs))
            if f.get("side") not in ("engine", "trainer"):
                raise Usage("fault %d: side %r is not engine or trainer" % (n, f.get("side")))
        out.append(f)
    return out


# -- the segment -------------------------------------------------------------------


class Ring:
    """One command ring (spec 4); this process is its producer and its consumer."""

    def __init__(self, mm, offset, capacity, name):
        self.mm, self.name, self.cap = mm, name, capacity
        self.mask = capacity - 1
        self.data = offset + RING_HEADER
        self.write_pos = ctypes.c_uint32.from_buffer(mm, offset)
        self.read_pos = ctypes.c_uint32.from_buffer(mm, offset + 4)

    def push(self, payload):
        """Writes one entry and publishes it; returns its position."""
        length = len(payload)
        if not 0 < length <= self.cap - 4:
            raise Failure("%s: an entry of %d bytes does not fit" % (self.name, length))
        size = (4 + length + 7) & ~7
        w = self.write_pos.value
        idx = w & self.mask
        skip = self.cap - idx if self.cap - idx < size else 0
        used = (w - self.read_pos.value) & U32
        if used + skip + size > self.cap:
            # The only consumer is this process, which consumes every step: a full ring
            # would wait forever.
            raise Failure("%s is full: %d bytes used of %d" % (self.name, used, self.cap))
        if skip:
            struct.pack_into("<I", self.mm, self.data + idx, WRAP)
            w = (w + skip) & U32
            idx = 0
        at = self.data + idx
        struct.pack_into("<I", self.mm, at, length)
        self.mm[at + 4:at + 4 + length] = payload
        self.mm[at + 4 + length:at + size] = bytes(size - 4 - length)
        self.write_pos.value = (w + size) & U32
        return w

    def consume(self):
        """Reads every published entry, then moves read_pos past them."""
        entries = []
        r = self.read_pos.value
        w = self.write_pos.value
        while r != w:
            idx = r & self.mask
            (length,) = struct.unpack_from("<I", self.mm, self.data + idx)
            if length == WRAP:
                r = (r + self.cap - idx) & U32
                continue
            if length == 0 or length > self.cap - 4:
                raise Failure("%s: bad entry length %d at position %d" % (self.name, length, r))
            entries.append((r, bytes(self.mm[self.data + idx + 4:self.data + idx + 4 + length])))
            r = (r + ((4 + length + 7) & ~7)) & U32
        self.read_pos.value = r
        return entries

    def release(self):
        del self.write_pos, self.read_pos


class Segment:
    def __init__(self, a):
        self.a = a
        self.path = "/dev/shm/" + a.name
        self.ino = None
        self.tmp = None
        n, o, c = a.envs, a.obs, a.act
        obs_names = ["pole_angle" if i == 1 else "o%d" % i for i in range(o)]
        act_names = ["a%d" % j for j in range(c)]
        names = b"".join(s.encode() + b"\0" for s in obs_names) + b"\0"
        names += b"".join(s.encode() + b"\0" for s in act_names) + b"\0"
        self.names = names
        at = HEADER
        offs = {}
        for region, length in (("obs", 4 * n * o), ("act", 4 * n * c), ("rewards", 4 * n), ("dones", n),
                               ("truncateds", n), ("resets", n), ("names", len(names)),
                               ("cmd_s2c", RING_HEADER + a.ring), ("cmd_c2s", RING_HEADER + a.ring)):
            offs[region] = align(at, 64)
            at = offs[region] + length
        self.offs = offs
        self.size = align(at, 4096)

    def header(self, pid, now_ns):
        a, o = self.a, self.offs
        h = bytearray(HEADER)
        struct.pack_into("<IIII", h, 0, MAGIC, 1, pid, pid)
        h[16] = 0  # mode: training, lock-step
        struct.pack_into("<III", h, 20, a.envs, a.obs, a.act)
        struct.pack_into("<QQ", h, 32, 0, 0)  # frame_seq, action_seq
        struct.pack_into("<QQQQQQQ", h, 48, o["obs"], o["act"], o["rewards"], o["dones"], o["resets"],
                         o["cmd_s2c"], o["cmd_c2s"])
        struct.pack_into("<I", h, 104, a.ring)
        # image_offset, width, height, channels, gpu fields: zero.
        struct.pack_into("<QQQI", h, 256, self.size, o["truncateds"], o["names"], len(self.names))
        struct.pack_into("<I", h, 284, 0b1)  # service_flags: Agent
        # write_seq 2: the initial frame 0 below is a complete write.
        struct.pack_into("<QQQQ", h, 288, 2, 0, now_ns, 0)
        # ctl rings: none (offsets and size zero).
        return h

    def create(self):
        if os.path.lexists(self.path):
            raise Failure("/dev/shm/%s exists already" % self.a.name)
        pid = os.getpid()
        tmp = "/dev/shm/.%s.%d.creating" % (self.a.name, pid)
        fd = os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
        self.tmp = tmp
        try:
            os.fchmod(fd, 0o600)
            os.ftruncate(fd, self.size)
            with mmap.mmap(fd, self.size) as mm:
                self.created_ns = time.monotonic_ns()
                mm[0:HEADER] = bytes(self.header(pid, self.created_ns))
                no = self.offs["names"]
                mm[no:no + len(self.names)] = self.names
                self.initial_frame(mm)
            try:
                os.link(tmp, self.path)
            except FileExistsError:
                raise Failure("/dev/shm/%s exists already" % self.a.name) from None
        finally:
            os.unlink(tmp)
            self.tmp = None
            os.close(fd)
        self.fd = os.open(self.path, os.O_RDWR | os.O_NOFOLLOW)
        self.ino = os.fstat(self.fd).st_ino
        self.mm = mmap.mmap(self.fd, self.size)
        self.views()

    def initial_frame(self, mm):
        a, o = self.a, self.offs
        env = np.arange(a.envs, dtype=np.float64)
        obs = np.sin(env[:, None] + 0.1 * np.arange(a.obs)[None, :]).astype(np.float32)
        mm[o["obs"]:o["obs"] + obs.nbytes] = obs.tobytes()
        rew = (1.0 - 0.001 * env).astype(np.float32)
        mm[o["rewards"]:o["rewards"] + rew.nbytes] = rew.tobytes()

    def views(self):
        a, o, mm = self.a, self.offs, self.mm
        n = a.envs
        self.obs = np.ndarray((n, a.obs), np.float32, mm, o["obs"])
        self.act = np.ndarray((n, a.act), np.float32, mm, o["act"])
        self.rewards = np.ndarray((n,), np.float32, mm, o["rewards"])
        self.dones = np.ndarray((n,), np.uint8, mm, o["dones"])
        self.truncateds = np.ndarray((n,), np.uint8, mm, o["truncateds"])
        self.resets = np.ndarray((n,), np.uint8, mm, o["resets"])
        # Counters as ctypes words: aligned, atomic-width loads and stores.
        word = lambda off: ctypes.c_uint64.from_buffer(mm, off)  # noqa: E731
        self.frame_seq, self.action_seq = word(32), word(40)
        self.write_seq, self.frame_time_ns, self.action_time_ns = word(288), word(304), word(312)
        self.s2c = Ring(mm, o["cmd_s2c"], a.ring, "cmd_s2c")
        self.c2s = Ring(mm, o["cmd_c2s"], a.ring, "cmd_c2s")

    def remove(self):
        """Unlinks the name if it is still this segment's (and a half-made one)."""
        if self.tmp is not None:
            try:
                os.unlink(self.tmp)
            except FileNotFoundError:
                pass
        if self.ino is None:
            return
        try:
            st = os.lstat(self.path)
            if st.st_ino == self.ino:
                os.unlink(self.path)
        except FileNotFoundError:
            pass
        self.ino = None


# -- envelopes -------------------------------------------------------------------


def request_envelope(correlation_id):
    b = flatbuffers.Builder(128)
    agent = b.CreateString("agent_0")
    GetAgentSchemaReq.Start(b)
    GetAgentSchemaReq.AddAgentName(b, agent)
    payload = GetAgentSchemaReq.End(b)
    Envelope.Start(b)
    Envelope.AddCorrelationId(b, correlation_id)
    Envelope.AddMethod(b, MethodId.GetAgentSchema)
    Envelope.AddSentNs(b, time.monotonic_ns())
    Envelope.AddPayloadType(b, Payload.GetAgentSchemaReq)
    Envelope.AddPayload(b, payload)
    b.Finish(Envelope.End(b), file_identifier=b"LRPC")
    return bytes(b.Output())


def error_envelope(correlation_id, method):
    """A failed response (hazel_rpc.fbs: non-empty error_message, payload NONE)."""
    b = flatbuffers.Builder(128)
    msg = b.CreateString(ERROR_MESSAGE)
    Envelope.Start(b)
    Envelope.AddCorrelationId(b, correlation_id)
    Envelope.AddMethod(b, method)
    Envelope.AddErrorMessage(b, msg)
    Envelope.AddSentNs(b, time.monotonic_ns())
    b.Finish(Envelope.End(b), file_identifier=b"LRPC")
    return bytes(b.Output())


def read_envelope(payload):
    """(correlation_id, method, error_message) of an envelope, or None if it is not one."""
    if len(payload) < 8 or not Envelope.Envelope.EnvelopeBufferHasIdentifier(payload, 0):
        return None
    try:
        e = Envelope.Envelope.GetRootAs(payload, 0)
        err = e.ErrorMessage()
        return e.CorrelationId(), e.Method(), err.decode() if err else None
    except Exception:  # noqa: BLE001 - anything that does not parse is not an envelope
        return None


# -- the run ---------------------------------------------------------------------


def sleep_until(deadline_ns):
    while True:
        rem = deadline_ns - time.monotonic_ns()
        if rem <= 0:
            return
        time.sleep(rem / 1e9)


def wait_for(word):
    """Reads stdin until `word` (True), or `quit`/end of input (False)."""
    for line in sys.stdin:
        cmd = line.strip()
        if cmd == word:
            return True
        if cmd == "quit":
            return False
    return False


class Peer:
    def __init__(self, a, seg):
        self.a, self.seg = a, seg
        n = a.envs
        self.env = np.arange(n)
        envf = self.env.astype(np.float64)
        # sin(x + c) = sin x cos c + cos x sin c: two passes instead of a sine per value.
        ob = envf[:, None] + 0.1 * np.arange(a.obs)[None, :]
        self.obs_sin, self.obs_cos = np.sin(ob).astype(np.float32), np.cos(ob).astype(np.float32)
        ab = envf[:, None] + 0.5 * np.arange(a.act)[None, :]
        self.act_sin, self.act_cos = np.sin(ab).astype(np.float32), np.cos(ab).astype(np.float32)
        self.obs_tmp = np.empty((n, a.obs), np.float32)
        self.act_tmp = np.empty((n, a.act), np.float32)
        self.rewards = (1.0 - 0.001 * envf).astype(np.float32)
        self.ep_first = np.ones(n, np.int64)
        # --time-limit: the frame each env's current episode began in.
        self.ep_begin = np.ones(n, np.int64)
        self.ep_ret = np.zeros(n, np.float64)
        self.ep_nonfinite = np.zeros(n, bool)
        self.episodes = []
        self.by_step = {}
        for f in a.faults:
            self.by_step.setdefault(f["step"], []).append(f)
        self.applied = []
        self.next_correlation = CORRELATION_BASE
        self.answer = {}  # correlation id -> the rpc_error fault it answers
        self.stats = {"nonfinite_actions_seen": 0, "resets_applied": 0, "dones": 0, "truncateds": 0,
                      "s2c_entries_read": 0, "c2s_entries_read": 0}

    def faults(self, k, kind):
        return [f for f in self.by_step.get(k, ()) if f["kind"] == kind]

    def value_fault(self, k, channel):
        for f in self.by_step.get(k, ()):
            if f["kind"] in ("nan", "inf", "-inf") and f["channel"] == channel:
                return f, {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}[f["kind"]]
        return None, None

    def apply(self, f, **more):
        rec = dict(f)
        rec["frame_seq"] = f["step"]
        rec.update(more)
        self.applied.append(rec)
        return rec

    # The trainer's part of step k.
    def trainer(self, k, prev_ended):
        seg = self.seg
        c, s = np.float32(math.cos(0.05 * k)), np.float32(math.sin(0.05 * k))
        np.multiply(self.act_sin, c, out=self.act_tmp)
        self.act_tmp += self.act_cos * s
        f, v = self.value_fault(k, "act")
        if f is not None:
            self.act_tmp[f["env"], f["index"]] = v
            self.apply(f)
        seg.act[:] = self.act_tmp
        seg.resets[prev_ended] = 1
        for f in self.faults(k, "rpc_error") + self.faults(k, "unanswered"):
            cid = self.next_correlation
            self.next_correlation += 1
            pos = seg.c2s.push(request_envelope(cid))
            rec = self.apply(f, correlation_id=cid, method="GetAgentSchema", request_position=pos)
            if f["kind"] == "rpc_error":
                self.answer[cid] = rec
        seg.action_time_ns.value = time.monotonic_ns()
        seg.action_seq.value = k

    # The engine's part of step k.
    def engine(self, k):
        seg, a = self.seg, self.a
        actions = seg.act.copy()
        self.stats["nonfinite_actions_seen"] += int(np.count_nonzero(~np.isfinite(actions)))
        for pos, payload in seg.c2s.consume():
            self.stats["c2s_entries_read"] += 1
            env = read_envelope(payload)
            if env is None:
                raise Failure("cmd_c2s: the entry at %d is not an envelope" % pos)
            rec = self.answer.pop(env[0], None)
            if rec is not None:
                rec["response_position"] = seg.s2c.push(error_envelope(env[0], env[1]))
                rec["error_message"] = ERROR_MESSAGE
        for f in self.faults(k, "malformed"):
            self.apply(f, ring="cmd_s2c", position=seg.s2c.push(MALFORMED), length=len(MALFORMED))
        self.stats["resets_applied"] += int(np.count_nonzero(seg.resets))
        seg.resets[:] = 0
        e = self.env
        if a.time_limit is None:
            dones = ((k + 7 * e) % 97 == 0).astype(np.uint8)
            truncs = ((k + 11 * e) % 389 == 0).astype(np.uint8)
        else:
            # Only the time limit (and done_burst below): the L-th frame of an episode.
            dones = np.zeros(a.envs, np.uint8)
            begin = k - a.time_limit + 1
            if begin >= 1:
                truncs = (self.ep_begin == begin).astype(np.uint8)
            else:
                truncs = np.zeros(a.envs, np.uint8)
        for f in self.faults(k, "done_burst"):
            m = min(a.envs, math.ceil(f["share"] * a.envs))
            dones[:m] = 1
            self.apply(f, envs=m)
        if a.time_limit is not None:
            self.ep_begin[(dones | truncs).astype(bool)] = k + 1
        c, s = np.float32(math.cos(0.01 * k)), np.float32(math.sin(0.01 * k))
        np.multiply(self.obs_cos, s, out=self.obs_tmp)
        fo, vo = self.value_fault(k, "obs")
        fr, vr = self.value_fault(k, "reward")
        ws = seg.write_seq.value
        seg.write_seq.value = ws + 1
        np.multiply(self.obs_sin, c, out=seg.obs)
        seg.obs += self.obs_tmp
        seg.rewards[:] = self.rewards
        if fo is not None:
            seg.obs[fo["env"], fo["index"]] = vo
        if fr is not None:
            seg.rewards[fr["env"]] = vr
        seg.dones[:] = dones
        seg.truncateds[:] = truncs
        now = time.monotonic_ns()
        seg.frame_time_ns.value = now
        seg.write_seq.value = ws + 2
        seg.frame_seq.value = k
        for f in (fo, fr):
            if f is not None:
                self.apply(f)
        if a.episodes:
            self.count_episodes(k, dones, truncs, fo)
        self.stats["dones"] += int(dones.sum())
        self.stats["truncateds"] += int(truncs.sum())
        return now, (dones | truncs).astype(bool)

    def count_episodes(self, k, dones, truncs, obs_fault):
        r = self.seg.rewards.astype(np.float64)
        self.ep_ret += r
        self.ep_nonfinite |= ~np.isfinite(r)
        if obs_fault is not None:
            self.ep_nonfinite[obs_fault["env"]] = True
        for e in np.nonzero(dones | truncs)[0]:
            ret = float(self.ep_ret[e])
            if math.isnan(ret):
                ret = "NaN"
            elif math.isinf(ret):
                ret = "inf" if ret > 0 else "-inf"
            ending = "done" if dones[e] else "truncated"
            if self.ep_nonfinite[e]:
                ending = "nonfinite"
            self.episodes.append({"env": int(e), "first_frame": int(self.ep_first[e]),
                                  "last_frame": k, "return": ret, "ending": ending})
            self.ep_first[e] = k + 1
            self.ep_ret[e] = 0.0
            self.ep_nonfinite[e] = False

    def trainer_reads_responses(self):
        for pos, payload in self.seg.s2c.consume():
            self.stats["s2c_entries_read"] += 1
            env = read_envelope(payload)
            for rec in self.applied:
                if env is not None and rec.get("response_position") == pos:
                    rec["response_error_seen"] = env[2]

    def run(self):
        a, seg = self.a, self.seg
        period = max(1, round(1e9 / a.hz))
        quarter = period // 4
        t0 = time.monotonic_ns()
        shift = stalled = 0
        published = None
        prev_ended = np.zeros(a.envs, bool)
        late_steps = 0
        max_late = 0
        first_action = last_action = None
        first_frame = None
        update_frames, update_ns, update_starts = [], [], []
        # Pauses between frame 1's publication and the last frame's, by side.
        trainer_wait = engine_wait = 0
        for k in range(1, a.steps + 1):
            slot = t0 + shift + (k - 1) * period
            sleep_until(slot if published is None else max(slot, published + quarter))
            now = time.monotonic_ns()
            late = now - slot
            max_late = max(max_late, late)
            if late > period // 2:
                late_steps += 1
            if a.rollout is not None and k > 1 and (k - 1) % a.rollout == 0:
                # A policy update after the rollout that ended with frame k-1.
                t = time.monotonic_ns()
                sleep_until(t + round(a.update * 1e9))
                slept = time.monotonic_ns() - t
                shift += slept
                update_frames.append(k - 1)
                update_ns.append(slept)
                update_starts.append(t)
                trainer_wait += slept
            for f in self.faults(k, "stall"):
                if f["side"] == "trainer":
                    t = time.monotonic_ns()
                    sleep_until(t + round(f["secs"] * 1e9))
                    slept = time.monotonic_ns() - t
                    shift += slept
                    stalled += slept
                    if k > 1:
                        trainer_wait += slept
            self.trainer(k, prev_ended)
            acted = seg.action_time_ns.value
            first_action = acted if first_action is None else first_action
            last_action = acted
            for f in self.faults(k, "stall"):
                if f["side"] == "trainer":
                    gap = acted - (published if published is not None else t0)
                    self.apply(f, measured_secs=gap / 1e9)
            for f in self.faults(k, "stall"):
                if f["side"] == "engine":
                    t = time.monotonic_ns()
                    sleep_until(t + round(f["secs"] * 1e9))
                    slept = time.monotonic_ns() - t
                    shift += slept
                    stalled += slept
                    if k > 1:
                        engine_wait += slept
            published, prev_ended = self.engine(k)
            first_frame = published if first_frame is None else first_frame
            for f in self.faults(k, "stall"):
                if f["side"] == "engine":
                    self.apply(f, measured_secs=(published - acted) / 1e9)
            self.trainer_reads_responses()
        span = last_action - first_action - stalled - sum(update_ns)
        self.applied.sort(key=lambda r: r["frame_seq"])
        more = {"episodes": self.episodes} if a.episodes else {}
        if a.rollout is not None:
            rhythm = self.rhythm(update_frames, update_ns, published - first_frame,
                                 trainer_wait, engine_wait)
            rhythm["updates_at"] = [[f, t, ns / 1e9] for f, t, ns in
                                    zip(update_frames, update_starts, update_ns)]
            rhythm["created_ns"] = seg.created_ns
            rhythm["first_frame_ns"] = first_frame
            rhythm["last_frame_ns"] = published
            after = {"rhythm": rhythm}
        else:
            after = {}
        return {
            **more,
            "done": True,
            "steps": a.steps,
            "frame_seq": seg.frame_seq.value,
            "action_seq": seg.action_seq.value,
            "faults": self.applied,
            "hz": a.hz,
            "rate_hz": (a.steps - 1) * 1e9 / span if a.steps > 1 and span > 0 else None,
            "late_steps": late_steps,
            "max_late_ms": max_late / 1e6,
            "elapsed_s": (published - t0) / 1e9,
            "stalled_s": stalled / 1e9,
            **self.stats,
            **after,
        }

    def rhythm(self, update_frames, update_ns, elapsed_ns, trainer_wait_ns, engine_wait_ns):
        """The done line's "rhythm": the peer's own measure of its rollout/update loop."""
        a = self.a
        n = len(update_ns)
        if elapsed_ns > 0:
            trainer = trainer_wait_ns / elapsed_ns
            engine = engine_wait_ns / elapsed_ns
            shares = {"stepping": 1.0 - trainer - engine, "trainer": trainer, "engine": engine}
        else:
            shares = None  # one step: frame 1 is the last frame
        return {
            "rollout_frames": a.rollout,
            "updates": n,
            "update_secs": sum(update_ns) / n / 1e9 if n else None,
            "update_secs_min": min(update_ns) / 1e9 if n else None,
            "update_secs_max": max(update_ns) / 1e9 if n else None,
            "update_frames": update_frames,
            "frames": a.steps,
            "elapsed_secs": elapsed_ns / 1e9,
            "trainer_wait_secs": trainer_wait_ns / 1e9,
            "engine_wait_secs": engine_wait_ns / 1e9,
            "shares": shares,
        }


def main(argv):
    try:
        a = parse_args(argv)
    except Usage as e:
        print("lrbc_fault_peer: %s" % e, file=sys.stderr, flush=True)
        return 2
    seg = Segment(a)

    def on_signal(signum, _frame):
        seg.remove()
        os._exit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        seg.create()
        ready = {"ready": True, "name": a.name, "pid": os.getpid(), "frame_seq": 0, "size": seg.size}
        print(json.dumps(ready), flush=True)
        if not wait_for("go"):
            return 0
        done = Peer(a, seg).run()
        print(json.dumps(done), flush=True)
        wait_for("quit")
        return 0
    except Failure as e:
        print("lrbc_fault_peer: %s" % e, file=sys.stderr, flush=True)
        return 1
    finally:
        seg.remove()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
