//! The bodies of the contract's fuzz targets (`fuzz/fuzz_targets/`): the decoders of
//! envelopes, layouts, names and rings. They are here so that `cargo test -p lrbc` runs
//! each over its checked-in corpus (`fuzz/corpus/<target>/`, `tests/fuzz_corpus.rs`) on
//! stable Rust, and the fuzzers (nightly, run by hand) call the very same code. Each body
//! panics only when a property of the code under test fails.

use crate::layout::headers::{LrbcHeader, LuckyHeader, LuckyRingHeader, RingHeader};
use crate::layout::{LRBC_MAGIC, LayoutChoice, RegionKind, RingFormat, RingGeometry, inspect};
use crate::rings::confirm::GIVE_UP_NS;
use crate::rings::{AnyWatcher, WatchEvent};

/// The envelope decoder over arbitrary bytes: verification rejects what it must, and
/// whatever decodes renders to JSON and text without panicking.
pub fn envelope_decode(data: &[u8]) {
    let mut bytes = data.to_vec();
    // Most inputs would stop at the identifier; stamp it on half of them.
    if bytes.len() >= 8 && bytes[0] & 1 == 1 {
        bytes[4..8].copy_from_slice(b"LRPC");
    }
    if let Ok(d) = crate::rpc::decode_envelope(&bytes) {
        // Run for its panics; the value is not checked.
        let _ = d.tree.to_json(&bytes);
        let _ = d.tree.summary(&bytes, 0, 200);
        assert!(d.tree.nodes.len() <= crate::rpc::tree::MAX_NODES);
    }
}

/// Header and region parsing over arbitrary bytes: never panics, and every region of a
/// geometry that validates lies inside the segment.
pub fn layout_inspect(data: &[u8]) {
    let [selector, size_lo, size_hi, rest @ ..] = data else {
        return;
    };
    // A segment of at least the header's 4096 bytes (libFuzzer's inputs are shorter),
    // sometimes smaller, holding the input at its start.
    let extra = usize::from(u16::from_le_bytes([*size_lo, *size_hi])) * 16;
    let len = if selector & 16 != 0 {
        extra % 4200
    } else {
        4096 + extra
    };
    let mut bytes = vec![0u8; len];
    let n = rest.len().min(len);
    bytes[..n].copy_from_slice(&rest[..n]);
    // Give the fuzzer a head start past the magic, version and size checks.
    if bytes.len() >= 8 && selector & 1 == 1 {
        bytes[0..4].copy_from_slice(&LRBC_MAGIC.to_le_bytes());
        bytes[4..8].copy_from_slice(&1u32.to_le_bytes());
    }
    let total = bytes.len() as u64;
    let ext_total = core::mem::offset_of!(LrbcHeader, total_size);
    let lucky_total = core::mem::offset_of!(LuckyHeader, total_size);
    if bytes.len() >= ext_total + 8 && selector & 2 == 2 {
        bytes[ext_total..ext_total + 8].copy_from_slice(&total.to_le_bytes());
    } else if bytes.len() >= lucky_total + 8 && selector & 4 == 4 {
        bytes[lucky_total..lucky_total + 8].copy_from_slice(&total.to_le_bytes());
    }
    let choice = match selector >> 6 {
        0 | 1 => LayoutChoice::Auto,
        2 => LayoutChoice::LrbcV1,
        _ => LayoutChoice::LuckyrobotsIpc,
    };
    if let Ok(g) = inspect(&bytes, choice) {
        for r in &g.regions {
            assert!(r.end_bytes() <= total);
        }
        for ring in &g.rings {
            assert!(ring.capacity_bytes.is_power_of_two());
        }
    }
}

/// The names region parser over arbitrary bytes: never panics; what it accepts
/// re-encodes to the bytes it consumed.
pub fn names_parse(data: &[u8]) {
    if let Ok(parsed) = crate::layout::names::parse(data) {
        assert_eq!(parsed.names.encode(), data[..parsed.consumed_bytes]);
    }
}

/// The ring watchers (LRBC and luckyrobots) over arbitrary ring bytes and positions:
/// never panic, never loop, never deliver an entry larger than the ring, and account
/// for every byte they pass as seen or lost, once a quiet ring has settled.
pub fn ring_watch(data: &[u8]) {
    let Some((&shape, rest)) = data.split_first() else {
        return;
    };
    let capacity = 64u32 << (shape & 7);
    let lucky = shape & 8 != 0;
    let header = if lucky {
        LuckyRingHeader::SIZE_BYTES
    } else {
        RingHeader::SIZE_BYTES
    };
    let mut mem = vec![0u8; header + capacity as usize];
    let n = rest.len().min(mem.len());
    mem[..n].copy_from_slice(&rest[..n]);
    if lucky {
        let at = core::mem::offset_of!(LuckyRingHeader, capacity);
        mem[at..at + 4].copy_from_slice(&capacity.to_le_bytes());
    }
    let ring = RingGeometry {
        kind: RegionKind::CmdC2s,
        format: if lucky {
            RingFormat::Lucky
        } else {
            RingFormat::Lrbc
        },
        offset_bytes: 0,
        capacity_bytes: capacity,
    };
    let mut w = AnyWatcher::new(&mem, ring);
    let start = w.cursor();
    let mut out = Vec::new();
    w.poll(&mem, &mut out, 100_000, 0);
    // The ring never moves: copies that wait for the producer settle once it has been
    // quiet long enough.
    w.poll(&mem, &mut out, 100_000, GIVE_UP_NS);
    assert_eq!(w.held(), 0, "a quiet ring settles every copy");
    let s = w.stats();
    for e in &out {
        if let WatchEvent::Entry { payload, .. } = e {
            assert!(payload.len() <= capacity as usize);
        }
    }
    // A producer position behind the watcher's is a re-initialised ring: the watcher
    // says so and starts over; no bytes were passed.
    if out.iter().any(
        |e| matches!(e, WatchEvent::Malformed { error, .. } if error.contains("re-initialised")),
    ) {
        return;
    }
    let moved = if lucky {
        w.cursor().wrapping_sub(start)
    } else {
        u64::from((w.cursor() as u32).wrapping_sub(start as u32))
    };
    assert_eq!(
        s.bytes + s.lost_bytes,
        moved,
        "every byte passed is seen or lost"
    );
}

/// A fuzz target's checked-in corpus, for the tests that run each body over it on stable
/// Rust (this crate's `tests/fuzz_corpus.rs` and the app's).
pub mod corpus {
    use std::path::{Path, PathBuf};

    /// Why a corpus did not pass, as one line.
    #[derive(Debug, thiserror::Error)]
    pub enum CorpusError {
        #[error("{}: {source}", path.display())]
        Read {
            path: PathBuf,
            source: std::io::Error,
        },
        #[error("{target}: only {inputs} inputs")]
        TooFew { target: String, inputs: usize },
        #[error("{target}: input {} fails", path.display())]
        Fails { target: String, path: PathBuf },
    }

    /// A fuzz target's body.
    pub type Body = fn(&[u8]);

    /// Seed inputs by file name.
    pub type Seeds = Vec<(String, Vec<u8>)>;

    /// The fewest inputs a target's corpus holds.
    pub const MIN_INPUTS: usize = 5;

    /// `fuzz/corpus/<target>/` of the workspace whose root is `root`.
    pub fn dir(root: &Path, target: &str) -> PathBuf {
        root.join("fuzz/corpus").join(target)
    }

    /// Seeds named `seed-<name>`.
    pub fn named(list: Vec<(&str, Vec<u8>)>) -> Seeds {
        list.into_iter()
            .map(|(n, b)| (format!("seed-{n}"), b))
            .collect()
    }

    /// Runs `body` over every input of `dir`, in the order of their names. An error says
    /// why: the folder or an input cannot be read, it holds fewer than [`MIN_INPUTS`], or
    /// an input made the body panic.
    pub fn run(target: &str, dir: &Path, body: Body) -> Result<(), CorpusError> {
        fn read(path: &Path) -> impl FnOnce(std::io::Error) -> CorpusError + '_ {
            move |source| CorpusError::Read {
                path: path.to_path_buf(),
                source,
            }
        }
        let mut files = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(read(dir))? {
            let path = entry.map_err(read(dir))?.path();
            let data = std::fs::read(&path).map_err(read(&path))?;
            files.push((path, data));
        }
        files.sort();
        if files.len() < MIN_INPUTS {
            return Err(CorpusError::TooFew {
                target: target.into(),
                inputs: files.len(),
            });
        }
        for (path, data) in &files {
            if std::panic::catch_unwind(|| body(data)).is_err() {
                return Err(CorpusError::Fails {
                    target: target.into(),
                    path: path.clone(),
                });
            }
        }
        Ok(())
    }

    /// The seeds whose file in `dir` is missing or holds other bytes.
    pub fn stale(dir: &Path, seeds: &Seeds) -> Vec<PathBuf> {
        seeds
            .iter()
            .map(|(name, bytes)| (dir.join(name), bytes))
            .filter(|(path, bytes)| std::fs::read(path).ok().as_ref() != Some(*bytes))
            .map(|(path, _)| path)
            .collect()
    }

    /// Writes `seeds` into `dir`, made if missing.
    pub fn write(dir: &Path, seeds: &Seeds) -> std::io::Result<()> {
        std::fs::create_dir_all(dir)?;
        for (name, bytes) in seeds {
            std::fs::write(dir.join(name), bytes)?;
        }
        Ok(())
    }
}
