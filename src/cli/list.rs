//! `list`: every LRBC segment on the machine.

use super::CliError;
use lrbc::discovery::{self, ListOutcome};

pub fn run(as_json: bool) -> Result<(), CliError> {
    let entries = discovery::list();
    if as_json {
        let text = serde_json::to_string_pretty(&entries)
            .map_err(|e| CliError::Other(format!("cannot encode the list: {e}")))?;
        println!("{text}");
        return Ok(());
    }
    if entries.is_empty() {
        println!("no LRBC segments in {}", lrbc::segment::SHM_PLACE);
        return Ok(());
    }
    println!(
        "{:<28} {:<16} {:>10} {:>16} {:<28} {:<28} {:>12} {:>10}",
        "name", "layout", "bytes", "envs×obs×act", "server", "client", "frame_seq", "last frame"
    );
    for e in &entries {
        let size = e.size_bytes.map_or("?".into(), |s| s.to_string());
        match &e.outcome {
            ListOutcome::Ok(s) => println!(
                "{:<28} {:<16} {:>10} {:>16} {:<28} {:<28} {:>12} {:>10}",
                e.name,
                s.layout.as_str(),
                size,
                format!("{}×{}×{}", s.num_envs, s.obs_size, s.act_size),
                s.server.describe(),
                s.client.describe(),
                s.frame_seq,
                s.secs_since_frame
                    .map_or("-".into(), |t| format!("{t:.1}s ago")),
            ),
            ListOutcome::Err { error } => println!("{:<28} unreadable: {error}", e.name),
        }
    }
    Ok(())
}
