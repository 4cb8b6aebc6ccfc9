//! `events`: the detector's events of a live run as they are found, or of a recording.
//! One line per event (`--json`: one object), printed when it ends, or once more than
//! one look later while it goes on and again when it ends; the totals on stderr at the
//! end. `--fail-on` ends with exit code 3 once an event of those kinds is found.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;
use std::time::{Duration, Instant};

use super::looking::look_until_done;
use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::clock::monotonic_now_ns;
use lrbc::layout::LayoutChoice;
use lrbc::sync::lock;
use lrbc_live::detect::{DetectSettings, Event, EventKind, EventTotals};
use lrbc_live::text::thousands;
use lrbc_live::traffic::{RingSelection, Traffic};

/// The exit code when an event of a `--fail-on` kind was found.
pub const FOUND_EXIT_CODE: i32 = 3;
/// An event still going on this long after it was read is printed as going on (its end
/// is printed when it comes); one that ends sooner is printed once, ended.
const ONGOING_AFTER: Duration = Duration::from_millis(100);

#[derive(Debug, Clone)]
pub struct EventsOptions {
    pub json: bool,
    pub fail_on: Vec<EventKind>,
    /// Stop a live run after this long.
    pub secs: Option<Duration>,
    /// Stop a live run after this many events.
    pub count: Option<u64>,
    pub detect: DetectSettings,
    pub busy_budget: Option<f32>,
    /// A recording's events found again from its frames, even when it holds them.
    pub find_again: bool,
}

/// The options of `events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    /// A recording to list the events of, instead of a live run.
    #[arg(value_name = "FILE.mcap", conflicts_with_all = ["shm", "pid", "path"])]
    pub file: Option<std::path::PathBuf>,
    #[command(flatten)]
    pub target: super::TargetArgs,
    /// One JSON object per line.
    #[arg(long)]
    pub json: bool,
    /// Exit with code 3 once an event of one of these kinds is found (nonfinite,
    /// out_of_range, saturated, done_burst, stall, pause, state, rpc_error, unanswered,
    /// malformed, ring_loss; comma-separated).
    #[arg(long, value_name = "KIND[,KIND…]", value_parser = parse_kind_list)]
    pub fail_on: Option<KindList>,
    /// Stop a live run after this many seconds (units ms, s, min, h allowed).
    #[arg(long, value_name = "SECS", allow_negative_numbers = true, value_parser = super::args::positive_seconds)]
    pub secs: Option<Duration>,
    /// Stop a live run after this many events (at least 1).
    #[arg(long, value_name = "N", value_parser = super::args::parse_count)]
    pub count: Option<u64>,
    /// While the machine has no spare CPU, the observations and actions are checked
    /// within this percent of one core (the rewards and flags of every frame whatever the
    /// load); 0 checks every frame whole, whatever it costs the run.
    #[arg(long, value_name = "PCT", default_value_t = lrbc_live::busy::DEFAULT_BUSY_BUDGET_PERCENT, allow_negative_numbers = true, value_parser = super::args::parse_percent)]
    pub busy_budget: f32,
    /// A recording's events found again from its frames, even when it holds its
    /// recorder's (any detector option given does so too).
    #[arg(long, requires = "file", conflicts_with_all = ["shm", "pid", "path"])]
    pub find_again: bool,
    #[command(flatten)]
    pub detect: super::detection::DetectArgs,
}

/// Kinds of event, as `--fail-on` names them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindList(pub Vec<EventKind>);

fn parse_kind_list(text: &str) -> Result<KindList, String> {
    parse_kinds(text).map(KindList)
}

/// Runs `events` as its arguments say.
pub fn run_args(a: &EventsArgs) -> Result<(), CliError> {
    let o = EventsOptions {
        json: a.json,
        fail_on: a.fail_on.clone().map(|k| k.0).unwrap_or_default(),
        secs: a.secs,
        count: a.count,
        detect: a.detect.settings()?,
        busy_budget: (a.busy_budget > 0.0).then_some(a.busy_budget),
        find_again: a.find_again,
    };
    match &a.file {
        Some(path) => run_file(path, &o),
        None => run_live(&a.target.require()?, a.target.layout, &o),
    }
}

/// `nonfinite,stall` as kinds.
pub fn parse_kinds(text: &str) -> Result<Vec<EventKind>, String> {
    text.split(',')
        .map(str::trim)
        .filter(|k| !k.is_empty())
        .map(|k| {
            EventKind::parse(k).ok_or_else(|| {
                let all: Vec<&str> = EventKind::ALL.iter().map(|k| k.as_str()).collect();
                format!("{k:?} is not a kind of event: {}", all.join(", "))
            })
        })
        .collect::<Result<Vec<_>, _>>()
        .and_then(|v| {
            if v.is_empty() {
                Err("name at least one kind of event".into())
            } else {
                Ok(v)
            }
        })
}

/// What was printed of an event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Printed {
    /// As going on (its end is printed too).
    Ongoing,
    /// Its last form.
    Final,
}

/// Prints the forms of events as they come: an event that ends soon in one line; one
/// that goes on once when it is still on [`ONGOING_AFTER`] after it was read, and again
/// when it ends.
#[derive(Debug)]
pub(super) struct Printer {
    json: bool,
    t0_ns: u64,
    printed: HashMap<u64, Printed>,
    /// Found and going on, not printed yet: their newest form, and when it was read.
    pending: Vec<(Event, Instant)>,
    events: u64,
    fail_on: Vec<EventKind>,
    failed: BTreeSet<&'static str>,
}

impl Printer {
    pub(super) fn new(json: bool, t0_ns: u64, fail_on: Vec<EventKind>) -> Self {
        Self {
            json,
            t0_ns,
            printed: HashMap::new(),
            pending: Vec::new(),
            events: 0,
            fail_on,
            failed: BTreeSet::new(),
        }
    }

    pub(super) fn print(&mut self, e: &Event) {
        if !self.printed.contains_key(&e.id) {
            self.events += 1;
            if self.fail_on.contains(&e.kind) {
                self.failed.insert(e.kind.as_str());
            }
        }
        self.printed.insert(
            e.id,
            if e.ongoing {
                Printed::Ongoing
            } else {
                Printed::Final
            },
        );
        if self.json {
            println!("{}", e.to_json());
        } else {
            let t = e.time_ns.saturating_sub(self.t0_ns) as f64 / 1e9;
            let on = if e.ongoing { " (going on)" } else { "" };
            println!(
                "{t:>9.3} s  frame {:<9} {:<12} {}{on}",
                e.first_frame,
                e.kind.as_str(),
                e.message
            );
        }
    }

    /// The forms read at one look, at `now`.
    pub(super) fn take(&mut self, forms: Vec<Event>, now: Instant) {
        for e in forms {
            let printed = self.printed.get(&e.id).copied();
            if !e.ongoing {
                self.pending.retain(|(p, _)| p.id != e.id);
                if printed != Some(Printed::Final) {
                    self.print(&e);
                }
            } else if printed.is_none() {
                match self.pending.iter_mut().find(|(p, _)| p.id == e.id) {
                    Some(slot) => slot.0 = e,
                    None => self.pending.push((e, now)),
                }
            }
        }
        let aged = |read: &Instant| now.saturating_duration_since(*read) >= ONGOING_AFTER;
        let due: Vec<Event> = self
            .pending
            .iter()
            .filter(|(_, read)| aged(read))
            .map(|(e, _)| e.clone())
            .collect();
        self.pending.retain(|(_, read)| !aged(read));
        for e in due {
            self.print(&e);
        }
    }

    /// The end: what goes on is printed as going on.
    fn finish(&mut self) {
        for (e, _) in std::mem::take(&mut self.pending) {
            self.print(&e);
        }
    }

    fn outcome(&self) -> Result<(), CliError> {
        if self.failed.is_empty() {
            return Ok(());
        }
        let kinds: Vec<&str> = self.failed.iter().copied().collect();
        Err(CliError::Found(format!(
            "found {} (--fail-on)",
            kinds.join(", ")
        )))
    }
}

/// The totals, one line (`events` puts it on stderr).
pub(super) fn summary(t: &EventTotals, found_again: bool) -> String {
    let kinds: Vec<String> = EventKind::ALL
        .iter()
        .filter(|&&k| t.of(k) > 0)
        .map(|&k| format!("{} {}", k.as_str(), t.of(k)))
        .collect();
    let mut line = format!("events: {}", thousands(t.events()));
    if !kinds.is_empty() {
        line.push_str(&format!(" ({})", kinds.join(", ")));
    }
    if t.frames_seen > 0 || t.frames_checked > 0 {
        line.push_str(&format!("; {}", t.checked_text()));
        if t.frames_flags_checked > t.frames_checked {
            line.push_str(&format!(
                " (rewards and flags of {})",
                thousands(t.frames_flags_checked)
            ));
        }
    }
    if found_again {
        line.push_str("; found again from the recorded frames");
    }
    line
}

/// Follows a live run and prints its events as they are found.
pub fn run_live(target: &Target, choice: LayoutChoice, o: &EventsOptions) -> Result<(), CliError> {
    let stop = stop_flag();
    let mut attached = attach(target, choice)?;
    for w in &attached.geometry.warnings {
        eprintln!("warning: {w}");
    }
    let sampler = super::watch::headless_sampler(
        target,
        choice,
        o.busy_budget,
        Some(o.detect.clone()),
        None,
    )?;
    let (Some(log), Some(diagnosis)) = (sampler.events().cloned(), sampler.diagnosis()) else {
        return Err(CliError::Other("the detector did not start".into()));
    };
    let feed = diagnosis.feed();
    let mut traffic = Traffic::new(&attached, RingSelection::All);
    let mut generation = 0;
    let t0 = monotonic_now_ns();
    let mut printer = Printer::new(o.json, t0, o.fail_on.clone());
    eprintln!(
        "following {}: every frame's values checked as it comes (Ctrl-C to stop)",
        attached.label()
    );
    let mut cursor = lock(&log).cursor_now();
    let mut forms = Vec::new();
    let mut traffic_events = Vec::new();
    look_until_done(&sampler, &stop, o.secs, "the detector's", |look| {
        if look.generation != generation {
            // The segment was replaced: its rings are read from the new mapping.
            generation = look.generation;
            if let Ok(a) = attach(target, choice) {
                traffic = Traffic::new(&a, RingSelection::All);
                attached = a;
            }
        }
        let now = monotonic_now_ns();
        traffic_events.clear();
        traffic.poll(&attached.segment, now, 4096, &mut traffic_events);
        for e in &traffic_events {
            feed.traffic(e, now);
        }
        forms.clear();
        let (next, missed) = lock(&log).updates_since(cursor, &mut forms);
        cursor = next;
        if missed > 0 {
            eprintln!("warning: {missed} forms of events came faster than they were printed");
        }
        printer.take(std::mem::take(&mut forms), Instant::now());
        o.count.is_some_and(|c| printer.events >= c) || !printer.failed.is_empty()
    })?;
    printer.finish();
    let (totals, rhythm) = {
        let log = lock(&log);
        (log.totals(), log.rhythm().cloned())
    };
    eprintln!("{}", summary(&totals, false));
    if let Some(r) = rhythm {
        eprintln!("{}", r.line());
    }
    printer.outcome()
}

/// Prints the events of a recording: those its recorder wrote, else found again.
pub fn run_file(path: &Path, o: &EventsOptions) -> Result<(), CliError> {
    let mut rec = lrbc_recording::replay::Recording::open(path)?;
    if let Some(note) = rec.unfinished_note() {
        eprintln!("warning: {} {note}", path.display());
    }
    let t0 = rec.time_range().map_or(0, |r| r.0);
    // Options of the detector apply to a recording's frames: its recorder's events were
    // found with the defaults.
    let find_again = o.find_again || o.detect != DetectSettings::default();
    let found = if find_again {
        lrbc_recording::replay::find_again(&mut rec, &o.detect, |_| true)
    } else {
        lrbc_recording::replay::recording_events(&mut rec, &o.detect, |_| true)
    }
    .map_err(|e| CliError::Other(format!("{}: {e}", path.display())))?;
    let mut printer = Printer::new(o.json, t0, o.fail_on.clone());
    let (totals, again) = (found.totals, found.found_again);
    for e in found.events {
        printer.print(&e);
    }
    eprintln!("{}", summary(&totals, again));
    match &found.rhythm {
        Some(r) => eprintln!("{}", r.line()),
        None => eprintln!(
            "rhythm: not recorded (a file of an earlier version): --find-again learns it from the frames"
        ),
    }
    printer.outcome()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(id: u64, ongoing: bool) -> Event {
        Event {
            ongoing,
            env: Some(0),
            ..Event::new(id, EventKind::Nonfinite, 10 * id, 0)
        }
    }

    #[test]
    fn an_event_that_ends_soon_is_one_line_and_one_that_goes_on_is_two() {
        let mut p = Printer::new(true, 0, vec![EventKind::Nonfinite]);
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        // Event 1 found and ended in one look; events 2 and 3 found, going on.
        p.take(
            vec![
                event(1, true),
                event(1, false),
                event(2, true),
                event(3, true),
            ],
            at(0),
        );
        assert_eq!(p.printed.get(&1), Some(&Printed::Final));
        assert_eq!(p.printed.get(&2), None, "waits to see whether it ends soon");
        // Event 3 ends within the wait: one line.
        p.take(vec![event(3, false)], at(50));
        assert_eq!(p.printed.get(&3), Some(&Printed::Final));
        // Event 2 still on after the wait: printed as going on; its later forms print
        // nothing until it ends.
        p.take(vec![event(2, true)], at(100));
        assert_eq!(p.printed.get(&2), Some(&Printed::Ongoing));
        p.take(vec![event(2, true)], at(150));
        p.take(vec![event(2, false)], at(200));
        assert_eq!(p.printed.get(&2), Some(&Printed::Final));
        assert_eq!(p.events, 3, "three events, each counted once");
        assert!(matches!(p.outcome(), Err(CliError::Found(_))));
    }

    #[test]
    fn kinds_are_named_as_the_json_names_them() {
        assert_eq!(
            parse_kinds("nonfinite, stall").unwrap(),
            vec![EventKind::Nonfinite, EventKind::Stall]
        );
        assert!(parse_kinds("nan").unwrap_err().contains("not a kind"));
        assert!(parse_kinds(",").is_err());
    }
}
