//! The services of `serve --allow-control`: an engine service toggled, or the services'
//! status read, through the control rings exactly as `control` does (the lease, the
//! timeout). Requests and responses are JSON.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::Service;
use crate::protocol::{SERVICE_STATUS, SET_SERVICE};
use lrbc::attach::Attached;
use lrbc::control::Lease;
use lrbc::rpc::services;
use lrbc::sync::lock;

const SET_REQUEST_SCHEMA: &str = r#"{"type":"object","properties":{"service":{"type":"string","description":"agent, mujoco, telemetry, scene, camera, viewport or debug"},"enabled":{"type":"boolean"}},"required":["service","enabled"]}"#;
const EMPTY_SCHEMA: &str = r#"{"type":"object"}"#;

fn schema(name: &str, text: &str) -> (String, String) {
    (name.to_string(), text.to_string())
}

/// Why a control service call failed, as the line its client gets.
#[derive(Debug, thiserror::Error)]
pub enum ControlCallError {
    #[error("the request is not JSON: {0}")]
    NotJson(String),
    #[error("the request needs \"service\": a service name")]
    NoService,
    #[error("unknown service {0:?}; one of: {choices}", choices = services::choices())]
    UnknownService(String),
    #[error("the request needs \"enabled\": true or false")]
    NoEnabled,
    #[error("no segment is served now")]
    NotServed,
    /// The lease could not be claimed, or the engine did not answer.
    #[error(transparent)]
    Control(#[from] lrbc::control::ControlError),
    #[error("the engine refused: {0}")]
    Refused(String),
}

/// Which service and what to do, from a request's JSON.
fn parse_set(payload: &[u8]) -> Result<(u8, bool), ControlCallError> {
    let v: serde_json::Value =
        serde_json::from_slice(payload).map_err(|e| ControlCallError::NotJson(e.to_string()))?;
    let name = v["service"].as_str().ok_or(ControlCallError::NoService)?;
    let id = services::id_of(name).ok_or_else(|| ControlCallError::UnknownService(name.into()))?;
    let enabled = v["enabled"].as_bool().ok_or(ControlCallError::NoEnabled)?;
    Ok((id, enabled))
}

/// Claims the lease on the segment served now, calls, and releases it.
fn call(
    attached: &Mutex<Option<Attached>>,
    what: impl FnOnce(
        &mut Lease,
    ) -> Result<(lrbc::rpc::DecodedEnvelope, Vec<u8>), lrbc::control::ControlError>,
) -> Result<Vec<u8>, ControlCallError> {
    let guard = lock(attached);
    let a = guard.as_ref().ok_or(ControlCallError::NotServed)?;
    let mut lease = Lease::claim(a)?;
    let result = what(&mut lease);
    lease.release();
    let (resp, bytes) = result?;
    if let Some(err) = &resp.error {
        return Err(ControlCallError::Refused(err.clone()));
    }
    Ok(serde_json::json!({
        "method": resp.method_label(),
        "correlation_id": resp.correlation_id,
        "fields": resp.tree.to_json(&bytes),
    })
    .to_string()
    .into_bytes())
}

/// The control services on the segment in `attached` (the caller replaces it when the
/// engine restarts); each call waits up to `timeout` for the engine.
pub fn control_services(attached: Arc<Mutex<Option<Attached>>>, timeout: Duration) -> Vec<Service> {
    let set = {
        let attached = Arc::clone(&attached);
        Service {
            name: SET_SERVICE.into(),
            kind: "lrbc.SetService".into(),
            request: schema("lrbc.SetServiceRequest", SET_REQUEST_SCHEMA),
            response: schema("lrbc.ServiceResponse", EMPTY_SCHEMA),
            handler: Arc::new(move |req: &[u8]| {
                let (id, enabled) = parse_set(req)?;
                Ok(call(&attached, |lease| {
                    lease.set_service_enabled(id, enabled, timeout, None)
                })?)
            }),
        }
    };
    let status = Service {
        name: SERVICE_STATUS.into(),
        kind: "lrbc.ServiceStatus".into(),
        request: schema("lrbc.Empty", EMPTY_SCHEMA),
        response: schema("lrbc.ServiceResponse", EMPTY_SCHEMA),
        handler: Arc::new(move |_req: &[u8]| {
            Ok(call(&attached, |lease| {
                lease.service_status(timeout, None)
            })?)
        }),
    };
    vec![set, status]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_request_names_a_known_service_and_a_state() {
        let camera = services::id_of("camera").unwrap_or(0);
        assert_eq!(
            parse_set(br#"{"service":"Camera","enabled":true}"#).ok(),
            Some((camera, true))
        );
        for (bad, says) in [
            (&b"{"[..], "not JSON"),
            (br#"{"enabled":true}"#, "\"service\""),
            (br#"{"service":"warp","enabled":true}"#, "unknown service"),
            (br#"{"service":"camera","enabled":"yes"}"#, "\"enabled\""),
        ] {
            let err = parse_set(bad)
                .err()
                .map(|e| e.to_string())
                .unwrap_or_default();
            assert!(err.contains(says), "{err}");
        }
    }
}
