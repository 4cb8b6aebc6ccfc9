use super::*;
use crate::layout::LrbcHeader;
use crate::layout::plan::PlanLayout;
use crate::rpc::tree::NodeValue;
use crate::segment::SegmentRw;
use crate::testutil::{TestSegment, spec};
use std::sync::Arc;

fn ext_segment(tag: &str) -> TestSegment {
    TestSegment::create(tag, &spec(PlanLayout::Lrbc { ext: true }, 2))
}

fn owner_word(seg: &TestSegment) -> u64 {
    seg.plan.ctl_c2s_offset + OWNER_PID
}

#[test]
fn a_lease_is_claimed_and_released() {
    let seg = ext_segment("lease");
    let a = seg.attach();
    let lease = Lease::claim(&a).unwrap();
    assert_eq!(seg.rw.load_u32(owner_word(&seg)), Some(std::process::id()));
    assert_eq!(lease_holder(&a), Some(std::process::id()));
    lease.release();
    assert_eq!(seg.rw.load_u32(owner_word(&seg)), Some(0));
}

#[test]
fn a_live_holder_keeps_the_lease_and_is_named() {
    let seg = ext_segment("held");
    let (mut holder, holder_name) = crate::testutil::live_child();
    seg.rw.store_u32(owner_word(&seg), holder.id());
    let err = Lease::claim(&seg.attach()).unwrap_err();
    let _ = holder.kill();
    let _ = holder.wait();
    match err {
        ControlError::HeldBy { pid, name } => {
            assert_eq!(pid, holder.id());
            assert_eq!(name, holder_name);
        }
        other => panic!("{other}"),
    }
}

#[test]
fn a_dead_holder_is_taken_over() {
    let seg = ext_segment("takeover");
    let dead_pid = crate::testutil::dead_pid();
    seg.rw.store_u32(owner_word(&seg), dead_pid);
    let lease = Lease::claim(&seg.attach()).unwrap();
    assert_eq!(lease.took_over_from, Some(dead_pid));
    assert_eq!(seg.rw.load_u32(owner_word(&seg)), Some(std::process::id()));
}

#[test]
fn a_panic_while_holding_the_lease_releases_it() {
    let seg = ext_segment("panic");
    let a = seg.attach();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let _lease = Lease::claim(&a).unwrap();
        panic!("boom");
    }));
    assert!(result.is_err());
    assert_eq!(seg.rw.load_u32(owner_word(&seg)), Some(0));
}

#[test]
fn seed_only_and_luckyrobots_segments_have_no_control_channel() {
    for layout in [PlanLayout::Lrbc { ext: false }, PlanLayout::Lucky] {
        let seg = TestSegment::create("nocontrol", &spec(layout, 2));
        let err = Lease::claim(&seg.attach()).unwrap_err();
        assert!(matches!(err, ControlError::Unavailable(_)), "{err}");
    }
}

#[test]
#[cfg(unix)]
fn only_the_control_ring_pages_are_mapped_writable() {
    let seg = ext_segment("pages");
    let a = seg.attach();
    let _lease = Lease::claim(&a).unwrap();
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    let path = seg.location.to_string();
    let ring_pages = (64 + 4096u64).div_ceil(4096) * 4096;
    let allowed = [seg.plan.ctl_s2c_offset, seg.plan.ctl_c2s_offset].map(|o| o..o + ring_pages);
    let mut writable_bytes = 0;
    for line in maps.lines().filter(|l| l.ends_with(&path)) {
        let fields: Vec<&str> = line.split_whitespace().collect();
        let offset = u64::from_str_radix(fields[2], 16).unwrap();
        let (lo, hi) = fields[0].split_once('-').unwrap();
        let len = u64::from_str_radix(hi, 16).unwrap() - u64::from_str_radix(lo, 16).unwrap();
        if !fields[1].contains('w') {
            continue;
        }
        // The test's own engine-side mapping (SegmentRw) maps everything from 0.
        if offset == 0 && len == seg.plan.size_bytes {
            continue;
        }
        // Adjacent mappings may be merged by the kernel: check page by page.
        for page in (offset..offset + len).step_by(4096) {
            assert!(
                allowed.iter().any(|r| r.contains(&page)),
                "page at offset {page} is writable: {line}"
            );
        }
        writable_bytes += len;
    }
    assert_eq!(writable_bytes, 2 * ring_pages, "{maps}");
    // The inspector's own whole-segment mapping is read-only.
    assert!(
        maps.lines()
            .filter(|l| l.ends_with(&path))
            .any(|l| l.split_whitespace().nth(1) == Some("r--s"))
    );
}

/// A minimal engine side: answers SetServiceEnabled by flipping a bit in service_flags.
fn serve(
    rw: Arc<SegmentRw>,
    seg_plan: crate::layout::plan::Plan,
    stop: Arc<AtomicBool>,
) -> std::thread::JoinHandle<u32> {
    std::thread::Builder::new()
        .name("test-engine".into())
        .spawn(move || {
            let ring = |offset_bytes, kind| RingGeometry {
                kind,
                format: crate::layout::RingFormat::Lrbc,
                offset_bytes,
                capacity_bytes: 4096,
            };
            let mut c2s = V1Consumer::new(&*rw, ring(seg_plan.ctl_c2s_offset, RegionKind::CtlC2s));
            let mut s2c = V1Producer::new(&*rw, ring(seg_plan.ctl_s2c_offset, RegionKind::CtlS2c));
            let mut served = 0;
            // Relaxed: a stop flag with no data behind it.
            while !stop.load(Ordering::Relaxed) {
                served += serve_control_once(&*rw, &mut c2s, &mut s2c, &mut |req| {
                    let d = rpc::decode_envelope(req).ok()?;
                    let mut service = 0u8;
                    let mut enabled = false;
                    for n in &d.tree.nodes {
                        match (n.name, n.value) {
                            ("service", NodeValue::Enum { value, .. }) => service = value as u8,
                            ("enabled", NodeValue::Bool(b)) => enabled = b,
                            _ => {}
                        }
                    }
                    let flags = rw.load_u32(LrbcHeader::SERVICE_FLAGS_OFFSET).unwrap_or(0);
                    let flags = if enabled {
                        flags | 1 << service
                    } else {
                        flags & !(1 << service)
                    };
                    rw.store_u32(LrbcHeader::SERVICE_FLAGS_OFFSET, flags);
                    Some(rpc::build_envelope(
                        d.correlation_id,
                        fb::MethodId(d.method),
                        None,
                        1,
                        |fbb| {
                            let resp = fb::SetServiceEnabledResp::create(
                                fbb,
                                &fb::SetServiceEnabledRespArgs {
                                    service: fb::ServiceId(service),
                                    enabled,
                                },
                            );
                            Some((fb::Payload::SetServiceEnabledResp, resp.as_union_value()))
                        },
                    ))
                }) as u32;
                std::thread::sleep(Duration::from_micros(200));
            }
            served
        })
        .unwrap()
}

#[test]
fn set_service_enabled_round_trips_through_the_control_rings() {
    let seg = ext_segment("call");
    let rw = Arc::new(SegmentRw::open_at(&seg.location).unwrap());
    let stop = Arc::new(AtomicBool::new(false));
    let engine = serve(Arc::clone(&rw), seg.plan.clone(), Arc::clone(&stop));
    let a = seg.attach();
    let mut lease = Lease::claim(&a).unwrap();
    for (service, enabled) in [(4u8, true), (1, true), (4, false)] {
        let (resp, bytes) = lease
            .set_service_enabled(service, enabled, Duration::from_secs(10), None)
            .unwrap();
        assert_eq!(resp.payload_type, Some("SetServiceEnabledResp"));
        let j = resp.tree.to_json(&bytes);
        assert_eq!(j["payload"]["SetServiceEnabledResp"]["enabled"], enabled);
    }
    assert_eq!(
        a.segment.load_u32(LrbcHeader::SERVICE_FLAGS_OFFSET),
        Some(1 << 1)
    );
    stop.store(true, Ordering::Relaxed);
    assert_eq!(engine.join().unwrap(), 3);
}

#[test]
fn no_engine_means_a_timeout_error() {
    let seg = ext_segment("timeout");
    let a = seg.attach();
    let mut lease = Lease::claim(&a).unwrap();
    let err = lease
        .service_status(Duration::from_millis(50), None)
        .unwrap_err();
    assert!(matches!(err, ControlError::Timeout { .. }), "{err}");
    assert!(err.to_string().contains("GetServiceStatus"));
}
