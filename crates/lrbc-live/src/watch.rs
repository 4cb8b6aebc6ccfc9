//! The attachment's state over time, kept by an [`AttachmentWatch`]: attached, stale,
//! engine gone, replaced, truncated or unlinked, with counter rates and lag. Re-attaches
//! by itself when the segment is replaced. The clock is injected.

use lrbc::attach::Attached;
use lrbc::clock::{Clock, secs_between};
use lrbc::layout;
use lrbc::procinfo::Processes;
use lrbc::segment::{Health, Location};

/// No new frame for this long means stale.
pub const STALE_AFTER_NS: u64 = 2_000_000_000;

/// The state of the attachment, as shown everywhere in the tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    Attached,
    /// No new frame for [`STALE_AFTER_NS`].
    Stale,
    /// The engine process (server_pid) is dead.
    EngineGone,
    /// A new segment took the name; the watch re-attached to it (or waits for it to
    /// become valid).
    Replaced,
    /// The file shrank under the mapping.
    Truncated,
    /// The name is gone and nothing replaced it.
    Unlinked,
}

impl State {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Attached => "attached",
            Self::Stale => "stale",
            Self::EngineGone => "engine_gone",
            Self::Replaced => "replaced",
            Self::Truncated => "truncated",
            Self::Unlinked => "unlinked",
        }
    }

    /// The state [`Self::as_str`] names.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::Attached,
            Self::Stale,
            Self::EngineGone,
            Self::Replaced,
            Self::Truncated,
            Self::Unlinked,
        ]
        .into_iter()
        .find(|x| x.as_str() == s)
    }
}

/// One observation of the segment (read back from `watch --json` lines).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Report {
    /// Seconds since the watch started.
    pub t_secs: f64,
    pub state: State,
    pub frame_seq: u64,
    pub action_seq: u64,
    /// Frames per second since the previous report; `None` right after (re)attaching.
    pub frame_hz: Option<f64>,
    pub action_hz: Option<f64>,
    /// `action_seq - frame_seq`.
    pub lag: i64,
    pub server_pid: u32,
    pub server_alive: bool,
    /// What happened, when something did (e.g. "re-attached to …").
    pub note: Option<String>,
}

#[derive(Clone, Copy, Debug)]
struct Sample {
    t_ns: u64,
    frame_seq: u64,
    action_seq: u64,
}

/// The attachment's state: watches one target across replacements.
#[derive(Debug)]
pub struct AttachmentWatch<C: Clock> {
    attached: Attached,
    clock: C,
    processes: Processes,
    start_ns: u64,
    previous: Option<Sample>,
    last_frame_change_ns: u64,
    /// Re-attachments so far.
    pub reattach_count: u32,
    /// The server pid last read (a released view reads nothing).
    last_server_pid: u32,
    /// This process's views of a named mapping were released after its engine died.
    released: bool,
}

impl<C: Clock> AttachmentWatch<C> {
    pub fn new(attached: Attached, clock: C) -> Self {
        let now = clock.now_ns();
        let mut w = Self {
            attached,
            clock,
            processes: Processes::new(),
            start_ns: now,
            previous: None,
            last_frame_change_ns: now,
            reattach_count: 0,
            last_server_pid: 0,
            released: false,
        };
        w.previous = Some(w.sample(now));
        w
    }

    pub fn attached(&self) -> &Attached {
        &self.attached
    }

    fn sample(&self, t_ns: u64) -> Sample {
        let c = self.attached.geometry.counters;
        let seg = &self.attached.segment;
        Sample {
            t_ns,
            frame_seq: seg.load_u64(c.frame_seq).unwrap_or(0),
            action_seq: seg.load_u64(c.action_seq).unwrap_or(0),
        }
    }

    /// Tries to map the name again; on success the watch moves to the new segment.
    fn try_reattach(&mut self, now: u64) -> Result<String, lrbc::attach::AttachError> {
        let new = self.attached.reopen()?;
        Ok(self.accept(new, now))
    }

    /// The segment under the name now, if a live engine serves it (else it is closed
    /// again at once).
    fn live_replacement(&mut self) -> Option<Attached> {
        let new = self.attached.reopen().ok()?;
        let pid = new.segment.load_u32(new.geometry.counters.server_pid)?;
        (pid != 0 && alive(&mut self.processes, pid)).then_some(new)
    }

    /// Watches `new` from now on; returns the note that says so.
    fn accept(&mut self, new: Attached, now: u64) -> String {
        let note = format!(
            "re-attached to the new segment ({}, {} bytes, {} envs, server pid {})",
            new.geometry.layout,
            new.geometry.size_bytes,
            new.geometry.num_envs,
            new.geometry.server_pid()
        );
        self.attached = new;
        self.reattach_count += 1;
        self.released = false;
        self.previous = Some(self.sample(now));
        self.last_frame_change_ns = now;
        note
    }

    /// A named mapping (Windows) lives while any process has a view of it, so once its
    /// engine is dead this process closes every view it has: the name then dies with
    /// the engine, and a restarted engine can create it again. True when it did now.
    fn release_if_engine_died(&mut self) -> bool {
        let Location::Named(name) = self.attached.segment.location() else {
            return false;
        };
        if self.released {
            return false;
        }
        let c = self.attached.geometry.counters;
        let pid = self.attached.segment.load_u32(c.server_pid).unwrap_or(0);
        if pid == 0 || alive(&mut self.processes, pid) {
            return false;
        }
        lrbc::segment::release_named(&name.clone());
        self.released = true;
        true
    }

    /// Looks at the segment now.
    pub fn tick(&mut self) -> Report {
        let now = self.clock.now_ns();
        let just_released = self.release_if_engine_died();
        let health = self.attached.segment.health();
        let mut rates_valid = true;
        let (segment_state, note) = match health {
            Health::Intact => match layout::inspect(&self.attached.segment, self.attached.choice) {
                Ok(g) if g.same_shape(&self.attached.geometry) => (None, None),
                _ => match self.try_reattach(now) {
                    Ok(note) => {
                        rates_valid = false;
                        (Some(State::Replaced), Some(note))
                    }
                    Err(e) => (
                        Some(State::Replaced),
                        Some(format!(
                            "segment was re-initialised in place; waiting for it to become valid: {e}"
                        )),
                    ),
                },
            },
            Health::Truncated { size_bytes } => match self.try_reattach(now) {
                Ok(note) => {
                    rates_valid = false;
                    (Some(State::Replaced), Some(note))
                }
                Err(_) => (
                    Some(State::Truncated),
                    Some(format!(
                        "segment shrank from {} to {size_bytes} bytes; reads past the end see zeros",
                        self.attached.segment.len()
                    )),
                ),
            },
            // After a release, a mapping of that name may still be the dead engine's
            // (another process, e.g. the trainer, keeps it alive): move to it only once
            // a live engine serves it.
            Health::Replaced if self.released => match self.live_replacement() {
                Some(new) => {
                    rates_valid = false;
                    (Some(State::Replaced), Some(self.accept(new, now)))
                }
                None => (Some(State::EngineGone), None),
            },
            Health::Grown { .. } | Health::Replaced => match self.try_reattach(now) {
                Ok(note) => {
                    rates_valid = false;
                    (Some(State::Replaced), Some(note))
                }
                Err(e) => (
                    Some(State::Replaced),
                    Some(format!("waiting for the new segment to become valid: {e}")),
                ),
            },
            Health::Unlinked if self.released => (
                Some(State::EngineGone),
                just_released.then(|| {
                    "the engine is gone: this process closed its views of the mapping, so \
                     that a restarted engine can create the name again; showing the last \
                     contents"
                        .to_string()
                }),
            ),
            Health::Unlinked => (
                Some(State::Unlinked),
                Some("segment was unlinked; showing its last contents".to_string()),
            ),
        };

        // A released view reads nothing: keep the last counters, and no rates.
        let s = match self.previous {
            Some(p) if self.released => {
                rates_valid = false;
                Sample { t_ns: now, ..p }
            }
            _ => self.sample(now),
        };
        let (frame_hz, action_hz) = match self.previous {
            Some(p) if rates_valid && s.t_ns > p.t_ns => {
                let secs = secs_between(p.t_ns, s.t_ns);
                (
                    Some(s.frame_seq.wrapping_sub(p.frame_seq) as f64 / secs),
                    Some(s.action_seq.wrapping_sub(p.action_seq) as f64 / secs),
                )
            }
            _ => (None, None),
        };
        if self.previous.is_some_and(|p| p.frame_seq != s.frame_seq) {
            self.last_frame_change_ns = now;
        }
        self.previous = Some(s);

        let c = self.attached.geometry.counters;
        let server_pid = self
            .attached
            .segment
            .load_u32(c.server_pid)
            .unwrap_or(self.last_server_pid);
        self.last_server_pid = server_pid;
        let server_alive = server_pid != 0 && alive(&mut self.processes, server_pid);
        let state = segment_state.unwrap_or(if server_pid != 0 && !server_alive {
            State::EngineGone
        } else if now.saturating_sub(self.last_frame_change_ns) >= STALE_AFTER_NS {
            State::Stale
        } else {
            State::Attached
        });
        Report {
            t_secs: secs_between(self.start_ns, now),
            state,
            frame_seq: s.frame_seq,
            action_seq: s.action_seq,
            frame_hz,
            action_hz,
            lag: (i128::from(s.action_seq) - i128::from(s.frame_seq))
                .clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64,
            server_pid,
            server_alive,
            note,
        }
    }
}

/// Whether `pid` runs: from `/proc` where there is one (four times a second in two
/// threads of the window, a process table's refresh is a cost the run pays), else from
/// the process table.
fn alive(processes: &mut Processes, pid: u32) -> bool {
    process_running(pid).unwrap_or_else(|| processes.is_alive(pid))
}

/// Whether process `pid` runs (exists, and is not a zombie), from the state in
/// `/proc/<pid>/stat`: one small read, where a process table's refresh reads several
/// files. None without `/proc` (macOS, Windows).
fn process_running(pid: u32) -> Option<bool> {
    if !cfg!(any(target_os = "linux", target_os = "android")) {
        return None;
    }
    let stat = match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(s) => s,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    // "pid (comm) S ...": the name may hold spaces and parentheses; the state follows
    // the last ')'.
    let state = stat.rsplit_once(')')?.1.trim_start().chars().next()?;
    Some(!matches!(state, 'Z' | 'X' | 'x'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::clock::ManualClock;
    use lrbc::layout::LrbcHeader;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::{TestSegment, spec};
    use zerocopy::{FromBytes, IntoBytes};

    #[test]
    fn rates_come_from_the_counters_over_the_clock() {
        let seg = TestSegment::create("rates", &spec(PlanLayout::Lrbc { ext: true }, 4));
        let clock = ManualClock::new(1_000);
        let mut w = AttachmentWatch::new(seg.attach(), clock.clone());
        seg.rw.store_u64(LrbcHeader::ACTION_SEQ_OFFSET, 250);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, 200);
        clock.advance_secs(0.5);
        let r = w.tick();
        assert_eq!(r.state, State::Attached);
        assert_eq!(r.frame_hz, Some(400.0));
        assert_eq!(r.action_hz, Some(500.0));
        assert_eq!(r.lag, 50);
        assert!(r.server_alive);
    }

    #[test]
    fn no_new_frame_for_two_seconds_is_stale() {
        let seg = TestSegment::create("stale", &spec(PlanLayout::Lrbc { ext: false }, 2));
        let clock = ManualClock::new(0);
        let mut w = AttachmentWatch::new(seg.attach(), clock.clone());
        clock.advance_secs(1.9);
        assert_eq!(w.tick().state, State::Attached);
        clock.advance_secs(0.2);
        assert_eq!(w.tick().state, State::Stale);
        seg.rw.store_u64(LrbcHeader::FRAME_SEQ_OFFSET, 1);
        clock.advance_secs(0.1);
        assert_eq!(w.tick().state, State::Attached, "a new frame clears stale");
    }

    #[test]
    fn a_header_rewritten_in_place_with_a_new_geometry_is_a_replacement() {
        let seg = TestSegment::create("inplace", &spec(PlanLayout::Lrbc { ext: true }, 4));
        let clock = ManualClock::new(0);
        let mut w = AttachmentWatch::new(seg.attach(), clock.clone());
        // Same file, same size, fewer envs: the engine re-initialised it.
        let (mut header, _) = LrbcHeader::read_from_prefix(&seg.plan.header).unwrap();
        header.num_envs = 3.into();
        assert!(seg.rw.write_at(0, header.as_bytes()));
        clock.advance_secs(0.1);
        let r = w.tick();
        assert_eq!(r.state, State::Replaced);
        assert!(r.note.unwrap().contains("3 envs"));
        assert_eq!(w.attached().geometry.num_envs, 3);
        assert_eq!(w.reattach_count, 1);
        clock.advance_secs(0.1);
        assert_eq!(w.tick().state, State::Attached);
    }

    #[test]
    fn a_dead_server_pid_is_engine_gone() {
        let mut s = spec(PlanLayout::Lucky, 2);
        s.server_pid = lrbc::testutil::dead_pid();
        let seg = TestSegment::create("gone", &s);
        let mut w = AttachmentWatch::new(seg.attach(), ManualClock::new(0));
        let r = w.tick();
        assert_eq!(r.state, State::EngineGone);
        assert!(!r.server_alive);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_process_that_exited_is_not_running_before_or_after_it_is_reaped() {
        assert_eq!(process_running(std::process::id()), Some(true));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        // Exited and not yet reaped: a zombie, not a running process.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
        while process_running(pid) != Some(false) {
            assert!(
                std::time::Instant::now() < deadline,
                "the child still runs after 20 s"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        assert!(
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok(),
            "the zombie is still in /proc"
        );
        child.wait().unwrap();
        assert_eq!(process_running(pid), Some(false), "reaped: gone from /proc");
    }
}
