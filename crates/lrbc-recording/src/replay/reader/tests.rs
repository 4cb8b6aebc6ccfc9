use std::io::Cursor;

use crate::replay::tests::{recording, write};
use crate::replay::{RecFrame, Recording};

fn all_frames(r: &mut Recording) -> Vec<RecFrame> {
    let mut out = Vec::new();
    let Some((t0, t1)) = r.time_range() else {
        return out;
    };
    r.frames_between(t0, t1, |f| {
        out.push(f);
        true
    })
    .unwrap();
    out
}

#[test]
fn a_finished_recording_opens_from_its_summary_with_every_frame() {
    let (bytes, seqs) = recording(40);
    let mut r = Recording::open(&write(&bytes)).unwrap();
    assert_eq!(r.unfinished_at, None);
    assert_eq!(r.frame_count, Some(40));
    assert_eq!((r.geometry.num_envs, r.geometry.obs_size), (5, 3));
    // Its counts, typed, of this build's form.
    let counts = r.counts().unwrap().unwrap();
    assert_eq!(counts.frames_recorded, 40);
    assert_eq!(counts.version, crate::format::COUNTS_VERSION);
    let frames = all_frames(&mut r);
    assert_eq!(frames.iter().map(|f| f.frame_seq).collect::<Vec<_>>(), seqs);
    assert_eq!(frames[0].envs, [1, 3]);
    assert_eq!(frames[0].rewards.len(), 5);
    assert_eq!(frames[0].row(3, 3, 2).unwrap().len(), 5);
    assert!(frames[0].row(0, 3, 2).is_none());
    // The frame at a time is the last one at or before it.
    let tenth = frames[9].log_ns;
    assert_eq!(r.frame_at(tenth).unwrap().unwrap().frame_seq, 10);
    assert_eq!(
        r.frame_at(frames[10].log_ns - 1)
            .unwrap()
            .unwrap()
            .frame_seq,
        10
    );
    assert!(r.frame_at(frames[0].log_ns - 1).unwrap().is_none());
}

#[test]
fn a_recording_cut_short_is_read_up_to_its_last_complete_chunk() {
    let (bytes, _) = recording(40);
    let whole = Recording::open(&write(&bytes)).unwrap();
    let chunks = whole.chunks.clone();
    assert!(!chunks.is_empty());
    // Cut in the middle of the last chunk: the earlier chunks are read.
    let last = chunks.last().unwrap();
    let cut = (last.offset + last.length / 2) as usize;
    let mut r = Recording::open(&write(&bytes[..cut])).unwrap();
    let note = r.unfinished_note().unwrap();
    assert!(note.starts_with("not finished"), "{note}");
    assert_eq!(r.chunks.len(), chunks.len() - 1);
    let frames = all_frames(&mut r);
    if let Some(f) = frames.last() {
        assert!(f.frame_seq < 40);
    }
    // Cut right after the last chunk: everything is there.
    let end = (last.offset + last.length) as usize;
    let mut r = Recording::open(&write(&bytes[..end])).unwrap();
    assert!(r.unfinished_at.is_some());
    assert_eq!(all_frames(&mut r).len(), 40);
    // Its message indexes were cut off: the count is not known.
    assert_eq!(r.frame_count, None);
}

#[test]
fn files_that_are_not_recordings_are_one_line_errors() {
    let p = write(b"hello, this is not mcap at all");
    let e = Recording::open(&p).unwrap_err().to_string();
    assert!(e.ends_with("not an MCAP file"), "{e}");
    // A valid MCAP file without the frame channel.
    let mut w = mcap::Writer::new(Cursor::new(Vec::new())).unwrap();
    let s = w.add_schema("other.Thing", "json", b"{}").unwrap();
    let c = w
        .add_channel(s, "/other", "json", &Default::default())
        .unwrap();
    w.write_to_known_channel(
        &mcap::records::MessageHeader {
            channel_id: c,
            sequence: 0,
            log_time: 1,
            publish_time: 1,
        },
        b"{}",
    )
    .unwrap();
    w.finish().unwrap();
    let bytes = w.into_inner().into_inner();
    let e = Recording::open(&write(&bytes)).unwrap_err().to_string();
    assert!(e.contains("not an lrbc recording"), "{e}");
    assert!(!e.contains('\n'));
    // Only the magic.
    let e = Recording::open(&write(mcap::MAGIC))
        .unwrap_err()
        .to_string();
    assert!(e.contains("unreadable"), "{e}");
}

/// A segment truncated under `record`: the file says so on `/lrbc/state`, and the reader
/// gives it to the timeline, after the last good frame.
#[cfg(unix)]
#[test]
fn a_truncation_recorded_is_read_back_as_a_state_change() {
    use crate::recorder::Recorder;
    use lrbc::layout::LrbcHeader;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::{TestSegment, spec};
    let seg = TestSegment::create("rdtrunc", &spec(PlanLayout::Lrbc { ext: true }, 2));
    let publish = |frame: u64| {
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, frame);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, frame);
    };
    let mut rec = Recorder::new(seg.attach(), vec![0], Cursor::new(Vec::new())).unwrap();
    publish(1);
    rec.poll_until_recorded(1);
    seg.truncate_to_header_page();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let mut frame = 1;
    while rec.counts().state_changes == 0 {
        assert!(std::time::Instant::now() < deadline, "{:?}", rec.counts());
        frame += 1;
        publish(frame);
        rec.wait(std::time::Duration::from_millis(5));
        rec.poll().unwrap();
    }
    let (counts, out) = rec.finish_into_inner().unwrap();
    let bytes = out.into_inner();
    let mut r = Recording::open(&write(&bytes)).unwrap();
    // The counts read back as the recorder had them, the state change among them.
    assert_eq!(r.counts().unwrap(), Some(counts));
    assert!(counts.state_changes > 0, "{counts:?}");
    let frames = all_frames(&mut r);
    assert_eq!(frames.len(), 1, "the good frame only");
    let states = r.state_changes().unwrap();
    assert_eq!(states.len(), 1, "{states:?}");
    assert_eq!(states[0].state, "truncated");
    assert!(states[0].is_trouble());
    assert!(states[0].describe().contains("4096"), "{states:?}");
    assert!(states[0].log_ns >= frames[0].log_ns);
    // A recording with no state change has none.
    let (plain, _) = recording(3);
    assert!(
        Recording::open(&write(&plain))
            .unwrap()
            .state_changes()
            .unwrap()
            .is_empty()
    );
}
