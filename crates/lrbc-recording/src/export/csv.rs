//! The CSV sink: the Parquet columns, lists as `;`-joined values, null as an empty field.

use std::fs::File;
use std::io::{BufWriter, Write};

use super::{ExportError, ExportFrame, Sink};

/// The header line.
pub const HEADER: &str =
    "frame_seq,frame_time_ns,sampled_ns,time_s,env,reward,done,truncated,reset,observation,action";

pub struct CsvSink {
    out: BufWriter<File>,
    line: String,
}

fn err(e: std::io::Error) -> ExportError {
    ExportError::Output(e.to_string())
}

/// Appends `values` joined by `;`.
pub fn push_list(line: &mut String, values: &[f32]) {
    use std::fmt::Write as _;
    for (i, v) in values.iter().enumerate() {
        if i > 0 {
            line.push(';');
        }
        // Writing to a String cannot fail.
        let _ = write!(line, "{v}");
    }
}

impl CsvSink {
    pub fn new(out: File) -> Result<Self, ExportError> {
        let mut out = BufWriter::with_capacity(1 << 20, out);
        writeln!(out, "{HEADER}").map_err(err)?;
        Ok(Self {
            out,
            line: String::new(),
        })
    }
}

impl Sink for CsvSink {
    fn frame(&mut self, f: &ExportFrame, envs: &[u32]) -> Result<(), ExportError> {
        use std::fmt::Write as _;
        for &env in envs {
            let e = env as usize;
            let line = &mut self.line;
            line.clear();
            let flag = |v: &[u8]| v.get(e).is_some_and(|&b| b != 0);
            // Writing to a String cannot fail.
            let _ = write!(
                line,
                "{},{},{},{},{env},{},{},",
                f.frame_seq,
                f.frame_time_ns,
                f.sampled_ns,
                f.time_s,
                f.rewards.get(e).copied().unwrap_or(f32::NAN),
                flag(&f.dones),
            );
            if let Some(truncateds) = &f.truncateds {
                // Writing to a String cannot fail.
                let _ = write!(line, "{}", flag(truncateds));
            }
            // Writing to a String cannot fail.
            let _ = write!(line, ",{},", flag(&f.resets));
            if let Some((obs, act)) = f.rows_of(env) {
                push_list(line, obs);
                line.push(',');
                push_list(line, act);
            } else {
                line.push(',');
            }
            line.push('\n');
            self.out.write_all(line.as_bytes()).map_err(err)?;
        }
        Ok(())
    }

    fn finish(self: Box<Self>, _metadata: Vec<(String, String)>) -> Result<(), ExportError> {
        self.out
            .into_inner()
            .map(drop)
            .map_err(|e| ExportError::Output(e.error().to_string()))
    }
}
