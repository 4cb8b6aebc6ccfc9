//! The segment's state changes in a recording (`/lrbc/state`): few, read once, for the
//! timeline's marks and the state at the cursor; and the other channels read whole
//! (`/lrbc/events`, `/lrbc/rhythm`).

use std::sync::Arc;

use super::{Damage, Recording};
use lrbc_live::rhythm::RhythmSummary;

/// A message's log time and bytes.
type Timed = (u64, Arc<[u8]>);

/// One change of the recorded segment's state, as its recorder saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StateChange {
    pub log_ns: u64,
    /// "truncated", "unlinked", "replaced", "engine_gone", "stale", "attached".
    pub state: String,
    /// Why, in words ("the segment file is 4096 bytes, …"); may be empty.
    pub note: String,
    pub frame_seq: Option<u64>,
}

impl StateChange {
    /// Whether the state is one where the segment's frames are not to be trusted (or
    /// are no longer published): anything but attached.
    pub fn is_trouble(&self) -> bool {
        self.state != "attached"
    }

    /// "truncated: the segment file is 4096 bytes".
    pub fn describe(&self) -> String {
        let state = self.state.replace('_', " ");
        if self.note.is_empty() {
            state
        } else {
            format!("{state}: {}", self.note)
        }
    }
}

/// A `/lrbc/state` message, or `None` when it does not read.
fn parse(log_ns: u64, data: &[u8]) -> Option<StateChange> {
    let v: serde_json::Value = serde_json::from_slice(data).ok()?;
    Some(StateChange {
        log_ns,
        state: v.get("state")?.as_str()?.to_string(),
        note: v
            .get("note")
            .and_then(|n| n.as_str())
            .unwrap_or_default()
            .to_string(),
        frame_seq: v.get("frame_seq").and_then(serde_json::Value::as_u64),
    })
}

impl Recording {
    /// Every state change in the file, in order of time. Only the chunks whose message
    /// indexes list the state channel are read (every chunk when a chunk has no index,
    /// as the last one of an unfinished file may not). A message that does not read is
    /// left out.
    pub fn state_changes(&mut self) -> Result<Vec<StateChange>, Damage> {
        self.learn_channels()?;
        let Some(channel) = self.state else {
            return Ok(Vec::new());
        };
        let mut out: Vec<StateChange> = self
            .messages_of(channel)?
            .iter()
            .filter_map(|(t, data)| parse(*t, data))
            .collect();
        out.sort_by_key(|c| c.log_ns);
        Ok(out)
    }

    /// The messages of `/lrbc/events` in the order written; None when the file has no
    /// such channel.
    pub(in crate::replay) fn events_messages(&mut self) -> Result<Option<Vec<Arc<[u8]>>>, Damage> {
        self.learn_channels()?;
        let Some(channel) = self.events else {
            return Ok(None);
        };
        Ok(Some(
            self.messages_of(channel)?
                .into_iter()
                .map(|(_, d)| d)
                .collect(),
        ))
    }

    /// The newest summary of the loop's rhythm its recorder wrote on `/lrbc/rhythm`; None
    /// when the file has none (written before recorders had one, or without a detector).
    pub fn recorded_rhythm(&mut self) -> Result<Option<RhythmSummary>, Damage> {
        self.learn_channels()?;
        let Some(channel) = self.rhythm else {
            return Ok(None);
        };
        Ok(self
            .messages_of(channel)?
            .iter()
            .rev()
            .find_map(|(_, d)| crate::format::rhythm_of(d)))
    }

    /// Every message of `channel` with its log time, in the order of the file. Only the
    /// chunks whose message indexes list it are read (every chunk when a chunk has no
    /// index, as the last one of an unfinished file may not).
    fn messages_of(&mut self, channel: u16) -> Result<Vec<Timed>, Damage> {
        let mut out = Vec::new();
        for i in 0..self.chunks.len() {
            let listed = self
                .chunk_channels
                .get(&self.chunks[i].offset)
                .is_none_or(|chs| chs.contains(&channel));
            if !listed {
                continue;
            }
            let msgs = self.chunk(i)?;
            out.extend(
                msgs.iter()
                    .filter(|m| m.channel == channel)
                    .map(|m| (m.log_ns, Arc::clone(&m.data))),
            );
        }
        Ok(out)
    }

    /// Reads the chunk of each channel's first message whose channel record has not been
    /// read yet (a channel's record is in the chunk of its first message), so that every
    /// channel listed in the message indexes is known.
    pub(super) fn learn_channels(&mut self) -> Result<(), Damage> {
        let unknown: Vec<u16> = self
            .indexed
            .iter()
            .filter(|id| !self.known.contains(id))
            .copied()
            .collect();
        for id in unknown {
            if self.known.contains(&id) {
                continue;
            }
            let first = self.chunks.iter().position(|c| {
                self.chunk_channels
                    .get(&c.offset)
                    .is_some_and(|chs| chs.contains(&id))
            });
            if let Some(i) = first {
                self.chunk(i)?;
            }
            if !self.known.contains(&id) {
                // Not in its chunk: not looked for again.
                self.known.insert(id);
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_state_message_reads_and_describes_itself() {
        let c = parse(
            5,
            br#"{"state":"truncated","note":"the segment file is 4096 bytes","frame_seq":12}"#,
        )
        .expect("reads");
        assert_eq!(c.frame_seq, Some(12));
        assert!(c.is_trouble());
        assert_eq!(c.describe(), "truncated: the segment file is 4096 bytes");
        let back = parse(9, br#"{"state":"attached","note":null}"#).expect("reads");
        assert!(!back.is_trouble());
        assert_eq!(back.describe(), "attached");
        assert!(parse(1, b"not json").is_none());
        assert!(parse(1, br#"{"note":"no state"}"#).is_none());
    }
}
