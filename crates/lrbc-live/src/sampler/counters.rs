//! The header's live counters.

use super::data::Counters;
use lrbc::layout::Geometry;
use lrbc::segment::Segment;

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
