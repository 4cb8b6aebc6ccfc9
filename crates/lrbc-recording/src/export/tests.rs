#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "tests: a step that fails fails the test"
)]

use std::io::Cursor;
use std::path::PathBuf;

use ::parquet::file::reader::{FileReader, SerializedFileReader};

use super::synthetic::{self, Spec};
use super::*;

fn spec(frames: u64) -> Spec {
    Spec::small(frames, Some(20))
}

fn recording(spec: &Spec) -> Vec<u8> {
    synthetic::write(spec, Cursor::new(Vec::new()))
        .unwrap()
        .0
        .into_inner()
}

fn temp(name: &str) -> PathBuf {
    std::env::temp_dir().join(format!("lrbc-export-{}-{name}", std::process::id()))
}

fn run(
    bytes: &[u8],
    format: ExportFormat,
    options: &ExportOptions,
    out: &PathBuf,
) -> Result<ExportSummary, ExportError> {
    let file = std::fs::File::create(out).unwrap();
    export(
        &mut Cursor::new(bytes),
        sink(format, file)?,
        options,
        |_| {},
    )
}

#[test]
fn parquet_has_a_row_per_frame_and_env_and_the_names_as_metadata() {
    let out = temp("all.parquet");
    let s = run(
        &recording(&spec(300)),
        ExportFormat::Parquet,
        &ExportOptions::default(),
        &out,
    )
    .unwrap();
    assert_eq!((s.frames_read, s.frames_exported, s.rows), (300, 300, 1800));
    assert!(!s.end.truncated && s.end.chunks > 1, "{s:?}");
    let reader = SerializedFileReader::new(std::fs::File::open(&out).unwrap()).unwrap();
    let meta = reader.metadata().file_metadata();
    assert_eq!(meta.num_rows(), 1800);
    assert_eq!(meta.schema_descr().num_columns(), 11);
    let kv: BTreeMap<_, _> = meta
        .key_value_metadata()
        .unwrap()
        .iter()
        .map(|kv| (kv.key.clone(), kv.value.clone().unwrap_or_default()))
        .collect();
    assert_eq!(
        kv["lrbc.obs_names"],
        r#"["obs_0","obs_1","obs_2","obs_3","obs_4"]"#
    );
    assert_eq!(kv["lrbc.act_names"], r#"["act_0","act_1"]"#);
    assert_eq!(kv["lrbc.num_envs"], "6");
    assert_eq!(kv["lrbc.recorded_envs"], "0,2,5");
    assert!(kv["lrbc.exported_by"].starts_with("lrbc-inspector "));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn envs_and_a_time_range_restrict_the_rows() {
    let out = temp("range.csv");
    let options = ExportOptions {
        envs: Some(vec![1, 2]),
        // Frames are 10 ms apart: frames 1..=300 are at 0 to 2.99 s.
        from_s: Some(1.0),
        to_s: Some(1.5),
    };
    let s = run(&recording(&spec(300)), ExportFormat::Csv, &options, &out).unwrap();
    assert_eq!((s.frames_exported, s.rows), (51, 102));
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some(csv::HEADER));
    let first: Vec<&str> = lines.next().unwrap().split(',').collect();
    // Frame 101, env 1: not recorded, so both lists are empty fields.
    assert_eq!(first[0], "101");
    assert_eq!(first[3], "1");
    assert_eq!(first[4], "1");
    assert_eq!(first[7], "false");
    assert_eq!((first[9], first[10]), ("", ""));
    let second: Vec<&str> = lines.next().unwrap().split(',').collect();
    assert_eq!(second[4], "2");
    assert_eq!(second[9].split(';').count(), 5);
    assert_eq!(second[10].split(';').count(), 2);
    let _ = std::fs::remove_file(&out);
}

#[test]
fn the_nan_reward_is_kept() {
    let out = temp("nan.csv");
    run(
        &recording(&spec(30)),
        ExportFormat::Csv,
        &ExportOptions {
            envs: Some(vec![0]),
            ..ExportOptions::default()
        },
        &out,
    )
    .unwrap();
    let text = std::fs::read_to_string(&out).unwrap();
    let row = text.lines().nth(20).unwrap();
    assert!(row.starts_with("20,"), "{row}");
    assert_eq!(row.split(',').nth(5), Some("NaN"));
    assert!(row.split(',').nth(9).unwrap().starts_with("NaN;"));
    let _ = std::fs::remove_file(&out);
}

/// Frames in the chunks that end at or before `cut`.
fn frames_in_chunks_before(bytes: &[u8], cut: u64) -> u64 {
    let summary = mcap::Summary::read(bytes).unwrap().unwrap();
    let mut n = 0;
    for index in &summary.chunk_indexes {
        if index.chunk_start_offset + index.chunk_length <= cut {
            n += summary.stream_chunk(bytes, index).unwrap().count() as u64;
        }
    }
    n
}

#[test]
fn a_truncated_file_gives_its_complete_chunks() {
    let bytes = recording(&spec(300));
    let out = temp("cut.parquet");
    for cut in [bytes.len() / 3, bytes.len() / 2, bytes.len() - 40] {
        let s = run(
            &bytes[..cut],
            ExportFormat::Parquet,
            &ExportOptions::default(),
            &out,
        )
        .unwrap();
        assert!(s.end.truncated, "{cut}: {s:?}");
        let expected = frames_in_chunks_before(&bytes, cut as u64);
        assert!(expected > 0);
        assert_eq!(s.frames_read, expected, "{cut}");
        assert_eq!(s.rows, expected * 6);
    }
    let _ = std::fs::remove_file(&out);
}

#[test]
fn a_chunk_its_writer_never_closed_ends_the_export_there() {
    let bytes = recording(&spec(300));
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    let third = &summary.chunk_indexes[2];
    // What a killed recorder leaves: the opcode and placeholder length of its chunk,
    // and some of its bytes.
    let start = third.chunk_start_offset as usize;
    let mut cut = bytes[..start].to_vec();
    cut.push(0x06);
    cut.extend_from_slice(&u64::MAX.to_le_bytes());
    cut.extend_from_slice(&[0xff; 100]);
    let out = temp("killed.csv");
    let s = run(&cut, ExportFormat::Csv, &ExportOptions::default(), &out).unwrap();
    assert!(s.end.truncated);
    assert_eq!(s.end.chunks, 2);
    assert_eq!(s.frames_read, frames_in_chunks_before(&bytes, start as u64));
    let _ = std::fs::remove_file(&out);
}

#[test]
fn bad_inputs_are_typed_errors() {
    let out = temp("bad.csv");
    let e = |bytes: &[u8], options: &ExportOptions| {
        run(bytes, ExportFormat::Csv, options, &out).unwrap_err()
    };
    assert!(matches!(
        e(b"", &ExportOptions::default()),
        ExportError::NotMcap
    ));
    assert!(matches!(
        e(b"PAR1 not mcap at all", &ExportOptions::default()),
        ExportError::NotMcap
    ));
    let mut other = mcap::WriteOptions::new()
        .profile("ros2")
        .create(Cursor::new(Vec::new()))
        .unwrap();
    other.finish().unwrap();
    let other = other.into_inner().into_inner();
    assert!(matches!(
        e(&other, &ExportOptions::default()),
        ExportError::NotLrbc(_)
    ));
    let bad_env = ExportOptions {
        envs: Some(vec![6]),
        ..ExportOptions::default()
    };
    let msg = e(&recording(&spec(3)), &bad_env).to_string();
    assert_eq!(msg, "env 6 does not exist (the recording has 6 envs)");
    let _ = std::fs::remove_file(&out);
}

#[test]
fn cut_or_flipped_bytes_never_panic() {
    let bytes = recording(&Spec {
        chunk_size: Some(1024),
        ..spec(40)
    });
    let out = temp("damaged.csv");
    let mut state = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let whole = run(
        &bytes,
        ExportFormat::Parquet,
        &ExportOptions::default(),
        &out,
    )
    .unwrap()
    .rows;
    let (mut exported, mut refused) = (0, 0);
    for _ in 0..300 {
        let mut damaged = bytes.clone();
        let cut = (next() % bytes.len() as u64) as usize;
        damaged.truncate(cut.max(1));
        for _ in 0..(next() % 4) {
            let at = (next() % damaged.len() as u64) as usize;
            damaged[at] ^= 1 << (next() % 8);
        }
        // Rows of the frames that read, never more than the whole file's; or one line.
        match run(
            &damaged,
            ExportFormat::Parquet,
            &ExportOptions::default(),
            &out,
        ) {
            Ok(s) => {
                exported += 1;
                assert!(s.rows <= whole, "{} rows of {whole}", s.rows);
            }
            Err(e) => {
                refused += 1;
                let line = e.to_string();
                assert!(!line.is_empty() && !line.contains('\n'), "{line:?}");
            }
        }
    }
    // Cuts inside the file export its complete chunks; early cuts are refused.
    assert!(
        exported > 0 && refused > 0,
        "{exported} exported, {refused} refused"
    );
    let _ = std::fs::remove_file(&out);
}

/// An MCAP file of profile `profile` whose `/lrbc/frame` channel has `schema`.
fn mcap_with(profile: &str, schema: &str) -> Vec<u8> {
    let mut w = mcap::WriteOptions::new()
        .profile(profile)
        .create(Cursor::new(Vec::new()))
        .unwrap();
    let s = w.add_schema(schema, "flatbuffer", b"").unwrap();
    let c = w
        .add_channel(
            s,
            crate::format::FRAME_TOPIC,
            "flatbuffer",
            &BTreeMap::new(),
        )
        .unwrap();
    let header = mcap::records::MessageHeader {
        channel_id: c,
        sequence: 1,
        log_time: 1,
        publish_time: 1,
    };
    w.write_to_known_channel(&header, b"x").unwrap();
    w.finish().unwrap();
    w.into_inner().into_inner()
}

#[test]
fn export_and_open_refuse_the_same_files_with_the_same_reason() {
    let out = temp("refused.csv");
    let file = temp("refused.mcap");
    let cases = [
        (
            mcap_with("ros2", crate::format::FRAME_SCHEMA),
            "its MCAP profile is \"ros2\"",
        ),
        (
            mcap_with(crate::format::PROFILE, "other.Frame"),
            "has the schema \"other.Frame\"",
        ),
    ];
    for (bytes, why) in cases {
        let e = run(&bytes, ExportFormat::Csv, &ExportOptions::default(), &out).unwrap_err();
        assert!(matches!(e, ExportError::NotLrbc(_)), "{e}");
        assert!(e.to_string().contains(why), "{e}");
        std::fs::write(&file, &bytes).unwrap();
        let e = replay::Recording::open(&file).unwrap_err().to_string();
        assert!(
            e.contains("not an lrbc recording") && e.contains(why),
            "{e}"
        );
    }
    let _ = std::fs::remove_file(&out);
    let _ = std::fs::remove_file(&file);
}
