//! Guarded copies of a frame (spec 3.2), the live counters, and following a
//! re-attachment.

use std::sync::Mutex;

use super::data::{Counters, SamplerData};
use crate::attach::Attached;
use crate::layout::Geometry;
use crate::segment::Segment;
use crate::snapshot::{self, HotData};

/// The header's live words, each loaded atomically.
pub(super) fn load_counters(seg: &Segment, g: &Geometry, now_ns: u64) -> Counters {
    let c = g.counters;
    Counters {
        frame_seq: seg.load_u64(c.frame_seq).unwrap_or(0),
        action_seq: seg.load_u64(c.action_seq).unwrap_or(0),
        write_seq: c.ext.and_then(|e| seg.load_u64(e.write_seq)),
        image_seq: c.ext.and_then(|e| seg.load_u64(e.image_seq)),
        frame_time_ns: c.ext.and_then(|e| seg.load_u64(e.frame_time_ns)),
        action_time_ns: c.ext.and_then(|e| seg.load_u64(e.action_time_ns)),
        service_flags: c.ext.and_then(|e| seg.load_u32(e.service_flags)),
        server_pid: seg.load_u32(c.server_pid).unwrap_or(0),
        client_pid: seg.load_u32(c.client_pid).unwrap_or(0),
        read_ns: now_ns,
    }
}

/// What one guarded copy of a frame gave.
pub(super) struct Taken {
    pub consistent: bool,
    pub frame_seq: u64,
    pub latency: Option<u64>,
    /// The watched envs that exist, in the order of the rows copied.
    pub watched: Vec<u32>,
}

/// Copies the hot arrays of every env and the observation and action rows of the
/// watched envs into `hot` and `watched_buf`, under the guard of spec 3.2.
pub(super) fn copy_frame(
    attached: &Attached,
    watched_envs: &[u32],
    hot: &mut HotData,
    watched_buf: &mut Vec<f32>,
) -> Taken {
    let (g, seg) = (&attached.geometry, &attached.segment);
    let watched: Vec<u32> = watched_envs
        .iter()
        .copied()
        .filter(|&e| e < g.num_envs)
        .collect();
    // Few attempts: when the engine is already writing the next frame, this one is
    // gone; retrying would only take CPU from the engine.
    let copy = snapshot::guarded_read(seg, g, 3, |s| {
        snapshot::copy_hot_into(s, g, hot);
        snapshot::copy_rows_into(s, g, &watched, watched_buf);
    });
    let latency = g.counters.ext.and_then(|e| {
        let f = seg.load_u64(e.frame_time_ns)?;
        let a = seg.load_u64(e.action_time_ns)?;
        (f >= a && a != 0).then(|| f - a)
    });
    Taken {
        consistent: copy.consistent,
        frame_seq: copy.frame_seq,
        latency,
        watched,
    }
}

/// Maps the new segment when the auxiliary thread has re-attached (the shared data's
/// generation moved on): true when `attached` and `generation` now follow it. Never
/// waits for the data's lock; a busy lock is tried again at the next look.
pub(super) fn reopen_if_reattached(
    data: &Mutex<SamplerData>,
    attached: &mut Attached,
    generation: &mut u64,
) -> bool {
    let Ok(current) = data.try_lock().map(|d| d.generation) else {
        return false;
    };
    if current == *generation {
        return false;
    }
    match attached.reopen() {
        Ok(a) => {
            *attached = a;
            *generation = current;
            true
        }
        Err(_) => false,
    }
}
