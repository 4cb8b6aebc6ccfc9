//! The names region (spec 6): observation names, each NUL-terminated, then one extra
//! NUL, then the action names likewise.

/// Observation and action names. Either list may be empty.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct Names {
    pub obs: Vec<String>,
    pub act: Vec<String>,
}

impl Names {
    /// The label of observation channel `i`: its name, or `obs[i]`.
    pub fn obs_label(&self, i: usize) -> String {
        self.obs
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("obs[{i}]"))
    }

    /// The label of action channel `i`: its name, or `act[i]`.
    pub fn act_label(&self, i: usize) -> String {
        self.act
            .get(i)
            .cloned()
            .unwrap_or_else(|| format!("act[{i}]"))
    }

    /// Encodes the lists in the region format (what an engine writes).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        for list in [&self.obs, &self.act] {
            for name in list {
                out.extend_from_slice(name.as_bytes());
                out.push(0);
            }
            out.push(0);
        }
        out
    }
}

/// Why a names region cannot be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum NamesError {
    #[error("the {list} names are not terminated within the region's {size_bytes} bytes")]
    NotTerminated {
        list: &'static str,
        size_bytes: usize,
    },
    #[error("a name at byte {at} is not UTF-8")]
    NotUtf8 { at: usize },
    #[error(
        "a name at byte {at} contains a NUL-free run of {len} bytes; names are limited to {max}"
    )]
    NameTooLong { at: usize, len: usize, max: usize },
}

/// The longest single name accepted.
pub const MAX_NAME_BYTES: usize = 1024;

/// The result of parsing a names region.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParsedNames {
    pub names: Names,
    /// Bytes up to and including the action list's terminating NUL.
    pub consumed_bytes: usize,
    /// Non-zero bytes follow the action list.
    pub trailing_garbage: bool,
}

/// Parses a names region.
pub fn parse(bytes: &[u8]) -> Result<ParsedNames, NamesError> {
    let mut pos = 0;
    let mut lists: [Vec<String>; 2] = [Vec::new(), Vec::new()];
    for (list_index, list_name) in ["observation", "action"].into_iter().enumerate() {
        loop {
            let rest = bytes.get(pos..).unwrap_or_default();
            let Some(len) = rest.iter().position(|&b| b == 0) else {
                return Err(NamesError::NotTerminated {
                    list: list_name,
                    size_bytes: bytes.len(),
                });
            };
            if len == 0 {
                pos += 1;
                break;
            }
            if len > MAX_NAME_BYTES {
                return Err(NamesError::NameTooLong {
                    at: pos,
                    len,
                    max: MAX_NAME_BYTES,
                });
            }
            let name = std::str::from_utf8(&rest[..len])
                .map_err(|e| NamesError::NotUtf8 {
                    at: pos + e.valid_up_to(),
                })?
                .to_owned();
            lists[list_index].push(name);
            pos += len + 1;
        }
    }
    let [obs, act] = lists;
    Ok(ParsedNames {
        names: Names { obs, act },
        consumed_bytes: pos,
        trailing_garbage: bytes[pos..].iter().any(|&b| b != 0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_lists_round_trip_through_the_region_format() {
        let names = Names {
            obs: vec!["cart_x".into(), "pole_θ".into()],
            act: vec!["force".into()],
        };
        let mut bytes = names.encode();
        bytes.extend_from_slice(&[0, 0, 0]);
        let parsed = parse(&bytes).unwrap();
        assert_eq!(parsed.names, names);
        assert_eq!(parsed.consumed_bytes, names.encode().len());
        assert!(!parsed.trailing_garbage);
    }

    #[test]
    fn empty_lists_are_two_nuls() {
        let parsed = parse(&[0, 0]).unwrap();
        assert_eq!(parsed.names, Names::default());
        let parsed = parse(b"\0a\0\0").unwrap();
        assert!(parsed.names.obs.is_empty());
        assert_eq!(parsed.names.act, vec!["a".to_string()]);
    }

    #[test]
    fn a_region_without_the_final_terminator_is_rejected() {
        assert_eq!(
            parse(b"a\0b\0\0c\0"),
            Err(NamesError::NotTerminated {
                list: "action",
                size_bytes: 7
            })
        );
        assert!(matches!(
            parse(b"abc"),
            Err(NamesError::NotTerminated {
                list: "observation",
                ..
            })
        ));
    }

    #[test]
    fn invalid_utf8_reports_the_byte_offset() {
        assert_eq!(
            parse(b"ok\0a\xffb\0\0\0"),
            Err(NamesError::NotUtf8 { at: 4 })
        );
    }

    #[test]
    fn labels_fall_back_to_indices() {
        let names = Names {
            obs: vec!["x".into()],
            act: vec![],
        };
        assert_eq!(names.obs_label(0), "x");
        assert_eq!(names.obs_label(3), "obs[3]");
        assert_eq!(names.act_label(1), "act[1]");
    }

    #[test]
    fn trailing_non_zero_bytes_are_flagged() {
        assert!(parse(b"\0\0x").unwrap().trailing_garbage);
    }
}
