//! The compression of a recording's chunks: zstd by default, as every other MCAP writer
//! (the `mcap` CLI, libmcap, Foxglove's exports); lz4 or none when asked. Writers name
//! it ([`Compression`]); readers decompress a chunk whatever it is
//! ([`decompress_chunk`]), and an unknown compression or a damaged chunk is one error
//! naming the chunk's offset.

use std::borrow::Cow;

/// How a recording's chunks are compressed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compression {
    None,
    /// zstd at a level of 1 (fastest) to 19.
    Zstd {
        level: u8,
    },
    Lz4,
}

/// The zstd level of recordings unless another is asked for: level 3 makes files about
/// 1 % smaller for more CPU time (docs/benchmarks.md).
pub const DEFAULT_ZSTD_LEVEL: u8 = 1;

impl Default for Compression {
    /// zstd at [`DEFAULT_ZSTD_LEVEL`]; none in a build without the `compression` feature.
    fn default() -> Self {
        if cfg!(feature = "compression") {
            Self::Zstd {
                level: DEFAULT_ZSTD_LEVEL,
            }
        } else {
            Self::None
        }
    }
}

/// Why this build has no compression.
pub const NO_COMPRESSION: &str =
    "this build reads and writes no compressed chunks (built without the `compression` feature)";

impl Compression {
    /// What `--compression KIND --compression-level N` ask for: KIND `zstd` (when not
    /// given), `lz4` or `none`; the level, zstd's only, [`DEFAULT_ZSTD_LEVEL`] when not
    /// given. The error says what is wrong, for a usage error of one line.
    pub fn asked(kind: Option<&str>, level: Option<u8>) -> Result<Self, CompressionAsked> {
        match (kind.unwrap_or("zstd"), level) {
            ("zstd", level) => Ok(Self::Zstd {
                level: level.unwrap_or(DEFAULT_ZSTD_LEVEL),
            }),
            (other @ ("lz4" | "none"), Some(_)) => Err(CompressionAsked::LevelOf(other.into())),
            ("lz4", None) => Ok(Self::Lz4),
            ("none", None) => Ok(Self::None),
            (other, _) => Err(CompressionAsked::Unknown(other.into())),
        }
    }

    /// The chunk records' name of it: "", "zstd" or "lz4".
    pub fn name(self) -> &'static str {
        match self {
            Self::None => "",
            Self::Zstd { .. } => "zstd",
            Self::Lz4 => "lz4",
        }
    }
}

/// `options` with chunks compressed as `compression` says, on the thread that writes
/// (never a pool of the compressor's own); an error in a build without compression.
#[cfg(feature = "compression")]
pub fn write_options(
    options: mcap::WriteOptions,
    compression: Compression,
) -> Result<mcap::WriteOptions, &'static str> {
    let options = options.compression_threads(0);
    Ok(match compression {
        Compression::None => options.compression(None),
        Compression::Zstd { level } => options
            .compression(Some(mcap::Compression::Zstd))
            .compression_level(u32::from(level.max(1))),
        Compression::Lz4 => options.compression(Some(mcap::Compression::Lz4)),
    })
}

#[cfg(not(feature = "compression"))]
pub fn write_options(
    options: mcap::WriteOptions,
    compression: Compression,
) -> Result<mcap::WriteOptions, &'static str> {
    match compression {
        Compression::None => Ok(options.compression(None)),
        _ => Err(NO_COMPRESSION),
    }
}

/// The records of a chunk as written: `data` as it is when the chunk at byte `offset` of
/// its file is not compressed, else decompressed; an error naming the offset when the
/// compression is unknown to this build, or the data does not decompress to the size
/// the chunk gives (a cut or damaged chunk).
pub fn decompress_chunk<'a>(
    offset: u64,
    compression: &str,
    uncompressed_size: u64,
    data: &'a [u8],
    limit: u64,
) -> Result<Cow<'a, [u8]>, ChunkError> {
    if compression.is_empty() {
        return Ok(Cow::Borrowed(data));
    }
    let mut d = ChunkDecompressor::default();
    d.records(offset, compression, uncompressed_size, data, limit)?;
    Ok(Cow::Owned(d.buf))
}

/// A compression asked for that cannot be used, as one line (a usage error).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CompressionAsked {
    #[error("--compression-level is zstd's; --compression {0} has none")]
    LevelOf(String),
    #[error("--compression {0}: not a compression (zstd, lz4 or none)")]
    Unknown(String),
}

/// A chunk that cannot be read, as one line naming its offset.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ChunkError {
    #[error(
        "the chunk at byte {offset} says it holds {size} bytes, over the {limit} read: the file is damaged there"
    )]
    Oversized { offset: u64, size: u64, limit: u64 },
    #[error(
        "the chunk at byte {offset} is compressed with {compression:?}, which this tool does not read (zstd, lz4 and uncompressed chunks are read)"
    )]
    Unknown { offset: u64, compression: String },
    #[error(
        "the chunk at byte {offset} ({compression}) does not decompress: {cause}: the file is damaged there"
    )]
    Damaged {
        offset: u64,
        compression: String,
        /// The decompressor's words.
        cause: String,
    },
    #[error(
        "the chunk at byte {offset} ({compression}) decompresses to {got} bytes, not the {size} it gives: the file is damaged there"
    )]
    WrongSize {
        offset: u64,
        compression: String,
        got: usize,
        size: usize,
    },
}

/// [`decompress_chunk`] for a reader of many chunks: one buffer and one zstd context kept
/// from chunk to chunk, so that a pass over a file allocates (and faults in) neither per
/// chunk.
#[derive(Default)]
pub struct ChunkDecompressor {
    buf: Vec<u8>,
    #[cfg(feature = "compression")]
    zstd: Option<zstd::bulk::Decompressor<'static>>,
}

impl std::fmt::Debug for ChunkDecompressor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkDecompressor")
            .field("buf", &self.buf.capacity())
            .finish_non_exhaustive()
    }
}

impl ChunkDecompressor {
    /// The records of the chunk at byte `offset` (see [`decompress_chunk`]): `data` when
    /// it is not compressed, else this decompressor's buffer.
    pub fn records<'a>(
        &'a mut self,
        offset: u64,
        compression: &str,
        uncompressed_size: u64,
        data: &'a [u8],
        limit: u64,
    ) -> Result<&'a [u8], ChunkError> {
        if compression.is_empty() {
            return Ok(data);
        }
        let oversized = ChunkError::Oversized {
            offset,
            size: uncompressed_size,
            limit,
        };
        if uncompressed_size > limit {
            return Err(oversized);
        }
        let size = usize::try_from(uncompressed_size).map_err(|_| oversized)?;
        let done = match compression {
            "zstd" | "lz4" => self.decompress(compression, size, data),
            other => {
                return Err(ChunkError::Unknown {
                    offset,
                    compression: other.into(),
                });
            }
        };
        done.map_err(|e| ChunkError::Damaged {
            offset,
            compression: compression.into(),
            cause: e.to_string(),
        })?;
        if self.buf.len() != size {
            return Err(ChunkError::WrongSize {
                offset,
                compression: compression.into(),
                got: self.buf.len(),
                size,
            });
        }
        Ok(&self.buf)
    }

    /// Decompresses `data` into the buffer, `size` bytes expected (more is an error).
    #[cfg(feature = "compression")]
    fn decompress(
        &mut self,
        compression: &str,
        size: usize,
        data: &[u8],
    ) -> Result<(), std::io::Error> {
        use std::io::Read as _;
        self.buf.clear();
        if compression == "zstd" {
            // Room for exactly what the chunk gives: zstd refuses to write more.
            self.buf.reserve(size);
            let zstd = match &mut self.zstd {
                Some(z) => z,
                None => self.zstd.insert(zstd::bulk::Decompressor::new()?),
            };
            return zstd.decompress_to_buffer(data, &mut self.buf).map(drop);
        }
        // An LZ4 frame; a byte more than the chunk gives is read to see that it ends there.
        lz4::Decoder::new(data)
            .and_then(|d| d.take(size as u64 + 1).read_to_end(&mut self.buf))
            .map(drop)
    }

    #[cfg(not(feature = "compression"))]
    fn decompress(
        &mut self,
        _compression: &str,
        _size: usize,
        _data: &[u8],
    ) -> Result<(), std::io::Error> {
        Err(std::io::Error::other(NO_COMPRESSION))
    }
}

/// Compresses `data` as an MCAP writer would a chunk's records (for the readers' tests
/// and the benchmarks' files written by other means).
#[cfg(feature = "compression")]
pub fn compress_chunk(compression: Compression, data: &[u8]) -> std::io::Result<Vec<u8>> {
    use std::io::Write as _;
    match compression {
        Compression::None => Ok(data.to_vec()),
        Compression::Zstd { level } => zstd::bulk::compress(data, i32::from(level)),
        Compression::Lz4 => {
            let mut e = lz4::EncoderBuilder::new().build(Vec::new())?;
            e.write_all(data)?;
            let (out, result) = e.finish();
            result.map(|()| out)
        }
    }
}

#[cfg(all(test, feature = "compression"))]
mod tests {
    use super::*;

    fn records() -> Vec<u8> {
        (0..200_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect()
    }

    #[test]
    fn zstd_lz4_and_none_give_back_the_chunk() {
        let data = records();
        for c in [Compression::None, Compression::default(), Compression::Lz4] {
            let packed = compress_chunk(c, &data).unwrap();
            if c != Compression::None {
                assert!(packed.len() < data.len() / 4, "{c:?}: {}", packed.len());
            }
            let back = decompress_chunk(100, c.name(), data.len() as u64, &packed, 1 << 30)
                .unwrap_or_else(|e| panic!("{c:?}: {e}"));
            assert_eq!(back.as_ref(), data.as_slice(), "{c:?}");
        }
    }

    #[test]
    fn a_cut_chunk_or_an_unknown_compression_is_an_error_naming_the_offset() {
        let data = records();
        for c in [Compression::default(), Compression::Lz4] {
            let packed = compress_chunk(c, &data).unwrap();
            let cut = &packed[..packed.len() / 2];
            let e = decompress_chunk(4242, c.name(), data.len() as u64, cut, 1 << 30)
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("byte 4242") && e.contains("damaged"),
                "{c:?}: {e}"
            );
            // A size that is not the chunk's.
            let e = decompress_chunk(7, c.name(), data.len() as u64 - 1, &packed, 1 << 30)
                .unwrap_err()
                .to_string();
            assert!(e.contains("byte 7"), "{c:?}: {e}");
        }
        let e = decompress_chunk(99, "brotli", 10, b"xx", 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.contains("byte 99") && e.contains("\"brotli\""), "{e}");
        let e = decompress_chunk(5, "zstd", 1 << 40, b"xx", 1 << 30)
            .unwrap_err()
            .to_string();
        assert!(e.contains("byte 5"), "{e}");
    }

    #[test]
    fn one_decompressor_reads_chunk_after_chunk_and_a_roomy_buffer_hides_no_damage() {
        let big = records();
        let small: Vec<u8> = big[..1000].to_vec();
        for c in [Compression::default(), Compression::Lz4] {
            let mut d = ChunkDecompressor::default();
            for data in [&big, &small, &big, &small] {
                let packed = compress_chunk(c, data).unwrap();
                let back = d
                    .records(1, c.name(), data.len() as u64, &packed, 1 << 30)
                    .unwrap_or_else(|e| panic!("{c:?}: {e}"));
                assert_eq!(back, data.as_slice(), "{c:?}");
            }
            // After a big chunk the buffer has room to spare: a small chunk that says it
            // holds less than it does is still refused.
            let packed = compress_chunk(c, &big).unwrap();
            d.records(2, c.name(), big.len() as u64, &packed, 1 << 30)
                .unwrap();
            let packed = compress_chunk(c, &small).unwrap();
            let e = d
                .records(3, c.name(), small.len() as u64 - 1, &packed, 1 << 30)
                .unwrap_err()
                .to_string();
            assert!(e.contains("byte 3") && e.contains("damaged"), "{c:?}: {e}");
            // And an uncompressed chunk is the data itself.
            assert_eq!(d.records(4, "", 3, b"abc", 1 << 30).unwrap(), b"abc");
        }
    }
}

#[cfg(test)]
mod asked_tests {
    use super::{Compression, DEFAULT_ZSTD_LEVEL};

    #[test]
    fn the_options_ask_for_a_compression_and_a_level_only_of_zstd() {
        assert_eq!(
            Compression::asked(None, None),
            Ok(Compression::Zstd {
                level: DEFAULT_ZSTD_LEVEL
            })
        );
        assert_eq!(
            Compression::asked(Some("zstd"), Some(9)),
            Ok(Compression::Zstd { level: 9 })
        );
        assert_eq!(Compression::asked(Some("lz4"), None), Ok(Compression::Lz4));
        assert_eq!(
            Compression::asked(Some("none"), None),
            Ok(Compression::None)
        );
        assert_eq!(
            Compression::asked(Some("lz4"), Some(3))
                .unwrap_err()
                .to_string(),
            "--compression-level is zstd's; --compression lz4 has none"
        );
        assert!(Compression::asked(Some("gzip"), None).is_err());
    }
}
