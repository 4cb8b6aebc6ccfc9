//! `control`: toggle an engine service or read service status through the control rings.

use std::time::Duration;

use super::{CliError, stop_flag};
use lrbc::attach::{Target, attach};
use lrbc::control::Lease;
use lrbc::layout::LayoutChoice;
use lrbc::rpc::services;
use lrbc::rpc::tree::NodeValue;

/// What to do with the service.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    Enable,
    Disable,
    Status,
}

pub fn run(
    target: &Target,
    choice: LayoutChoice,
    service: &str,
    action: Action,
    timeout: Duration,
    json: bool,
) -> Result<(), CliError> {
    let Some(id) = services::id_of(service) else {
        return Err(CliError::Usage(format!(
            "unknown service {service:?}; one of: {}",
            services::choices()
        )));
    };
    let stop = stop_flag();
    let a = attach(target, choice)?;
    let mut lease = Lease::claim(&a)?;
    if let Some(pid) = lease.took_over_from {
        eprintln!("note: took the control lease over from pid {pid}, which no longer exists");
    }
    let result = match action {
        Action::Enable | Action::Disable => {
            lease.set_service_enabled(id, action == Action::Enable, timeout, Some(&stop))
        }
        Action::Status => lease.service_status(timeout, Some(&stop)),
    };
    lease.release();
    let (resp, bytes) = result?;
    if json {
        println!(
            "{}",
            serde_json::json!({
                "method": resp.method_label(),
                "correlation_id": resp.correlation_id,
                "error": resp.error,
                "fields": resp.tree.to_json(&bytes),
            })
        );
    }
    if let Some(err) = &resp.error {
        return Err(CliError::Other(format!("the engine refused: {err}")));
    }
    if json {
        return Ok(());
    }
    match action {
        Action::Enable | Action::Disable => {
            let enabled = resp
                .tree
                .nodes
                .iter()
                .find(|n| n.name == "enabled")
                .map(|n| n.value == NodeValue::Bool(true));
            match enabled {
                Some(e) => println!(
                    "{} is now {}",
                    services::label(id),
                    if e { "enabled" } else { "disabled" }
                ),
                None => println!(
                    "{}: {}",
                    services::label(id),
                    resp.tree.summary(&bytes, 0, 200)
                ),
            }
        }
        Action::Status => {
            let fields = resp.tree.to_json(&bytes);
            let services = fields["payload"]["GetServiceStatusResp"]["services"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            println!(
                "{:<10} {:<9} {:>10} {:>8}",
                "service", "enabled", "requests", "errors"
            );
            for s in services {
                let name = s["service"].as_str().unwrap_or("?");
                let marker = if name.eq_ignore_ascii_case(service) {
                    " ◂"
                } else {
                    ""
                };
                println!(
                    "{:<10} {:<9} {:>10} {:>8}{marker}",
                    name,
                    s["enabled"]
                        .as_bool()
                        .map_or("?", |e| if e { "yes" } else { "no" }),
                    s["requests"].as_u64().unwrap_or(0),
                    s["errors"].as_u64().unwrap_or(0)
                );
            }
        }
    }
    Ok(())
}
