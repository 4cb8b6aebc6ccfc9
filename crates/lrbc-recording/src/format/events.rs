//! A recording's events: on [`super::EVENTS_TOPIC`] each event as JSON (`Event::to_json`,
//! schema [`EVENT_JSON_SCHEMA`]) when it is found, again while it goes on (at most once a
//! second) and when it ends, so that a reader keeps the newest form of each id; on
//! [`super::LOG_TOPIC`] the same events as Foxglove's `foxglove.Log` messages, which its
//! Log panel shows without setup.

use lrbc_live::detect::{Event, EventKind};

/// The JSON schema of `/lrbc/events` (Foxglove plots and filters its fields).
pub const EVENT_JSON_SCHEMA: &str = r#"{
  "title": "lrbc.Event",
  "description": "A fault the inspector's detector found: a non-finite or out-of-range value, a saturated action, a done burst, a stall, a pause of unknown rhythm, a change of the segment's state, or a ring fault",
  "type": "object",
  "properties": {
    "id": {"type": "integer", "minimum": 0, "description": "The event's id; later messages of the same id replace earlier ones"},
    "kind": {"type": "string", "enum": ["nonfinite", "out_of_range", "saturated", "done_burst", "stall", "pause", "state", "rpc_error", "unanswered", "malformed", "ring_loss"]},
    "frame_seq": {"type": "integer", "minimum": 0, "description": "The frame it was first seen in"},
    "time_ns": {"type": "integer", "minimum": 0, "description": "When it began (monotonic clock)"},
    "first_frame": {"type": "integer", "minimum": 0},
    "last_frame": {"type": "integer", "minimum": 0},
    "count": {"type": "integer", "minimum": 0, "description": "Frames (or occurrences) it was seen in"},
    "end_time_ns": {"type": "integer", "minimum": 0},
    "ongoing": {"type": "boolean", "description": "Not over when written"},
    "env": {"type": "integer", "minimum": 0},
    "channel": {"type": "string", "enum": ["observation", "action", "reward"]},
    "index": {"type": "integer", "minimum": 0},
    "name": {"type": "string", "description": "The value's name in the names region"},
    "value": {"type": ["number", "string"], "description": "The first bad value; NaN, inf and -inf as strings"},
    "usual_secs": {"type": "number", "description": "A stall: the loop's usual pause where it stalled"},
    "values": {"type": "integer", "minimum": 0, "description": "Values of the channel with the fault in the first frame"},
    "origin": {"type": "string", "enum": ["policy", "simulator", "unknown"]},
    "ring": {"type": "string"},
    "method": {"type": "string"},
    "message": {"type": "string"}
  },
  "required": ["id", "kind", "frame_seq", "time_ns"]
}"#;

/// Foxglove's `foxglove.Log` JSON schema.
pub const LOG_JSON_SCHEMA: &str = r#"{
  "title": "foxglove.Log",
  "description": "A log message",
  "type": "object",
  "properties": {
    "timestamp": {
      "type": "object",
      "title": "time",
      "properties": {
        "sec": {"type": "integer", "minimum": 0},
        "nsec": {"type": "integer", "minimum": 0, "maximum": 999999999}
      },
      "description": "Timestamp of log message"
    },
    "level": {
      "title": "foxglove.LogLevel",
      "description": "Log level",
      "oneOf": [
        {"title": "UNKNOWN", "const": 0},
        {"title": "DEBUG", "const": 1},
        {"title": "INFO", "const": 2},
        {"title": "WARNING", "const": 3},
        {"title": "ERROR", "const": 4},
        {"title": "FATAL", "const": 5}
      ]
    },
    "message": {"type": "string", "description": "Log message"},
    "name": {"type": "string", "description": "Process or node name"},
    "file": {"type": "string", "description": "Filename"},
    "line": {"type": "integer", "minimum": 0, "description": "Line number in the file"}
  }
}"#;

/// An event's message on `/lrbc/events`.
pub fn event_json(e: &Event) -> String {
    e.to_json().to_string()
}

/// An event of `/lrbc/events`; None when the message is not one.
pub fn event_of(json: &[u8]) -> Option<Event> {
    let v: serde_json::Value = serde_json::from_slice(json).ok()?;
    Event::from_json(&v)
}

/// The `foxglove.Log` message of an event written at `time_ns`: when it is found, and
/// when it ends after more than one frame (None for the forms in between). Non-finite
/// values, the segment's state and malformed entries are errors, the rest warnings.
pub fn event_log_json(e: &Event, time_ns: u64, first_form: bool) -> Option<String> {
    if !first_form && (e.ongoing || e.count <= 1) {
        return None;
    }
    let level = match e.kind {
        EventKind::Nonfinite | EventKind::State | EventKind::Malformed => 4,
        // A pause of unknown rhythm is told, not judged a fault.
        EventKind::Pause => 2,
        _ => 3,
    };
    let what = if first_form { "" } else { "ended: " };
    let message = format!(
        "frame {}: {} {what}{}",
        e.first_frame,
        e.kind.as_str(),
        e.message
    );
    let file = match (e.env, &e.ring) {
        (Some(env), _) => format!("env {env}"),
        (None, Some(r)) => r.clone(),
        _ => String::new(),
    };
    Some(
        serde_json::json!({
            "timestamp": {"sec": time_ns / 1_000_000_000, "nsec": time_ns % 1_000_000_000},
            "level": level,
            "message": message,
            "name": format!("lrbc-inspector/{}", e.kind.as_str()),
            "file": file,
            "line": 0,
        })
        .to_string(),
    )
}
