//! `dump`: everything in a segment at one moment.

use serde_json::{Map, Value, json};

use super::CliError;
use lrbc::attach::{Attached, Target, attach};
use lrbc::layout::{FieldValue, Geometry, LayoutChoice};
use lrbc::rpc::header::describe;
use lrbc::snapshot::{self, EnvData, Guarded, HotData};

fn floats(values: &[f32]) -> Value {
    Value::Array(values.iter().map(|&v| json!(f64::from(v))).collect())
}

fn bytes_json(values: &[u8]) -> Value {
    Value::Array(values.iter().map(|&v| json!(v)).collect())
}

pub fn run(
    target: &Target,
    choice: LayoutChoice,
    env: Option<u32>,
    as_json: bool,
) -> Result<(), CliError> {
    let a = attach(target, choice)?;
    let g = &a.geometry;
    if let Some(i) = env
        && i >= g.num_envs
    {
        return Err(CliError::Other(format!(
            "--env {i} is out of range: the segment has {} envs (0..{})",
            g.num_envs, g.num_envs
        )));
    }
    let snap = snapshot::guarded_read(&a.segment, g, snapshot::DUMP_ATTEMPTS, |seg| {
        let hot = snapshot::copy_hot(seg, g);
        let env_data = env.and_then(|i| snapshot::copy_env(seg, g, i));
        (hot, env_data)
    });
    for w in &g.warnings {
        eprintln!("warning: {w}");
    }
    if as_json {
        println!("{}", to_json(&a, &snap));
    } else {
        print_text(&a, &snap);
    }
    Ok(())
}

/// The `dump --json` object, with exactly the documented keys.
pub fn to_json(a: &Attached, snap: &Guarded<(HotData, Option<EnvData>)>) -> Value {
    let g = &a.geometry;
    let header: Map<String, Value> = a
        .header_values()
        .into_iter()
        .map(|(f, v)| (f.name.to_string(), v.to_json()))
        .collect();
    let regions: Vec<Value> = g
        .regions
        .iter()
        .map(|r| json!({"name": r.kind.as_str(), "offset": r.offset_bytes, "length": r.length_bytes}))
        .collect();
    let (hot, env_data) = &snap.value;
    let mut out = Map::new();
    out.insert("layout".into(), json!(g.layout.as_str()));
    out.insert("size".into(), json!(g.size_bytes));
    out.insert("header".into(), Value::Object(header));
    out.insert("regions".into(), Value::Array(regions));
    out.insert(
        "names".into(),
        json!({"obs": g.names.obs, "act": g.names.act}),
    );
    out.insert(
        "snapshot".into(),
        json!({
            "consistent": snap.consistent,
            "frame_seq": snap.frame_seq,
            "rewards": floats(&hot.rewards),
            "dones": bytes_json(&hot.dones),
            "truncateds": hot.truncateds.as_deref().map_or(Value::Null, bytes_json),
        }),
    );
    if let Some(e) = env_data {
        out.insert(
            "env".into(),
            json!({"index": e.index, "obs": floats(&e.obs), "act": floats(&e.act)}),
        );
    }
    Value::Object(out)
}

fn mode_name(g: &Geometry) -> &'static str {
    match g.mode {
        Some(0) => "training (lock-step)",
        Some(1) => "inference (free-running)",
        Some(_) => "unknown mode",
        None => "lock-step (luckyrobots)",
    }
}

fn set_envs(flags: &[u8]) -> String {
    let set: Vec<String> = flags
        .iter()
        .enumerate()
        .filter(|(_, f)| **f != 0)
        .map(|(i, _)| i.to_string())
        .collect();
    let shown: Vec<&str> = set.iter().take(16).map(String::as_str).collect();
    let more = if set.len() > 16 { ", …" } else { "" };
    if set.is_empty() {
        format!("0 of {}", flags.len())
    } else {
        format!(
            "{} of {}: envs {}{more}",
            set.len(),
            flags.len(),
            shown.join(", ")
        )
    }
}

fn stats(values: &[f32]) -> String {
    let finite: Vec<f32> = values.iter().copied().filter(|v| v.is_finite()).collect();
    let bad = values.len() - finite.len();
    if finite.is_empty() {
        return format!("no finite values ({bad} NaN/Inf)");
    }
    let min = finite.iter().copied().fold(f32::INFINITY, f32::min);
    let max = finite.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let mean = finite.iter().map(|&v| f64::from(v)).sum::<f64>() / finite.len() as f64;
    let first: Vec<String> = values.iter().take(8).map(|v| format!("{v:.4}")).collect();
    let nan = if bad > 0 {
        format!(", {bad} NaN/Inf")
    } else {
        String::new()
    };
    format!(
        "min {min:.4} mean {mean:.4} max {max:.4}{nan}; first: {}",
        first.join(" ")
    )
}

/// The header table of the text output: a title line, then one line per field, with
/// the meaning of enumerations and flag words.
fn header_lines(a: &Attached) -> Vec<String> {
    let mut lines = vec![format!(
        "  {:>5}  {:>4}  {:<20} {:<22} {:<18} meaning",
        "off", "size", "field", "value", "hex"
    )];
    for (f, v) in a.header_values() {
        let value = v.display();
        let value = if value.len() > 22 {
            format!("{}…", &value[..21])
        } else {
            value
        };
        let hex = match v {
            FieldValue::Blob(_) if v.display().chars().all(|c| c == '0') => "all zero".into(),
            FieldValue::Blob(_) => format!("{} bytes, in full with --json", f.size_bytes),
            _ => v.hex(f.size_bytes),
        };
        let meaning = match v {
            FieldValue::Unsigned(n) => describe(f.name, n).map(|m| format!("({m})")),
            _ => None,
        };
        let line = format!(
            "  {:>5}  {:>4}  {:<20} {:<22} {hex:<18} {}",
            f.offset_bytes,
            f.size_bytes,
            f.name,
            value,
            meaning.unwrap_or_default()
        );
        lines.push(line.trim_end().to_string());
    }
    lines
}

fn print_text(a: &Attached, snap: &Guarded<(HotData, Option<EnvData>)>) {
    let g = &a.geometry;
    println!("segment   {} ({})", a.label(), a.segment.location());
    println!("layout    {}, {} bytes", g.layout, g.size_bytes);
    println!(
        "envs      {} × obs {} × act {}, {}",
        g.num_envs,
        g.obs_size,
        g.act_size,
        mode_name(g)
    );
    println!();
    println!("header");
    for line in header_lines(a) {
        println!("{line}");
    }
    println!();
    println!("regions");
    println!(
        "  {:<12} {:>12} {:>12} {:>12}",
        "name", "offset", "length", "end"
    );
    for r in &g.regions {
        println!(
            "  {:<12} {:>12} {:>12} {:>12}",
            r.kind.as_str(),
            r.offset_bytes,
            r.length_bytes,
            r.end_bytes()
        );
    }
    println!();
    println!("names");
    let list = |v: &[String]| {
        if v.is_empty() {
            "(none)".to_string()
        } else {
            v.join(", ")
        }
    };
    println!("  obs ({}): {}", g.names.obs.len(), list(&g.names.obs));
    println!("  act ({}): {}", g.names.act.len(), list(&g.names.act));
    println!();
    let (hot, env_data) = &snap.value;
    println!(
        "snapshot  frame_seq {}, {}",
        snap.frame_seq,
        if snap.consistent {
            "consistent".to_string()
        } else {
            format!("MAY BE TORN (guard: {:?})", snap.guard)
        }
    );
    println!("  rewards     {}", stats(&hot.rewards));
    println!("  dones       {}", set_envs(&hot.dones));
    match &hot.truncateds {
        Some(t) => println!("  truncateds  {}", set_envs(t)),
        None => println!("  truncateds  unavailable (no extension block)"),
    }
    println!("  resets      {}", set_envs(&hot.resets));
    if let Some(e) = env_data {
        println!();
        println!("env {}", e.index);
        for (i, v) in e.obs.iter().enumerate() {
            println!("  obs {:<24} {v}", g.names.obs_label(i));
        }
        for (i, v) in e.act.iter().enumerate() {
            println!("  act {:<24} {v}", g.names.act_label(i));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use lrbc::layout::plan::PlanLayout;
    use lrbc::testutil::{TestSegment, spec};

    fn line_of<'l>(lines: &'l [String], field: &str) -> &'l str {
        lines
            .iter()
            .find(|l| l.split_whitespace().nth(2) == Some(field))
            .map_or("", String::as_str)
    }

    #[test]
    fn the_header_table_shows_what_enumerations_and_flag_words_mean() {
        let mut s = spec(PlanLayout::Lrbc { ext: true }, 2);
        s.mode = 1;
        let seg = TestSegment::create("dumpmeaning", &s);
        let offset = |name: &str| {
            lrbc::layout::LrbcHeader::FIELDS
                .iter()
                .find(|f| f.name == name)
                .map(|f| f.offset_bytes as u64)
        };
        let flags = offset("service_flags").expect("service_flags in the header");
        assert!(seg.rw.write_at(flags, &(0x7f_u32 | 1 << 9).to_le_bytes()));
        let gpu = offset("gpu_obs_mode").expect("gpu_obs_mode in the header");
        assert!(seg.rw.write_at(gpu, &[5]));
        let lines = header_lines(&seg.attach());
        assert!(lines[0].ends_with("meaning"), "{}", lines[0]);
        assert!(line_of(&lines, "magic").ends_with("(LRBC)"), "{lines:#?}");
        assert!(
            line_of(&lines, "mode").ends_with("(inference)"),
            "{lines:#?}"
        );
        assert!(
            line_of(&lines, "service_flags")
                .ends_with("(Agent Mujoco Telemetry Scene Camera Viewport Debug bit 9)"),
            "{lines:#?}"
        );
        assert!(
            line_of(&lines, "gpu_obs_mode").ends_with("(unknown)"),
            "{lines:#?}"
        );
        assert!(
            line_of(&lines, "gpu_available").ends_with("(no)"),
            "{lines:#?}"
        );
        let envs = line_of(&lines, "num_envs");
        assert!(!envs.is_empty() && !envs.contains('('), "{envs}");
    }
}
