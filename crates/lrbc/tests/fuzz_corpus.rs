//! The contract's fuzz targets' bodies (`lrbc::fuzzing`) over their checked-in corpus
//! (`fuzz/corpus/<target>/`), on stable Rust: a change that breaks a property the
//! fuzzers check fails here at once. The seed inputs are written by
//! `cargo test -p lrbc --test fuzz_corpus -- --ignored write_seed_corpus`; files the
//! fuzzers find may be added beside them.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use std::path::PathBuf;

use lrbc::fuzzing;
use lrbc::fuzzing::corpus;
use lrbc::layout::plan::{Plan, PlanLayout, PlanSpec};
use lrbc::layout::{LrbcHeader, LuckyHeader, LuckyRingHeader, Names, RingHeader};
use lrbc::rpc::{self, fb};
use zerocopy::{FromBytes, FromZeros, IntoBytes};

const TARGETS: [(&str, corpus::Body); 4] = [
    ("envelope_decode", fuzzing::envelope_decode),
    ("layout_inspect", fuzzing::layout_inspect),
    ("names_parse", fuzzing::names_parse),
    ("ring_watch", fuzzing::ring_watch),
];

/// The workspace's root.
fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn every_fuzz_target_passes_over_its_corpus() {
    for (target, body) in TARGETS {
        if let Err(e) = corpus::run(target, &corpus::dir(&root(), target), body) {
            panic!("{e}");
        }
    }
}

#[test]
fn the_seed_corpus_is_current() {
    for (target, seeds) in seeds() {
        let stale = corpus::stale(&corpus::dir(&root(), target), &seeds);
        assert!(
            stale.is_empty(),
            "{stale:?} differ from their seeds: run `cargo test -p lrbc --test fuzz_corpus -- --ignored write_seed_corpus`"
        );
    }
}

#[test]
#[ignore = "writes fuzz/corpus: run by hand after changing a seed"]
fn write_seed_corpus() {
    for (target, seeds) in seeds() {
        corpus::write(&corpus::dir(&root(), target), &seeds).unwrap();
    }
}

fn seeds() -> Vec<(&'static str, corpus::Seeds)> {
    vec![
        ("envelope_decode", envelope_seeds()),
        ("layout_inspect", layout_seeds()),
        ("names_parse", names_seeds()),
        ("ring_watch", ring_seeds()),
    ]
}

fn envelope_seeds() -> corpus::Seeds {
    let request = rpc::build_envelope(42, fb::MethodId::GetJointState, None, 123_456, |fbb| {
        let name = fbb.create_string("robot");
        let req = fb::GetJointStateReq::create(
            fbb,
            &fb::GetJointStateReqArgs {
                robot_name: Some(name),
            },
        );
        Some((fb::Payload::GetJointStateReq, req.as_union_value()))
    });
    let refused = rpc::build_envelope(43, fb::MethodId::GetJointState, Some("no robot"), 1, |_| {
        None
    });
    let telemetry = rpc::build_envelope(9, fb::MethodId::TelemetryFrame, None, 5, |fbb| {
        let q = fbb.create_vector(&[0.1f32, 0.2, f32::NAN, f32::INFINITY]);
        let f = fb::TelemetryFrame::create(
            fbb,
            &fb::TelemetryFrameArgs {
                timestamp_ms: 1000,
                frame_number: 12,
                task_index: 0,
                observation_qpos: Some(q),
                action_ctrl: None,
            },
        );
        Some((fb::Payload::TelemetryFrame, f.as_union_value()))
    });
    let mut flipped = request.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0xFF;
    let mut odd = telemetry.clone();
    // Byte 0 odd: the body stamps the identifier over bytes 4..8.
    odd[0] |= 1;
    corpus::named(vec![
        ("request", request.clone()),
        ("refused", refused),
        ("telemetry-nan", telemetry.clone()),
        ("truncated", request[..request.len() / 2].to_vec()),
        ("flipped", flipped),
        ("stamped", odd),
        ("identifier-only", b"\0\0\0\0LRPC".to_vec()),
        ("empty", Vec::new()),
    ])
}

fn spec(layout: PlanLayout) -> PlanSpec {
    PlanSpec {
        layout,
        num_envs: 3,
        obs_size: 4,
        act_size: 2,
        image: (layout == PlanLayout::Lrbc { ext: true }).then_some((4, 4, 3)),
        cmd_ring_size: 256,
        ctl_ring_size: (layout == PlanLayout::Lrbc { ext: true }).then_some(256),
        names: Names {
            obs: vec!["x".into(), "v".into()],
            act: vec!["force".into()],
        },
        mode: 0,
        server_pid: 4242,
        max_size_bytes: 1 << 30,
    }
}

/// `[selector, size_lo, size_hi, bytes…]`: selector 0 (detect), size extra 0 beyond
/// 4096 + 16 × size.
fn layout_input(selector: u8, segment: &[u8]) -> Vec<u8> {
    let extra = (segment.len().saturating_sub(4096)).div_ceil(16) as u16;
    let mut v = vec![selector];
    v.extend_from_slice(&extra.to_le_bytes());
    v.extend_from_slice(segment);
    v
}

fn layout_seeds() -> corpus::Seeds {
    let mut out = Vec::new();
    for (name, layout) in [
        ("lrbc-ext", PlanLayout::Lrbc { ext: true }),
        ("lrbc-bare", PlanLayout::Lrbc { ext: false }),
        ("lucky", PlanLayout::Lucky),
    ] {
        let s = spec(layout);
        let plan = Plan::new(&s).unwrap();
        let bytes = plan.initial_bytes(&s);
        out.push((name.to_string(), layout_input(0, &bytes)));
        // An offset far out of range, and a header that claims more than it has.
        let mut bad = bytes.clone();
        match layout {
            PlanLayout::Lucky => {
                LuckyHeader::mut_from_prefix(&mut bad).unwrap().0.obs_offset = u64::MAX.into();
            }
            PlanLayout::Lrbc { .. } => {
                LrbcHeader::mut_from_prefix(&mut bad).unwrap().0.obs_offset = u64::MAX.into();
            }
        }
        out.push((
            format!("{name}-obs-offset-out-of-range"),
            layout_input(0, &bad),
        ));
        let mut short = bytes.clone();
        short.truncate(4096);
        out.push((format!("{name}-truncated"), layout_input(16, &short)));
    }
    out.push(("magic-only".into(), vec![1, 0, 0]));
    corpus::named(out.iter().map(|(n, b)| (n.as_str(), b.clone())).collect())
}

fn names_seeds() -> corpus::Seeds {
    corpus::named(vec![
        ("two-lists", b"x\0v\0\0force\0\0".to_vec()),
        ("empty-lists", b"\0\0".to_vec()),
        ("no-terminator", b"x\0v".to_vec()),
        ("not-utf8", b"\xff\xfe\0\0a\0\0".to_vec()),
        ("empty", Vec::new()),
        ("trailing", b"a\0\0b\0\0garbage".to_vec()),
    ])
}

/// A ring image for `ring_watch`: the shape byte (capacity 64 << k, 8 = luckyrobots),
/// then the ring's header and data.
fn lrbc_ring(k: u8, write_pos: u32, read_pos: u32, data: &[(usize, &[u8])]) -> Vec<u8> {
    let cap = 64usize << k;
    let mut header = RingHeader::new_zeroed();
    header.write_pos = write_pos.into();
    header.read_pos = read_pos.into();
    let mut ring = header.as_bytes().to_vec();
    ring.resize(RingHeader::SIZE_BYTES + cap, 0);
    for (at, bytes) in data {
        let at = RingHeader::SIZE_BYTES + at;
        ring[at..at + bytes.len()].copy_from_slice(bytes);
    }
    let mut v = vec![k];
    v.extend(ring);
    v
}

fn entry(len: u32, fill: u8) -> Vec<u8> {
    let mut e = len.to_le_bytes().to_vec();
    e.extend(std::iter::repeat_n(fill, len as usize));
    e.resize(e.len().next_multiple_of(8), 0);
    e
}

fn ring_seeds() -> corpus::Seeds {
    let marker = 0xFFFF_FFFFu32.to_le_bytes();
    let e12 = entry(12, 1);
    let e40 = entry(40, 2);
    let mut lucky = vec![8u8];
    // One entry (16-byte header, 40-byte payload) from position 24, split at the end.
    let mut header = LuckyRingHeader::new_zeroed();
    header.capacity = 64.into();
    header.head = 80.into();
    header.tail = 24.into();
    let mut ring = header.as_bytes().to_vec();
    ring.resize(LuckyRingHeader::SIZE_BYTES + 64, 0);
    let mut h = [0u8; 16];
    h[0..4].copy_from_slice(&7u32.to_le_bytes());
    h[8..12].copy_from_slice(&40u32.to_le_bytes());
    for (i, b) in h.iter().chain([3u8; 40].iter()).enumerate() {
        ring[LuckyRingHeader::SIZE_BYTES + (24 + i) % 64] = *b;
    }
    lucky.extend(ring);
    corpus::named(vec![
        (
            "lrbc-entries",
            lrbc_ring(1, 16 + 48, 0, &[(0, &e12), (16, &e40)]),
        ),
        // A wrap marker, then an entry at the start of the data area.
        (
            "lrbc-wrap",
            lrbc_ring(0, 64 + 16, 40, &[(40, &marker), (0, &e12)]),
        ),
        // Almost a whole capacity of entries across the wrap: the watcher's first copy
        // is within one margin of being lapped.
        (
            "lrbc-across-wrap",
            lrbc_ring(
                1,
                128 + 64,
                72,
                &[(72, &e40), (120, &marker), (0, &e40), (48, &e12)],
            ),
        ),
        (
            "lrbc-length-too-large",
            lrbc_ring(0, 8, 0, &[(0, &1000u32.to_le_bytes())]),
        ),
        ("lrbc-marker-at-zero", lrbc_ring(0, 8, 0, &[(0, &marker)])),
        ("lrbc-reinitialised", lrbc_ring(0, 8, 64, &[])),
        ("lrbc-lapped", lrbc_ring(0, 1000, 0, &[(0, &e12)])),
        ("lucky-split", lucky),
        ("empty", vec![0]),
    ])
}

/// The seeds reach the code they are for: the good ones parse, the bad ones fail
/// where they are meant to.
#[test]
fn the_seeds_reach_past_the_first_checks() {
    use lrbc::layout::{LayoutChoice, RegionKind, RingFormat, RingGeometry, inspect};
    use lrbc::rings::{AnyWatcher, WatchEvent};
    let rings: std::collections::BTreeMap<String, Vec<u8>> = ring_seeds().into_iter().collect();
    let watch = |name: &str| {
        let data = &rings[&format!("seed-{name}")];
        let (shape, mem) = (data[0], data[1..].to_vec());
        let ring = RingGeometry {
            kind: RegionKind::CmdC2s,
            format: if shape & 8 != 0 {
                RingFormat::Lucky
            } else {
                RingFormat::Lrbc
            },
            offset_bytes: 0,
            capacity_bytes: 64 << (shape & 7),
        };
        let mut w = AnyWatcher::new(&mem, ring);
        let mut out = Vec::new();
        w.poll(&mem, &mut out, 1000, 0);
        out
    };
    let entries = |out: &[WatchEvent]| {
        out.iter()
            .filter(|e| matches!(e, WatchEvent::Entry { .. }))
            .count()
    };
    let malformed = |out: &[WatchEvent]| {
        out.iter()
            .any(|e| matches!(e, WatchEvent::Malformed { .. }))
    };
    assert_eq!(entries(&watch("lrbc-entries")), 2);
    assert_eq!(entries(&watch("lrbc-wrap")), 1);
    assert_eq!(entries(&watch("lrbc-across-wrap")), 3);
    assert_eq!(entries(&watch("lucky-split")), 1);
    assert!(malformed(&watch("lrbc-length-too-large")));
    assert!(malformed(&watch("lrbc-marker-at-zero")));
    assert!(malformed(&watch("lrbc-reinitialised")));
    for (name, data) in layout_seeds() {
        let segment = &data[3..];
        let ok = inspect(&segment.to_vec(), LayoutChoice::Auto).is_ok();
        let good = !name.contains("out-of-range")
            && !name.contains("truncated")
            && name != "seed-magic-only";
        assert_eq!(ok, good, "{name}");
    }
    for (name, data) in envelope_seeds() {
        if ["seed-flipped", "seed-stamped"].contains(&name.as_str()) {
            // Either way: they probe the verifier's edges.
            continue;
        }
        let ok = rpc::decode_envelope(&data).is_ok();
        let good = ["seed-request", "seed-refused", "seed-telemetry-nan"].contains(&name.as_str());
        assert_eq!(ok, good, "{name}");
    }
}
