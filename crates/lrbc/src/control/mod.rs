//! The control channel (spec 7): a lease on the `owner_pid` word of `ctl_c2s`, requests
//! on `ctl_c2s`, responses on `ctl_s2c`. Only the pages of the two control rings are
//! mapped writable, and only while a `Lease` lives; dropping it (also while unwinding
//! from a panic) releases the lease.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::attach::Attached;
use crate::clock::monotonic_now_ns;
use crate::layout::{Layout, RegionKind, RingGeometry};
use crate::procinfo::Processes;
use crate::rings::v1::{OWNER_PID, V1Consumer, V1Producer, V1PushError};
use crate::rings::{RingRead, RingWrite};
use crate::rpc::{self, DecodedEnvelope, fb};
use crate::segment::{ControlPages, OpenError};

/// Why the control channel cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    #[error("the control channel is unavailable: {0}")]
    Unavailable(String),
    #[error("the control lease is held by pid {pid} ({name}), which is alive")]
    HeldBy { pid: u32, name: String },
    #[error("cannot map the control rings writable: {0}")]
    Map(#[from] OpenError),
    #[error("no response to {method} within {secs:.1} s (is the engine serving its control ring?)")]
    Timeout { method: String, secs: f64 },
    #[error("the control ring is full: {0}")]
    Push(V1PushError),
    #[error("the lease was taken over by pid {0}")]
    LeaseLost(u32),
    #[error("interrupted")]
    Interrupted,
}

/// Why a segment offers no control channel, or `None` if it does.
pub fn unavailable_reason(a: &Attached) -> Option<String> {
    let g = &a.geometry;
    match g.layout {
        Layout::LuckyrobotsIpc => {
            return Some("the luckyrobots layout has no control rings".into());
        }
        Layout::LrbcV1 => {
            return Some("the engine leaves the extension block zero (seed-only), so it offers no control rings".into());
        }
        Layout::LrbcV1Ext => {}
    }
    if g.ring(RegionKind::CtlC2s).is_none() || g.ring(RegionKind::CtlS2c).is_none() {
        return Some("the engine offers no control rings (ctl offsets are 0)".into());
    }
    if !g.ctl_page_aligned {
        return Some(
            "the control rings are not page-aligned, so they cannot be mapped on their own".into(),
        );
    }
    None
}

/// A held control lease.
#[derive(Debug)]
pub struct Lease {
    pages: ControlPages,
    c2s: RingGeometry,
    pid: u32,
    producer: V1Producer,
    consumer: V1Consumer,
    next_correlation_id: u64,
    released: bool,
    /// The dead process the lease was taken over from, if any.
    pub took_over_from: Option<u32>,
}

static CORRELATION_BASE: AtomicU64 = AtomicU64::new(0);

impl Lease {
    /// Claims the lease for this process: compare-and-swap `owner_pid` from 0, or from
    /// the pid of a process that no longer exists.
    pub fn claim(a: &Attached) -> Result<Self, ControlError> {
        let pid = std::process::id();
        if let Some(reason) = unavailable_reason(a) {
            return Err(ControlError::Unavailable(reason));
        }
        let (Some(c2s), Some(s2c)) = (
            a.geometry.ring(RegionKind::CtlC2s).copied(),
            a.geometry.ring(RegionKind::CtlS2c).copied(),
        ) else {
            return Err(ControlError::Unavailable("no control rings".into()));
        };
        let len = |r: &RingGeometry| 64 + u64::from(r.capacity_bytes);
        let pages = ControlPages::map(
            &a.segment,
            &[(c2s.offset_bytes, len(&c2s)), (s2c.offset_bytes, len(&s2c))],
        )?;
        let word = c2s.offset_bytes + OWNER_PID;
        let mut processes = Processes::new();
        let mut took_over_from = None;
        let mut expected = 0;
        loop {
            let found = pages
                .compare_exchange_u32(word, expected, pid)
                .ok_or_else(|| ControlError::Unavailable("the lease word is not mapped".into()))?;
            if found == expected || found == pid {
                break;
            }
            if processes.is_alive(found) {
                let name = processes.info(found).name.unwrap_or_else(|| "?".into());
                return Err(ControlError::HeldBy { pid: found, name });
            }
            // The holder is dead: take over from exactly that pid.
            took_over_from = Some(found);
            expected = found;
        }
        let producer = V1Producer::new(&pages, c2s);
        let mut consumer = V1Consumer::new(&pages, s2c);
        // Responses left for an earlier holder are not ours.
        consumer.skip_to_end(&pages);
        let base = CORRELATION_BASE.fetch_add(1 << 20, Ordering::Relaxed);
        Ok(Self {
            pages,
            c2s,
            pid,
            producer,
            consumer,
            next_correlation_id: (u64::from(pid) << 32) | base | 1,
            released: false,
            took_over_from,
        })
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The pid in the lease word now.
    pub fn owner(&self) -> Option<u32> {
        self.pages.load_u32(self.c2s.offset_bytes + OWNER_PID)
    }

    /// Sends a request and waits for the response with the same correlation id.
    /// Returns the decoded response and its bytes.
    pub fn call(
        &mut self,
        method: fb::MethodId,
        payload: impl FnOnce(&mut flatbuffers::FlatBufferBuilder<'_>) -> rpc::BuiltPayload,
        timeout: Duration,
        stop: Option<&AtomicBool>,
    ) -> Result<(DecodedEnvelope, Vec<u8>), ControlError> {
        match self.owner() {
            Some(o) if o == self.pid => {}
            Some(o) => return Err(ControlError::LeaseLost(o)),
            None => {
                return Err(ControlError::Unavailable(
                    "the lease word is not mapped".into(),
                ));
            }
        }
        let correlation_id = self.next_correlation_id;
        self.next_correlation_id += 1;
        let bytes = rpc::build_envelope(correlation_id, method, None, monotonic_now_ns(), payload);
        let method_name = rpc::method_name(method.0).unwrap_or("?").to_string();
        let deadline = Instant::now() + timeout;
        let mut spins = 0u32;
        let interrupted = || stop.is_some_and(|s| s.load(Ordering::Relaxed));
        loop {
            match self.producer.try_push(&self.pages, &bytes) {
                Ok(_) => break,
                Err(V1PushError::Full { .. }) if Instant::now() < deadline && !interrupted() => {
                    std::thread::sleep(Duration::from_micros(200));
                }
                Err(e) => return Err(ControlError::Push(e)),
            }
        }
        let mut buf = Vec::new();
        loop {
            // Relaxed: a stop flag with no data behind it.
            if interrupted() {
                return Err(ControlError::Interrupted);
            }
            match self.consumer.try_pop(&self.pages, &mut buf) {
                Ok(Some(_)) => {
                    if let Ok(d) = rpc::decode_envelope(&buf)
                        && d.correlation_id == correlation_id
                    {
                        return Ok((d, buf));
                    }
                    // Not ours (or not an envelope): skip it.
                }
                Ok(None) | Err(_) => {
                    if Instant::now() >= deadline {
                        return Err(ControlError::Timeout {
                            method: method_name,
                            secs: timeout.as_secs_f64(),
                        });
                    }
                    spins += 1;
                    if spins < 100 {
                        std::hint::spin_loop();
                    } else {
                        std::thread::sleep(Duration::from_micros(100));
                    }
                }
            }
        }
    }

    /// Sends SetServiceEnabled.
    pub fn set_service_enabled(
        &mut self,
        service: u8,
        enabled: bool,
        timeout: Duration,
        stop: Option<&AtomicBool>,
    ) -> Result<(DecodedEnvelope, Vec<u8>), ControlError> {
        self.call(
            fb::MethodId::SetServiceEnabled,
            |fbb| {
                let req = fb::SetServiceEnabledReq::create(
                    fbb,
                    &fb::SetServiceEnabledReqArgs {
                        service: fb::ServiceId(service),
                        enabled,
                    },
                );
                Some((fb::Payload::SetServiceEnabledReq, req.as_union_value()))
            },
            timeout,
            stop,
        )
    }

    /// Sends GetServiceStatus.
    pub fn service_status(
        &mut self,
        timeout: Duration,
        stop: Option<&AtomicBool>,
    ) -> Result<(DecodedEnvelope, Vec<u8>), ControlError> {
        self.call(
            fb::MethodId::GetServiceStatus,
            |fbb| {
                let req = fb::GetServiceStatusReq::create(fbb, &fb::GetServiceStatusReqArgs {});
                Some((fb::Payload::GetServiceStatusReq, req.as_union_value()))
            },
            timeout,
            stop,
        )
    }

    /// Releases the lease (store 0, only if it is still ours).
    pub fn release(mut self) {
        self.release_inner();
    }

    fn release_inner(&mut self) {
        if !self.released {
            self.released = true;
            self.pages
                .compare_exchange_u32(self.c2s.offset_bytes + OWNER_PID, self.pid, 0);
        }
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        self.release_inner();
    }
}

/// The engine's side of the control rings: what the simulated engine and tests use to
/// answer requests. `respond` is given each request and returns the response bytes.
pub fn serve_control_once(
    mem: &impl RingWrite,
    c2s: &mut V1Consumer,
    s2c: &mut V1Producer,
    respond: &mut impl FnMut(&[u8]) -> Option<Vec<u8>>,
) -> usize {
    let mut served = 0;
    let mut buf = Vec::new();
    while let Ok(Some(_)) = c2s.try_pop(mem, &mut buf) {
        if let Some(resp) = respond(&buf) {
            // A full response ring drops the response: the requester times out, as with a
            // busy engine.
            let _ = s2c.try_push(mem, &resp);
        }
        served += 1;
    }
    served
}

/// Reads the lease word of a segment without claiming anything.
pub fn lease_holder(a: &Attached) -> Option<u32> {
    let c2s = a.geometry.ring(RegionKind::CtlC2s)?;
    RingRead::load_u32(&a.segment, c2s.offset_bytes + OWNER_PID).filter(|&p| p != 0)
}

#[cfg(test)]
mod tests;
