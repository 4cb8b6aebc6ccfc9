//! The WebSocket server's own events (a client registered or gone, a malformed message,
//! a client's queue full) as one line each on standard error, `serve: …`.

use std::fmt::Write as _;

use tracing_core::field::{Field, Visit};
use tracing_core::span::{Attributes, Id, Record};
use tracing_core::{Event, Level, Metadata, Subscriber};

/// Prints the server's events from `info` up.
struct Lines;

/// The text of an event's message.
#[derive(Default)]
struct Text(String);

impl Visit for Text {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, "{value:?}");
        }
    }
}

impl Subscriber for Lines {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        if !metadata.target().starts_with("foxglove") {
            return false;
        }
        // Levels order by verbosity: ERROR < WARN < INFO < DEBUG. What a client is told
        // of its own mistakes is logged at DEBUG, in the client's module.
        *metadata.level() <= Level::INFO
            || (*metadata.level() == Level::DEBUG
                && metadata
                    .file()
                    .is_some_and(|f| f.ends_with("connected_client.rs")))
    }

    fn new_span(&self, _span: &Attributes<'_>) -> Id {
        Id::from_u64(1)
    }

    fn record(&self, _span: &Id, _values: &Record<'_>) {}

    fn record_follows_from(&self, _span: &Id, _follows: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut text = Text::default();
        event.record(&mut text);
        let told = ["Sending error to client", "Sending warning to client"]
            .iter()
            .any(|p| text.0.starts_with(p));
        // `serve` says where it listens and when it stops in its own words.
        let own = ["Started server", "Shutting down", "Shutdown complete"]
            .iter()
            .any(|p| text.0.starts_with(p));
        if own || (*event.metadata().level() == Level::DEBUG && !told) {
            return;
        }
        eprintln!("serve: {}", line(event.metadata().level(), &text.0));
    }

    fn enter(&self, _span: &Id) {}

    fn exit(&self, _span: &Id) {}
}

/// One line: the message with a lower-case first letter, and the level when not info.
fn line(level: &Level, message: &str) -> String {
    let mut chars = message.chars();
    let first = chars.next().map(|c| c.to_lowercase().to_string());
    let text = first.unwrap_or_default() + chars.as_str();
    match *level {
        Level::ERROR => format!("client error: {text}"),
        Level::DEBUG => format!("told a client: {}", text.trim_start_matches("sending ")),
        Level::WARN => format!("warning: {text}"),
        _ => text,
    }
}

/// Prints the server's events for the rest of the process (once; later calls, or a
/// process that set its own, keep what is there).
pub fn print_server_events() {
    let _ = tracing_core::dispatcher::set_global_default(tracing_core::Dispatch::new(Lines));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_starts_lower_case_and_names_errors() {
        assert_eq!(
            line(&Level::INFO, "Registered client 127.0.0.1:5"),
            "registered client 127.0.0.1:5"
        );
        assert_eq!(
            line(&Level::ERROR, "Invalid message from x: bad"),
            "client error: invalid message from x: bad"
        );
        assert_eq!(line(&Level::WARN, ""), "warning: ");
    }
}
