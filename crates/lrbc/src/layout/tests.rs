use super::plan::{Plan, PlanLayout, PlanSpec};
use super::*;
use zerocopy::FromBytes;

fn spec(layout: PlanLayout) -> PlanSpec {
    PlanSpec {
        layout,
        num_envs: 4,
        obs_size: 3,
        act_size: 2,
        image: if matches!(layout, PlanLayout::Lrbc { .. }) {
            Some((8, 6, 3))
        } else {
            None
        },
        cmd_ring_size: 4096,
        ctl_ring_size: if layout == (PlanLayout::Lrbc { ext: true }) {
            Some(4096)
        } else {
            None
        },
        names: Names {
            obs: vec!["x".into(), "v".into(), "theta".into()],
            act: vec!["force".into(), "torque".into()],
        },
        mode: 0,
        server_pid: 4242,
        max_size_bytes: 1 << 30,
    }
}

fn bytes(layout: PlanLayout) -> (Plan, Vec<u8>) {
    let s = spec(layout);
    let plan = Plan::new(&s).unwrap();
    let bytes = plan.initial_bytes(&s);
    (plan, bytes)
}

/// The LRBC header at the start of `bytes`, to edit in place.
fn lrbc_header(bytes: &mut [u8]) -> &mut LrbcHeader {
    LrbcHeader::mut_from_prefix(bytes).unwrap().0
}

/// The luckyrobots header at the start of `bytes`, to edit in place.
fn lucky_header(bytes: &mut [u8]) -> &mut LuckyHeader {
    LuckyHeader::mut_from_prefix(bytes).unwrap().0
}

#[test]
fn an_extension_segment_is_detected_with_every_region() {
    let (plan, b) = bytes(PlanLayout::Lrbc { ext: true });
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert_eq!(g.layout, Layout::LrbcV1Ext);
    assert_eq!(g.size_bytes, plan.size_bytes);
    assert_eq!((g.num_envs, g.obs_size, g.act_size), (4, 3, 2));
    let kinds: Vec<_> = g.regions.iter().map(|r| r.kind).collect();
    for k in [
        RegionKind::Header,
        RegionKind::Obs,
        RegionKind::Act,
        RegionKind::Rewards,
        RegionKind::Dones,
        RegionKind::Truncateds,
        RegionKind::Resets,
        RegionKind::Names,
        RegionKind::CmdS2c,
        RegionKind::CmdC2s,
        RegionKind::Image,
        RegionKind::CtlS2c,
        RegionKind::CtlC2s,
    ] {
        assert!(kinds.contains(&k), "missing {k}");
    }
    assert_eq!(g.region(RegionKind::Obs).unwrap().length_bytes, 4 * 3 * 4);
    assert_eq!(
        g.region(RegionKind::Image).unwrap().length_bytes,
        4 * 8 * 6 * 3
    );
    assert_eq!(g.names.obs, ["x", "v", "theta"]);
    assert!(g.ctl_page_aligned);
    assert!(g.warnings.is_empty(), "{:?}", g.warnings);
    assert_eq!(g.server_pid(), 4242);
    let header = LrbcHeader::read_from_prefix(&g.header).map(|(h, _)| h);
    assert_eq!(header.map(|h| h.cmd_ring_size.get()), Ok(4096));
}

#[test]
fn a_seed_only_segment_has_no_extension_features() {
    let (_, b) = bytes(PlanLayout::Lrbc { ext: false });
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert_eq!(g.layout, Layout::LrbcV1);
    assert!(g.region(RegionKind::Truncateds).is_none());
    assert!(g.region(RegionKind::Names).is_none());
    assert!(g.ring(RegionKind::CtlC2s).is_none());
    assert_eq!(g.counters.ext, None);
    assert!(g.warnings.is_empty(), "{:?}", g.warnings);
}

#[test]
fn a_luckyrobots_segment_is_detected_by_its_total_size() {
    let (_, b) = bytes(PlanLayout::Lucky);
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert_eq!(g.layout, Layout::LuckyrobotsIpc);
    assert_eq!(g.rings.len(), 2);
    assert!(g.rings.iter().all(|r| r.format == RingFormat::Lucky));
    assert_eq!(g.names.act, ["force", "torque"]);
    assert_eq!(g.mode, None);
}

#[test]
fn forcing_a_layout_overrides_detection() {
    let (_, b) = bytes(PlanLayout::Lrbc { ext: false });
    // Read as luckyrobots, the LRBC offsets make no sense and validation says so.
    assert!(inspect(&b, LayoutChoice::LuckyrobotsIpc).is_err());
    let (_, b) = bytes(PlanLayout::Lucky);
    let g = inspect(&b, LayoutChoice::LuckyrobotsIpc).unwrap();
    assert_eq!(g.layout, Layout::LuckyrobotsIpc);
}

#[test]
fn a_zero_luckyrobots_ring_capacity_means_a_512_kib_region() {
    let mut s = spec(PlanLayout::Lucky);
    s.cmd_ring_size = 512 * 1024;
    let plan = Plan::new(&s).unwrap();
    let mut b = plan.initial_bytes(&s);
    let at = plan.cmd_c2s_offset as usize;
    LuckyRingHeader::mut_from_prefix(&mut b[at..])
        .unwrap()
        .0
        .capacity = 0.into();
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert_eq!(
        g.ring(RegionKind::CmdC2s).unwrap().capacity_bytes,
        256 * 1024
    );
}

#[test]
fn wrong_magic_reports_the_value_found() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).magic = 0xDEAD_BEEF.into();
    let err = inspect(&b, LayoutChoice::Auto).unwrap_err();
    assert_eq!(err, LayoutError::BadMagic { found: 0xDEAD_BEEF });
    assert!(err.to_string().contains("0xdeadbeef"));
}

#[test]
fn a_segment_smaller_than_the_header_is_rejected() {
    let (_, b) = bytes(PlanLayout::Lrbc { ext: true });
    assert_eq!(
        inspect(&b[..100], LayoutChoice::Auto),
        Err(LayoutError::TooSmall {
            size_bytes: 100,
            need_bytes: 4096
        })
    );
    assert!(matches!(
        inspect(&b[..3], LayoutChoice::Auto),
        Err(LayoutError::TooSmall { .. })
    ));
}

#[test]
fn an_unknown_version_is_rejected() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).version = 2.into();
    assert_eq!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::UnsupportedVersion { found: 2 })
    );
}

#[test]
fn a_region_past_the_end_is_rejected() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).obs_offset = (plan.size_bytes - 8).into();
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::OutsideSegment {
            region: RegionKind::Obs,
            ..
        })
    ));
    // An offset so large that offset + length wraps u64.
    lrbc_header(&mut b).obs_offset = (u64::MAX - 4).into();
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::OutsideSegment { .. })
    ));
}

#[test]
fn overlapping_regions_are_rejected_naming_both() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).act_offset = (plan.obs_offset + 4).into();
    let err = inspect(&b, LayoutChoice::Auto).unwrap_err();
    assert!(
        matches!(
            err,
            LayoutError::Overlap {
                a: RegionKind::Obs,
                b: RegionKind::Act,
                ..
            }
        ),
        "{err}"
    );
    // Offsets inside the header overlap the header region.
    lrbc_header(&mut b).act_offset = 64.into();
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::Overlap {
            a: RegionKind::Header,
            ..
        })
    ));
}

#[test]
fn a_region_inside_another_larger_one_is_an_overlap() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    // dones inside the image region, which is followed by smaller regions.
    lrbc_header(&mut b).dones_offset = (plan.image_offset + 8).into();
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::Overlap { .. })
    ));
}

#[test]
fn sizes_whose_product_overflows_are_rejected() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).num_envs = u32::MAX.into();
    lrbc_header(&mut b).obs_size = u32::MAX.into();
    let err = inspect(&b, LayoutChoice::Auto).unwrap_err();
    assert!(
        matches!(
            err,
            LayoutError::SizeOverflow {
                what: "obs region",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains("num_envs 4294967295"), "{err}");
    // The image product overflows on its own with small hot sizes.
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).image_width = u32::MAX.into();
    lrbc_header(&mut b).image_height = u32::MAX.into();
    let err = inspect(&b, LayoutChoice::Auto).unwrap_err();
    assert!(
        matches!(
            err,
            LayoutError::SizeOverflow {
                what: "image region",
                ..
            }
        ),
        "{err}"
    );
}

#[test]
fn a_ring_size_that_is_not_a_power_of_two_is_rejected() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).cmd_ring_size = 1000.into();
    assert_eq!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::BadRingSize {
            field: "cmd_ring_size",
            value: 1000,
            min: MIN_RING_CAPACITY
        })
    );
}

#[test]
fn a_bad_channel_count_is_rejected() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).image_channels = 2.into();
    assert_eq!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::BadImageChannels { channels: 2 })
    );
}

#[test]
fn names_that_are_not_terminated_or_not_utf8_are_rejected() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    let at = plan.names_offset as usize;
    let len = plan.names_bytes.len();
    b[at + len - 1] = b'z';
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::Names(NamesError::NotTerminated { .. }))
    ));
    b[at + len - 1] = 0;
    b[at] = 0xff;
    assert!(matches!(
        inspect(&b, LayoutChoice::Auto),
        Err(LayoutError::Names(NamesError::NotUtf8 { at: 0 }))
    ));
}

#[test]
fn a_non_zero_extension_block_with_the_wrong_total_size_is_read_as_seed_with_a_warning() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b).total_size = (plan.size_bytes + 1).into();
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert_eq!(g.layout, Layout::LrbcV1);
    assert!(g.warnings.iter().any(|w| w.contains("extension block")));
}

#[test]
fn non_zero_reserved_bytes_are_warned_about() {
    let (_, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    lrbc_header(&mut b)._reserved204[6] = 1;
    b[1000] = 1;
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert!(g.warnings.iter().any(|w| w.contains("offset 204")));
    assert!(g.warnings.iter().any(|w| w.contains("512..4096")));
}

#[test]
fn unaligned_control_rings_disable_the_control_channel() {
    let (plan, mut b) = bytes(PlanLayout::Lrbc { ext: true });
    // Shift ctl_c2s by 64 bytes: still inside its own padded pages.
    lrbc_header(&mut b).ctl_c2s_offset = (plan.ctl_c2s_offset + 64).into();
    let g = inspect(&b, LayoutChoice::Auto).unwrap();
    assert!(!g.ctl_page_aligned);
    assert!(g.warnings.iter().any(|w| w.contains("control channel")));
}

#[test]
fn same_shape_notices_a_new_geometry() {
    let (_, b) = bytes(PlanLayout::Lrbc { ext: true });
    let g1 = inspect(&b, LayoutChoice::Auto).unwrap();
    let mut s = spec(PlanLayout::Lrbc { ext: true });
    s.num_envs = 5;
    let p2 = Plan::new(&s).unwrap();
    let g2 = inspect(&p2.initial_bytes(&s), LayoutChoice::Auto).unwrap();
    assert!(g1.same_shape(&g1.clone()));
    assert!(!g1.same_shape(&g2));
}

#[test]
fn plans_refuse_bad_sizes() {
    let mut s = spec(PlanLayout::Lrbc { ext: true });
    s.num_envs = 0;
    assert_eq!(Plan::new(&s), Err(plan::PlanError::ZeroEnvs));
    let mut s = spec(PlanLayout::Lrbc { ext: true });
    s.cmd_ring_size = 3000;
    assert!(matches!(
        Plan::new(&s),
        Err(plan::PlanError::RingSize { .. })
    ));
    let mut s = spec(PlanLayout::Lrbc { ext: true });
    s.image = Some((u32::MAX, u32::MAX, 4));
    s.num_envs = u32::MAX;
    assert!(matches!(Plan::new(&s), Err(plan::PlanError::Overflow(_))));
    let mut s = spec(PlanLayout::Lrbc { ext: true });
    s.max_size_bytes = 8192;
    assert!(matches!(
        Plan::new(&s),
        Err(plan::PlanError::TooLarge { .. })
    ));
}

mod properties {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn inspect_never_panics_on_arbitrary_headers(
            mut header in proptest::collection::vec(any::<u8>(), 4096..4200),
            magic_ok in any::<bool>(),
            total_kind in 0u8..3,
        ) {
            if magic_ok {
                lrbc_header(&mut header).magic = LRBC_MAGIC.into();
                lrbc_header(&mut header).version = 1.into();
            }
            let len = header.len() as u64;
            match total_kind {
                0 => lrbc_header(&mut header).total_size = len.into(),
                1 => lucky_header(&mut header).total_size = len.into(),
                _ => {}
            }
            if let Ok(g) = inspect(&header, LayoutChoice::Auto) {
                for r in &g.regions {
                    prop_assert!(r.end_bytes() <= len);
                }
            }
        }

        #[test]
        fn every_plan_validates(
            envs in 1u32..300, obs in 1u32..64, act in 1u32..16,
            ext in any::<bool>(), lucky in any::<bool>(), img in any::<bool>(),
        ) {
            let layout = if lucky { PlanLayout::Lucky } else { PlanLayout::Lrbc { ext } };
            let mut s = spec(layout);
            s.num_envs = envs;
            s.obs_size = obs;
            s.act_size = act;
            if !img || lucky { s.image = None; }
            let plan = Plan::new(&s).unwrap();
            let g = inspect(&plan.initial_bytes(&s), LayoutChoice::Auto).unwrap();
            let expected = match layout {
                PlanLayout::Lucky => Layout::LuckyrobotsIpc,
                PlanLayout::Lrbc { ext: true } => Layout::LrbcV1Ext,
                PlanLayout::Lrbc { ext: false } => Layout::LrbcV1,
            };
            prop_assert_eq!(g.layout, expected);
            prop_assert_eq!(g.num_envs, envs);
        }
    }
}
