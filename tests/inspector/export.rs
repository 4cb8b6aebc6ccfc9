//! `export` of a recording made by the binary (`sim engine` and `sim client` processes,
//! `record`): the Parquet file is read by pandas and pyarrow in an independent Python
//! process (`tests/py/read_export.py`); a truncated copy exports its complete chunks,
//! and the reader of `open` reads the same frames from both files; bad inputs are one
//! line and exit 1.

#![allow(
    clippy::expect_used,
    clippy::unwrap_used,
    reason = "helpers of tests: a step that fails fails the test"
)]

use crate::common;

use std::path::{Path, PathBuf};

use common::{python, record_nan_run, run_inspector, temp_file};
use lrbc_recording::replay::{Damage, ReadError, RecFrame, Recording, StreamItem, read_recording};

fn target_file(tag: &str, ext: &str) -> PathBuf {
    temp_file(&format!("export-{tag}"), ext)
}

/// Records 2 s of an engine with 6 envs (`obs` observations, 2 actions) that writes a
/// NaN at step 20, stepped by a client at 200 Hz, recording envs 0, 2 and 5.
fn record_a_live_run(tag: &str, obs: &str) -> PathBuf {
    record_nan_run(&format!("export-{tag}"), obs).0
}

/// Frames in the chunks of a finished recording that end at or before `cut` (all: None).
fn frames_in(bytes: &[u8], cut: Option<u64>) -> u64 {
    let summary = mcap::Summary::read(bytes).unwrap().unwrap();
    let mut n = 0;
    for index in &summary.chunk_indexes {
        if cut.is_none_or(|c| index.chunk_start_offset + index.chunk_length <= c) {
            n += summary
                .stream_chunk(bytes, index)
                .unwrap()
                .map(Result::unwrap)
                .filter(|m| m.channel.topic == "/lrbc/frame")
                .count() as u64;
        }
    }
    n
}

/// Frames of `path` read by `Recording` (the reader of `open` and the player), checked
/// to be those of the export's pass (`read_recording`) frame by frame, and its
/// unfinished note.
fn both_readers(path: &Path) -> (u64, Option<String>) {
    let mut rec = Recording::open(path).unwrap();
    let (t0, t1) = rec.time_range().unwrap();
    let mut indexed = Vec::new();
    rec.frames_between(t0, t1, |f| {
        indexed.push(f);
        true
    })
    .unwrap();
    let mut streamed = Vec::new();
    let end = read_recording::<ReadError>(
        &mut std::fs::File::open(path).unwrap(),
        |e| {
            if let StreamItem::Frame { log_ns, data } = e {
                streamed.push(RecFrame::decode(log_ns, data).unwrap());
            }
            Ok(())
        },
        |_| {},
    )
    .unwrap();
    let seqs = |v: &[RecFrame]| v.iter().map(|f| f.frame_seq).collect::<Vec<_>>();
    assert_eq!(seqs(&indexed), seqs(&streamed));
    // As text: the recording has NaNs, which equal nothing.
    let text = |v: &[RecFrame]| format!("{v:?}");
    assert!(
        text(&indexed) == text(&streamed),
        "the frames' contents differ"
    );
    assert_eq!(end.truncated, rec.unfinished_at.is_some());
    (indexed.len() as u64, rec.unfinished_note())
}

fn export(args: &[&str]) -> (i32, String, String) {
    run_inspector(&[&["export"], args].concat())
}

fn s(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

#[test]
fn an_export_reads_back_in_pandas_and_pyarrow() {
    let rec = record_a_live_run("py", "5");
    let frames = frames_in(&std::fs::read(&rec).unwrap(), None);
    assert!(frames > 50, "only {frames} frames");
    let out = target_file("py", "parquet");
    let (code, _, stderr) = export(&[&s(&rec), "--parquet", &s(&out)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(stderr.contains(&format!("{} rows", frames * 6)), "{stderr}");
    assert!(!stderr.contains("stops short"), "{stderr}");
    let v = python("read_export.py", &[&s(&out)]);
    assert_eq!(v["rows"], frames * 6, "{v}");
    assert_eq!(v["frames"], frames);
    assert_eq!(v["envs_per_frame"], serde_json::json!([6]));
    assert_eq!(
        v["columns"],
        serde_json::json!([
            "frame_seq",
            "frame_time_ns",
            "sampled_ns",
            "time_s",
            "env",
            "reward",
            "done",
            "truncated",
            "reset",
            "observation",
            "action"
        ])
    );
    assert_eq!(v["types"]["frame_seq"], "uint64");
    assert_eq!(v["types"]["env"], "uint32");
    assert_eq!(v["types"]["reward"], "float");
    assert_eq!(v["types"]["done"], "bool");
    assert_eq!(v["types"]["observation"], "list<element: float not null>");
    // Lock-step: the engine's step 20 publishes frame_seq 20, NaN in env 0 only.
    assert_eq!(
        v["nan_rows"],
        serde_json::json!([{"frame_seq": 20, "env": 0}])
    );
    assert_eq!(v["nan_obs_frames"], serde_json::json!([20]));
    for env in ["0", "2", "5"] {
        assert_eq!(v["obs_lengths"][env], serde_json::json!([5]), "{v}");
        assert_eq!(v["act_lengths"][env], serde_json::json!([2]), "{v}");
        assert!(v["obs_nulls"].get(env).is_none(), "{v}");
    }
    for env in ["1", "3", "4"] {
        assert_eq!(v["obs_lengths"][env], serde_json::json!([]), "{v}");
        assert_eq!(v["obs_nulls"][env], frames, "{v}");
    }
    assert_eq!(v["time_s_first"], 0.0);
    assert_eq!(v["time_s_increasing"], true);
    let m = &v["metadata"];
    let obs_names: Vec<String> =
        serde_json::from_str(m["lrbc.obs_names"].as_str().unwrap()).unwrap();
    let act_names: Vec<String> =
        serde_json::from_str(m["lrbc.act_names"].as_str().unwrap()).unwrap();
    assert_eq!(obs_names.len(), 5, "{m}");
    assert_eq!(act_names.len(), 2, "{m}");
    assert!(obs_names.iter().all(|n| !n.is_empty()), "{m}");
    assert_eq!(m["lrbc.num_envs"], "6");
    assert_eq!(m["lrbc.obs_size"], "5");
    assert_eq!(m["lrbc.act_size"], "2");
    assert_eq!(m["lrbc.recorded_envs"], "0,2,5");
    assert_eq!(m["lrbc.layout"], "lrbc-v1-ext");
    assert!(
        m["lrbc.exported_by"]
            .as_str()
            .unwrap()
            .starts_with("lrbc-inspector ")
    );

    // The same rows as CSV, restricted to envs and a range.
    let csv = target_file("py", "csv");
    let (code, _, stderr) = export(&[&s(&rec), "--csv", &s(&csv), "--envs", "1,2"]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count() as u64, 1 + frames * 2);
    let (code, _, stderr) = export(&[&s(&rec), "--csv", &s(&csv), "--from", "0.5", "--to", "1"]);
    assert_eq!(code, 0, "{stderr}");
    let text = std::fs::read_to_string(&csv).unwrap();
    let times: Vec<f64> = text
        .lines()
        .skip(1)
        .map(|l| l.split(',').nth(3).unwrap().parse().unwrap())
        .collect();
    assert!(!times.is_empty());
    assert!(times.iter().all(|t| (0.5..=1.0).contains(t)), "{times:?}");
    for f in [rec, out, csv] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn files_another_writer_compressed_open_and_export_row_for_row_as_the_original() {
    // Ours (zstd chunks by default), then Python's mcap writer's copies.
    let ours = record_a_live_run("recompressed", "3");
    let csv_of = |file: &Path, tag: &str| {
        let out = target_file(tag, "csv");
        let (code, _, stderr) = export(&[&s(file), "--csv", &s(&out)]);
        assert_eq!(code, 0, "{tag}: {stderr}");
        std::fs::read_to_string(&out).unwrap()
    };
    let original = csv_of(&ours, "recompressed-ours");
    assert!(original.lines().count() > 100, "{original}");
    let (code, info, stderr) = run_inspector(&["open", "--info", &s(&ours)]);
    assert_eq!(code, 0, "{stderr}");
    assert!(info.contains("compression: zstd"), "{info}");
    for kind in ["zstd", "lz4", "none"] {
        let copy = target_file(&format!("recompressed-{kind}"), "mcap");
        let v = python("recompress.py", &[&s(&ours), &s(&copy), kind]);
        assert!(v["messages"].as_u64() > Some(100), "{v}");
        let (code, info, stderr) = run_inspector(&["open", "--info", &s(&copy)]);
        assert_eq!(code, 0, "{kind}: {stderr}");
        assert!(
            info.contains(&format!("compression: {kind}")),
            "{kind}: {info}"
        );
        assert!(info.contains("finished"), "{kind}: {info}");
        assert_eq!(
            csv_of(&copy, &format!("recompressed-{kind}")),
            original,
            "{kind}: the rows differ from the original's"
        );
        let (frames, note) = both_readers(&copy);
        assert_eq!(frames as usize * 6, original.lines().count() - 1, "{kind}");
        assert_eq!(note, None, "{kind}");
    }
}

#[test]
fn a_truncated_copy_exports_its_complete_chunks() {
    // Frames of 12 kB: several chunks of 1 MiB.
    let rec = record_a_live_run("cut", "1000");
    let bytes = std::fs::read(&rec).unwrap();
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    assert!(
        summary.chunk_indexes.len() >= 2,
        "{} chunks",
        summary.chunk_indexes.len()
    );
    // Into the middle of the last chunk with frames: what a killed recorder leaves.
    let last = (summary.chunk_indexes.iter().rev())
        .find(|c| {
            let end = c.chunk_start_offset + c.chunk_length;
            frames_in(&bytes, Some(end)) > frames_in(&bytes, Some(c.chunk_start_offset))
        })
        .unwrap();
    let whole = summary
        .chunk_indexes
        .iter()
        .filter(|c| c.chunk_start_offset < last.chunk_start_offset)
        .count();
    let cut = last.chunk_start_offset + last.chunk_length / 2;
    let copy = target_file("cut-copy", "mcap");
    std::fs::write(&copy, &bytes[..cut as usize]).unwrap();
    let expected = frames_in(&bytes, Some(cut));
    assert!(expected > 0);
    assert!(expected < frames_in(&bytes, None));
    let out = target_file("cut", "csv");
    let (code, _, stderr) = export(&[&s(&copy), "--csv", &s(&out)]);
    assert_eq!(code, 0, "{stderr}");
    let short: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("stops short"))
        .collect();
    assert_eq!(short.len(), 1, "{stderr}");
    assert!(
        short[0].contains(&format!("{whole} complete chunks, {expected} frames")),
        "{stderr}"
    );
    let text = std::fs::read_to_string(&out).unwrap();
    assert_eq!(text.lines().count() as u64, 1 + expected * 6);
    // The reader `open` uses says the same of both files: the frames the pass reads.
    let full = frames_in(&bytes, None);
    assert_eq!(both_readers(&rec), (full, None));
    let (frames, note) = both_readers(&copy);
    assert_eq!(frames, expected);
    assert!(note.unwrap().contains("not finished"));
    let counts = Recording::open(&rec).unwrap().counts().unwrap().unwrap();
    assert_eq!(counts.frames_recorded, full, "{counts:?}");
    assert_eq!(Recording::open(&copy).unwrap().counts().unwrap(), None);
    // An env the recording does not have.
    let (code, _, stderr) = export(&[&s(&rec), "--csv", &s(&out), "--envs", "2,9"]);
    assert_eq!(code, 1);
    assert_eq!(
        stderr.trim(),
        "error: env 9 does not exist (the recording has 6 envs)"
    );
    for f in [rec, copy, out] {
        let _ = std::fs::remove_file(f);
    }
}

#[test]
fn a_damaged_or_unknown_chunk_compression_is_one_error_naming_the_chunk() {
    let rec = record_a_live_run("bad-chunk", "3");
    let bytes = std::fs::read(&rec).unwrap();
    let summary = mcap::Summary::read(&bytes).unwrap().unwrap();
    // The first chunk with messages (the one before holds the channels alone).
    let chunk = (summary.chunk_indexes.iter())
        .find(|c| c.message_end_time > 0)
        .unwrap();
    assert_eq!(chunk.compression, "zstd");
    let at = chunk.chunk_start_offset as usize;
    // The chunk record: opcode and length, then start and end times, uncompressed size
    // and CRC, then the compression's name (length-prefixed), compressed size, data.
    let name = at + 9 + 8 + 8 + 8 + 4;
    assert_eq!(&bytes[name + 4..name + 8], b"zstd");
    let data = name + 8 + 8 + 8;
    let cases = [
        (
            "brot",
            "compressed with \"brot\", which this tool does not read",
        ),
        ("zstd", "(zstd) does not decompress"),
    ];
    for (compression, expected) in cases {
        let mut damaged = bytes.clone();
        damaged[name + 4..name + 8].copy_from_slice(compression.as_bytes());
        if compression == "zstd" {
            // The compressed data's middle, zeroed.
            let len = chunk.compressed_size as usize;
            damaged[data + len / 4..data + len / 2].fill(0);
        }
        let copy = target_file(&format!("bad-chunk-{compression}"), "mcap");
        std::fs::write(&copy, &damaged).unwrap();
        let out = target_file(&format!("bad-chunk-{compression}"), "csv");
        let (code, _, stderr) = export(&[&s(&copy), "--csv", &s(&out)]);
        assert_eq!(code, 1, "{compression}: {stderr}");
        assert_eq!(stderr.lines().count(), 1, "{compression}: {stderr}");
        assert!(
            stderr.contains(&format!("the chunk at byte {at}")),
            "{stderr}"
        );
        assert!(stderr.contains(expected), "{compression}: {stderr}");
        if compression == "brot" {
            assert!(
                !stderr.contains("damaged"),
                "a valid file is not damaged: {stderr}"
            );
        }
        // The reader of `open` and the window says the same of that chunk.
        let mut r = Recording::open(&copy).unwrap();
        let e = r
            .ring_between(chunk.message_start_time, chunk.message_end_time, 10)
            .unwrap_err();
        assert!(matches!(e, Damage::Chunk(_)), "{e}");
        let e = e.to_string();
        assert!(
            e.contains(&format!("the chunk at byte {at}")) && e.contains(expected),
            "{e}"
        );
    }
}

#[test]
fn bad_inputs_are_one_line_and_exit_1() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let out = target_file("bad", "parquet");
    let not_mcap = dir.join("Cargo.toml");
    let other = target_file("other", "mcap");
    let mut w = mcap::WriteOptions::new()
        .profile("ros2")
        .create(std::io::BufWriter::new(
            std::fs::File::create(&other).unwrap(),
        ))
        .unwrap();
    w.finish().unwrap();
    drop(w);
    let cases: [(Vec<String>, &str); 5] = [
        (
            vec![s(&dir.join("no-such.mcap")), "--parquet".into(), s(&out)],
            "no-such.mcap: reading the recording:",
        ),
        (
            vec![s(&not_mcap), "--parquet".into(), s(&out)],
            "Cargo.toml: not an MCAP file",
        ),
        (
            vec![s(&other), "--parquet".into(), s(&out)],
            "not an lrbc recording: its MCAP profile is \"ros2\"",
        ),
        (
            vec![
                s(&other),
                "--parquet".into(),
                s(&dir.join("no-such-dir").join("x.parquet")),
            ],
            "x.parquet: writing:",
        ),
        (
            vec![s(&other), "--csv".into(), s(&other)],
            "writing: it is the recording itself",
        ),
    ];
    for (args, expected) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, stdout, stderr) = export(&args);
        assert_eq!(code, 1, "{args:?}: {stderr}");
        assert!(stdout.is_empty());
        assert_eq!(stderr.lines().count(), 1, "{args:?}: {stderr}");
        assert!(
            stderr.starts_with("error: ") && stderr.contains(expected),
            "{args:?}: {stderr}"
        );
        assert!(!out.exists(), "{args:?} left {}", out.display());
    }
    // A range that ends before it starts is a usage error.
    let (code, _, stderr) = export(&[&s(&other), "--csv", &s(&out), "--from", "2", "--to", "1"]);
    assert_eq!(code, 2, "{stderr}");
    assert_eq!(stderr.trim(), "error: --from (2 s) is after --to (1 s)");
    // The recording named as the output is left as it was.
    assert!(std::fs::metadata(&other).unwrap().len() > 0);
    let _ = std::fs::remove_file(&other);
}
