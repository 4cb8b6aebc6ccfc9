//! The camera images of a recording at a time: the newest chunks whose message indexes
//! list an image channel, read newest first.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use super::{Damage, Msg, Recording};
use crate::format::stream_name_of;

/// The newest camera images at or before a time: the foxglove messages as recorded.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LatestImages {
    /// Recorded env → (log time, its `foxglove.RawImage` on `/lrbc/camera/env<N>`).
    pub cameras: BTreeMap<u32, (u64, Arc<[u8]>)>,
    /// Stream (the topic's last part, `camera-front-env3`) → (log time, the ring
    /// entry's envelope that carried the frame, as the window decodes live streams).
    pub streams: BTreeMap<String, (u64, Arc<[u8]>)>,
}

impl Recording {
    /// The newest camera image of every recorded env and the newest frame of every
    /// stream at or before `t`. Chunks are read newest first, only those whose message
    /// indexes list an image channel not found yet (or a channel not known yet).
    pub fn images_at(&mut self, t: u64) -> Result<LatestImages, Damage> {
        self.learn_channels()?;
        let mut out = LatestImages::default();
        let mut found: HashSet<u16> = HashSet::new();
        let mut unmatched = Vec::new();
        let mut i = self.chunks.partition_point(|c| c.start_ns <= t);
        while i > 0 {
            i -= 1;
            let wanted = |id: &u16| {
                !found.contains(id)
                    && (self.cameras.contains_key(id)
                        || self.streams.contains_key(id)
                        || !self.known.contains(id))
            };
            let offset = self.chunks[i].offset;
            if self
                .chunk_channels
                .get(&offset)
                .is_some_and(|chs| !chs.iter().any(wanted))
            {
                continue;
            }
            let msgs = self.chunk(i)?;
            for m in msgs.iter().rev() {
                if m.log_ns > t || found.contains(&m.channel) {
                    continue;
                }
                if let Some(&env) = self.cameras.get(&m.channel) {
                    found.insert(m.channel);
                    out.cameras.insert(env, (m.log_ns, Arc::clone(&m.data)));
                } else if let Some(name) = self.streams.get(&m.channel) {
                    found.insert(m.channel);
                    // The ring entry written with it (same log time) is the frame as
                    // the engine sent it.
                    match self.envelope_of(&msgs, m.log_ns, name) {
                        Some(e) => {
                            out.streams.insert(name.clone(), (m.log_ns, e));
                        }
                        None => unmatched.push((name.clone(), m.log_ns)),
                    }
                }
            }
            // A chunk closed between the image and its ring entry: the next one has it.
            if !unmatched.is_empty() && i + 1 < self.chunks.len() {
                let next = self.chunk(i + 1)?;
                for (name, log_ns) in unmatched.drain(..) {
                    if let Some(e) = self.envelope_of(&next, log_ns, &name) {
                        out.streams.insert(name, (log_ns, e));
                    }
                }
            }
            unmatched.clear();
            let complete = self
                .cameras
                .keys()
                .chain(self.streams.keys())
                .all(|id| found.contains(id))
                && self.indexed.iter().all(|id| self.known.contains(id));
            if complete {
                break;
            }
        }
        Ok(out)
    }
}

impl Recording {
    /// The ring entry of `msgs` logged at `log_ns` that is a frame of stream `name`.
    fn envelope_of(&self, msgs: &[Msg], log_ns: u64, name: &str) -> Option<Arc<[u8]>> {
        msgs.iter()
            .find(|r| {
                r.log_ns == log_ns
                    && self.rings.contains_key(&r.channel)
                    && stream_name_of(&r.data).as_deref() == Some(name)
            })
            .map(|r| Arc::clone(&r.data))
    }
}
