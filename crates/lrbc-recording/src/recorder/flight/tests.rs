use std::time::Duration;

use crossbeam_channel::Receiver;

use super::*;
use lrbc::attach::{Target, attach};
use lrbc::layout::LayoutChoice;
use lrbc_sim::engine::{Engine, EngineConfig};

const DEADLINE: Duration = Duration::from_secs(30);

fn next_note(rx: &Receiver<Note>) -> Note {
    rx.recv_timeout(DEADLINE)
        .expect("a note within the deadline")
}

/// A disk that fills up: the first 256 KiB are written (the schemas and metadata
/// take about 70), then every write fails.
#[derive(Default)]
struct FillsUp {
    pos: u64,
    len: u64,
}

impl std::io::Write for FillsUp {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        if self.pos + buf.len() as u64 > 256 << 10 {
            return Err(std::io::Error::other("the disk is full"));
        }
        self.pos += buf.len() as u64;
        self.len = self.len.max(self.pos);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl std::io::Seek for FillsUp {
    fn seek(&mut self, to: std::io::SeekFrom) -> std::io::Result<u64> {
        self.pos = match to {
            std::io::SeekFrom::Start(p) => p,
            std::io::SeekFrom::End(d) => self.len.saturating_add_signed(d),
            std::io::SeekFrom::Current(d) => self.pos.saturating_add_signed(d),
        };
        Ok(self.pos)
    }
}

#[test]
fn a_full_disk_stops_the_recording_with_one_line_and_the_rolling_buffer_goes_on() {
    let mut e = Engine::create(EngineConfig::small(
        lrbc::testutil::unique_name("flight"),
        lrbc::layout::plan::PlanLayout::Lrbc { ext: true },
        4,
        64,
        2,
    ))
    .unwrap();
    let a = attach(&Target::Shm(e.name().to_string()), LayoutChoice::Auto).unwrap();
    let (tx, rx) = crossbeam_channel::bounded(16);
    let dir = std::env::temp_dir().join(lrbc::testutil::unique_name("flight-full"));
    let flight = Flight::start(
        &a,
        vec![0, 1, 2, 3],
        RollingLimits {
            seconds: 60.0,
            max_bytes: 64 << 20,
        },
        FlightConfig {
            save_on_event: None,
            notes: tx,
            waker: Arc::new(|| {}),
            create: |_| Ok(Box::new(FillsUp::default())),
        },
    )
    .unwrap();
    flight.start_recording(&dir).unwrap();
    let mut step = 0;
    let mut step_once = |e: &mut Engine| {
        step += 1;
        e.step_once(Some(step));
    };
    // The file opens; writing frames fails before long.
    let opened = next_note(&rx);
    assert!(opened.text.starts_with("recording into "), "{opened:?}");
    let deadline = std::time::Instant::now() + DEADLINE;
    let stopped = loop {
        step_once(&mut e);
        if let Ok(n) = rx.try_recv() {
            break n;
        }
        assert!(std::time::Instant::now() < deadline, "no error note");
        std::thread::sleep(Duration::from_millis(2));
    };
    assert!(stopped.error, "{stopped:?}");
    assert!(
        stopped.text.starts_with("recording stopped: writing ")
            && stopped.text.ends_with(".mcap: the disk is full"),
        "{}",
        stopped.text
    );
    assert!(!stopped.text.contains('\n'));
    // The flight recorder goes on: new frames reach its buffer, a save says why it
    // could not be written.
    let before = flight.status().rolling_frames;
    let deadline = std::time::Instant::now() + DEADLINE;
    while flight.status().rolling_frames <= before {
        assert!(std::time::Instant::now() < deadline, "the buffer stopped");
        step_once(&mut e);
        std::thread::sleep(Duration::from_millis(5));
    }
    assert_eq!(flight.status().recording, None);
    flight.save(&dir, "saved on request").unwrap();
    let saved = next_note(&rx);
    assert!(saved.error, "{saved:?}");
    assert!(
        saved.text.starts_with("saved on request: writing ")
            && saved.text.ends_with(": the disk is full"),
        "{}",
        saved.text
    );
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn utc_stamps_are_civil_dates() {
    let at = |s| std::time::UNIX_EPOCH + Duration::from_secs(s);
    assert_eq!(utc_stamp(at(0)), "19700101T000000Z");
    assert_eq!(utc_stamp(at(951_782_400)), "20000229T000000Z");
    assert_eq!(utc_stamp(at(1_795_000_000)), "20261118T110640Z");
}
