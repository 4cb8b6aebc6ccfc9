//! The frame table (`lrbc.recording.Frame`, `schema/recording.fbs`): [`FrameRef`] is the
//! one encoder, used by the recorder (and the export's synthetic recordings);
//! [`RecFrame`] the one decoder, used by the reader's
//! callers (the player and the export): verified by flatc's generated code, then checked
//! for the shape the recorder writes (flag lists as long as the rewards, recorded envs
//! ascending, observations and actions row-major for those envs).

use lrbc::rpc::recording_fb as fb;

/// A frame to record, borrowed: the hot data of every env and the rows of the recorded
/// envs.
#[derive(Clone, Copy, Debug)]
pub struct FrameRef<'a> {
    pub frame_seq: u64,
    /// 0 when the layout has no frame time.
    pub frame_time_ns: u64,
    pub action_seq: u64,
    /// The trainer's stamp of the actions that made the frame (`action_time_ns`), when
    /// it is not after `frame_time_ns`; 0 when not known.
    pub action_time_ns: u64,
    /// The recorder's clock when it sampled the frame.
    pub sampled_ns: u64,
    /// The reward of every env of the segment.
    pub rewards: &'a [f32],
    pub dones: &'a [u8],
    /// None when the layout has none.
    pub truncateds: Option<&'a [u8]>,
    pub resets: &'a [u8],
    /// The recorded envs, ascending.
    pub envs: &'a [u32],
    /// Row-major: `obs_size` values per recorded env.
    pub observations: &'a [f32],
    /// Row-major: `act_size` values per recorded env.
    pub actions: &'a [f32],
}

impl FrameRef<'_> {
    /// Encodes the frame into `b` (reset first, so that its buffer is reused from frame
    /// to frame): the bytes of a `lrbc.recording.Frame`.
    pub fn encode<'b>(&self, b: &'b mut flatbuffers::FlatBufferBuilder<'static>) -> &'b [u8] {
        b.reset();
        let rewards = b.create_vector(self.rewards);
        let dones = b.create_vector(self.dones);
        let truncateds = self.truncateds.map(|t| b.create_vector(t));
        let resets = b.create_vector(self.resets);
        let envs = b.create_vector(self.envs);
        let observations = b.create_vector(self.observations);
        let actions = b.create_vector(self.actions);
        let frame = fb::Frame::create(
            b,
            &fb::FrameArgs {
                frame_seq: self.frame_seq,
                frame_time_ns: self.frame_time_ns,
                action_seq: self.action_seq,
                action_time_ns: self.action_time_ns,
                sampled_ns: self.sampled_ns,
                rewards: Some(rewards),
                dones: Some(dones),
                truncateds,
                resets: Some(resets),
                envs: Some(envs),
                observations: Some(observations),
                actions: Some(actions),
            },
        );
        b.finish(frame, None);
        b.finished_data()
    }
}

/// A frame of the recording, decoded.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RecFrame {
    /// The message's log time (the recorder's clock when it copied the frame).
    pub log_ns: u64,
    pub frame_seq: u64,
    pub frame_time_ns: u64,
    pub action_seq: u64,
    /// The trainer's stamp of the actions that made the frame; 0 when not known (a
    /// layout without it, or a file written before recordings had it).
    pub action_time_ns: u64,
    /// The recorder's clock when it sampled the frame.
    pub sampled_ns: u64,
    /// The reward of every env of the segment.
    pub rewards: Vec<f32>,
    pub dones: Vec<u8>,
    /// None when the frame has none (a layout without them).
    pub truncateds: Option<Vec<u8>>,
    pub resets: Vec<u8>,
    /// The recorded envs, ascending.
    pub envs: Vec<u32>,
    /// Row-major: `obs_size` values per recorded env.
    pub observations: Vec<f32>,
    /// Row-major: `act_size` values per recorded env.
    pub actions: Vec<f32>,
    pub obs_size: usize,
    pub act_size: usize,
}

/// Bytes that are not a frame as the recorder writes them, as one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("a frame does not decode: {0}")]
    Decode(String),
    #[error("frame {frame_seq}: {why}")]
    Shape { frame_seq: u64, why: &'static str },
}

impl RecFrame {
    /// Decodes a `lrbc.recording.Frame`; None when the bytes are not one.
    pub fn decode(log_ns: u64, bytes: &[u8]) -> Option<Self> {
        let mut f = Self::default();
        f.decode_into(log_ns, bytes).ok()?;
        Some(f)
    }

    /// Decodes `bytes` into `self`, reusing its buffers (a pass over many frames).
    /// The `frame_seq` of the frame message `bytes`, without decoding its arrays (None:
    /// not a frame).
    pub fn frame_seq_of(bytes: &[u8]) -> Option<u64> {
        fb::root_as_frame(bytes).ok().map(|f| f.frame_seq())
    }

    pub fn decode_into(&mut self, log_ns: u64, bytes: &[u8]) -> Result<(), FrameError> {
        let f =
            fb::root_as_frame(bytes).map_err(|e| FrameError::Decode(lrbc::rpc::one_line(&e)))?;
        self.log_ns = log_ns;
        self.frame_seq = f.frame_seq();
        self.frame_time_ns = f.frame_time_ns();
        self.action_seq = f.action_seq();
        self.action_time_ns = f.action_time_ns();
        self.sampled_ns = f.sampled_ns();
        fill(&mut self.rewards, f.rewards().map(|v| v.iter()));
        fill(&mut self.dones, f.dones().map(|v| v.iter()));
        fill(&mut self.resets, f.resets().map(|v| v.iter()));
        self.truncateds = match f.truncateds() {
            Some(v) => {
                let mut buf = self.truncateds.take().unwrap_or_default();
                fill(&mut buf, Some(v.iter()));
                Some(buf)
            }
            None => None,
        };
        fill(&mut self.envs, f.envs().map(|v| v.iter()));
        fill(&mut self.observations, f.observations().map(|v| v.iter()));
        fill(&mut self.actions, f.actions().map(|v| v.iter()));
        let bad = |why| FrameError::Shape {
            frame_seq: f.frame_seq(),
            why,
        };
        let n = self.rewards.len();
        if self.dones.len() != n
            || self.resets.len() != n
            || self.truncateds.as_ref().is_some_and(|t| t.len() != n)
        {
            return Err(bad("its flag lists and rewards differ in length"));
        }
        if self.envs.windows(2).any(|w| w[0] >= w[1])
            || self.envs.last().is_some_and(|&e| e as usize >= n)
        {
            return Err(bad("its recorded envs are not ascending env indices"));
        }
        let k = self.envs.len();
        let split = |len: usize| match k {
            0 => (len == 0).then_some(0),
            k => len.is_multiple_of(k).then_some(len / k),
        };
        self.obs_size = split(self.observations.len())
            .ok_or_else(|| bad("its observations do not fit its recorded envs"))?;
        self.act_size = split(self.actions.len())
            .ok_or_else(|| bad("its actions do not fit its recorded envs"))?;
        Ok(())
    }

    /// The observation and action rows of recorded env `env`, if it was recorded.
    pub fn rows_of(&self, env: u32) -> Option<(&[f32], &[f32])> {
        let i = self.envs.binary_search(&env).ok()?;
        let (o, a) = (self.obs_size, self.act_size);
        Some((
            self.observations.get(i * o..(i + 1) * o)?,
            self.actions.get(i * a..(i + 1) * a)?,
        ))
    }

    /// Observations then actions of recorded env `env`, if it was recorded with these
    /// sizes (the recording's geometry).
    pub fn row(&self, env: u32, obs_size: usize, act_size: usize) -> Option<Vec<f32>> {
        let i = self.envs.binary_search(&env).ok()?;
        let obs = self.observations.get(i * obs_size..(i + 1) * obs_size)?;
        let act = self.actions.get(i * act_size..(i + 1) * act_size)?;
        Some(obs.iter().chain(act).copied().collect())
    }
}

fn fill<T>(buf: &mut Vec<T>, values: Option<impl Iterator<Item = T>>) {
    buf.clear();
    if let Some(v) = values {
        buf.extend(v);
    }
}

#[cfg(test)]
#[allow(
    clippy::unwrap_used,
    reason = "tests: a step that fails fails the test"
)]
mod tests {
    use super::*;

    fn frame(rewards: usize, flags: usize, truncateds: Option<usize>, envs: &[u32]) -> Vec<u8> {
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let args = fb::FrameArgs {
            frame_seq: 7,
            frame_time_ns: 70,
            action_seq: 6,
            action_time_ns: 65,
            sampled_ns: 71,
            rewards: Some(b.create_vector(&vec![0.5f32; rewards])),
            dones: Some(b.create_vector(&vec![1u8; flags])),
            truncateds: truncateds.map(|n| b.create_vector(&vec![0u8; n])),
            resets: Some(b.create_vector(&vec![0u8; flags])),
            envs: Some(b.create_vector(envs)),
            observations: Some(b.create_vector(&vec![1f32; envs.len() * 3])),
            actions: Some(b.create_vector(&vec![2f32; envs.len() * 2])),
        };
        let f = fb::Frame::create(&mut b, &args);
        b.finish(f, None);
        b.finished_data().to_vec()
    }

    #[test]
    fn a_frame_decodes_with_its_row_sizes_and_reused_buffers() {
        let mut f = RecFrame::default();
        f.decode_into(5, &frame(4, 4, Some(4), &[1, 3])).unwrap();
        assert_eq!((f.log_ns, f.frame_seq, f.sampled_ns), (5, 7, 71));
        assert_eq!((f.obs_size, f.act_size), (3, 2));
        assert_eq!(f.rows_of(3), Some((&[1f32; 3][..], &[2f32; 2][..])));
        assert_eq!(f.rows_of(2), None);
        assert_eq!(f.row(1, 3, 2), Some(vec![1., 1., 1., 2., 2.]));
        // The next frame has no truncateds: none are left from the last.
        f.decode_into(6, &frame(4, 4, None, &[])).unwrap();
        assert_eq!(f.truncateds, None);
        assert_eq!((f.obs_size, f.rows_of(1)), (0, None));
        assert_eq!(RecFrame::decode(6, &frame(4, 4, None, &[])), Some(f));
    }

    #[test]
    fn a_frame_of_another_shape_is_an_error_and_not_a_frame() {
        let cases = [
            (frame(4, 3, None, &[]), "differ in length"),
            (frame(4, 4, Some(2), &[]), "differ in length"),
            (frame(4, 4, None, &[2, 1]), "not ascending"),
            (frame(4, 4, None, &[4]), "not ascending"),
        ];
        for (bytes, why) in cases {
            let e = RecFrame::default().decode_into(0, &bytes).unwrap_err();
            assert!(e.to_string().starts_with("frame 7: "), "{e}");
            assert!(e.to_string().contains(why), "{e}");
            assert_eq!(RecFrame::decode(0, &bytes), None);
        }
        let e = RecFrame::default()
            .decode_into(0, b"not a frame")
            .unwrap_err();
        assert!(matches!(e, FrameError::Decode(_)), "{e}");
    }

    #[test]
    fn an_encoded_frame_decodes_to_the_same_values() {
        let f = FrameRef {
            frame_seq: 9,
            frame_time_ns: 90,
            action_seq: 8,
            action_time_ns: 85,
            sampled_ns: 91,
            rewards: &[0.5, 1.5, 2.5],
            dones: &[0, 1, 0],
            truncateds: None,
            resets: &[1, 0, 0],
            envs: &[0, 2],
            observations: &[1., 2., 3., 4.],
            actions: &[5., 6.],
        };
        let mut b = flatbuffers::FlatBufferBuilder::new();
        let back = RecFrame::decode(3, f.encode(&mut b)).unwrap();
        assert_eq!(
            (back.log_ns, back.frame_seq, back.frame_time_ns),
            (3, 9, 90)
        );
        assert_eq!(
            (back.action_seq, back.action_time_ns, back.sampled_ns),
            (8, 85, 91)
        );
        assert_eq!(
            (back.rewards.as_slice(), back.truncateds.as_deref()),
            (f.rewards, None)
        );
        assert_eq!(
            (back.dones.as_slice(), back.resets.as_slice()),
            (f.dones, f.resets)
        );
        assert_eq!((back.obs_size, back.act_size), (2, 1));
        assert_eq!(back.rows_of(2), Some((&[3f32, 4.][..], &[6f32][..])));
    }
}
