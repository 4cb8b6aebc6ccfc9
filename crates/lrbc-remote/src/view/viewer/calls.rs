//! The RPC panel's requests as calls of the server's control services
//! (`/lrbc/control/set_service`, `/lrbc/control/service_status`), and their answers
//! into the panel's state.

use super::ViewerThread;
use crate::protocol::{SERVICE_STATUS, SET_SERVICE};
use crate::view::Connection;
use lrbc::rpc::tree::clip;
use lrbc::sync::lock;
use lrbc_live::controller::{CallError, ControlRequest, set_line, statuses_of};

impl ViewerThread {
    /// Sends a control request to the server's services.
    pub(super) fn call(&mut self, c: &mut Connection, req: ControlRequest) {
        let (service, body) = match req {
            ControlRequest::SetEnabled { service, enabled } => (
                SET_SERVICE,
                serde_json::json!({
                    "service": lrbc::rpc::services::label(service).to_ascii_lowercase(),
                    "enabled": enabled,
                })
                .to_string(),
            ),
            ControlRequest::Status => (SERVICE_STATUS, "{}".to_string()),
        };
        let sent = if c.services.contains_key(service) {
            c.call(service, body.as_bytes()).map_err(|e| e.to_string())
        } else {
            Err(format!(
                "{} does not allow control (it serves without --allow-control)",
                self.addr
            ))
        };
        match sent {
            Ok(id) => {
                self.pending.insert(id, req);
                lock(&self.control).busy = true;
            }
            Err(e) => lock(&self.control).last_error = Some(e),
        }
        (self.waker)();
    }

    /// A service's answer into the RPC panel's state.
    pub(super) fn answered(&mut self, req: ControlRequest, answer: Result<Vec<u8>, CallError>) {
        let result = answer.and_then(|bytes| {
            let v: serde_json::Value = serde_json::from_slice(&bytes)
                .map_err(|e| CallError::Remote(format!("the server's answer is not JSON: {e}")))?;
            let fields = &v["fields"];
            if let Some(rows) = statuses_of(fields) {
                lock(&self.control).statuses = rows;
            }
            let method = v["method"].as_str().unwrap_or("response");
            Ok(match (req, find_bool(fields, "enabled")) {
                (ControlRequest::SetEnabled { service, .. }, Some(e)) => set_line(service, e),
                _ => format!("{method}: {}", clip(fields["payload"].to_string(), 160)),
            })
        });
        let mut s = lock(&self.control);
        s.busy = !self.pending.is_empty();
        s.answered(result);
        drop(s);
        (self.waker)();
    }
}

/// The first boolean named `key` anywhere in `v`.
fn find_bool(v: &serde_json::Value, key: &str) -> Option<bool> {
    match v {
        serde_json::Value::Object(m) => m
            .get(key)
            .and_then(serde_json::Value::as_bool)
            .or_else(|| m.values().find_map(|x| find_bool(x, key))),
        serde_json::Value::Array(a) => a.iter().find_map(|x| find_bool(x, key)),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_set_services_answer_is_found_at_any_depth() {
        let v = serde_json::json!({"payload": {"SetServiceEnabledResp": {"service": 4, "enabled": false}}});
        assert_eq!(find_bool(&v, "enabled"), Some(false));
        assert_eq!(
            find_bool(&serde_json::json!({"a": [1, {"enabled": true}]}), "enabled"),
            Some(true)
        );
        assert_eq!(
            find_bool(&serde_json::json!({"enabled": 1}), "enabled"),
            None
        );
    }
}
