//! Field tables for wire headers: one declaration gives the `#[repr(C)]` struct (read
//! from and written to bytes with zerocopy), its compile-time offset checks against the
//! spec, and a table the dump and the header panel walk without per-field code.

use serde_json::Value;

/// How a header field is typed on the wire and shown to the user.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FieldKind {
    U8,
    U32,
    U64,
    I64,
    /// A u32 shown in hex as well (the magic).
    Magic,
    /// An opaque byte blob shown as hex (`gpu_obs_handle`).
    Blob,
    /// Padding or reserved bytes: zero on the wire, not a named field of the spec.
    Reserved,
}

/// One row of a spec header table.
#[derive(Clone, Copy, Debug)]
pub struct FieldSpec {
    /// The name exactly as in the spec table.
    pub name: &'static str,
    pub offset_bytes: usize,
    pub size_bytes: usize,
    pub kind: FieldKind,
    /// Written with atomic stores by its owner; a tool loads it atomically.
    pub atomic: bool,
    /// The spec's "meaning" column, shortened.
    pub doc: &'static str,
}

/// A decoded field value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FieldValue {
    Unsigned(u64),
    Signed(i64),
    Blob(Vec<u8>),
}

impl FieldSpec {
    /// Decodes this field from a copy of the header that starts at byte 0 of the segment.
    /// Returns `None` when the copy is too short.
    pub fn decode(&self, header: &[u8]) -> Option<FieldValue> {
        let bytes = header.get(self.offset_bytes..self.offset_bytes + self.size_bytes)?;
        Some(match self.kind {
            FieldKind::U8 => FieldValue::Unsigned(u64::from(bytes[0])),
            FieldKind::U32 | FieldKind::Magic => {
                FieldValue::Unsigned(u64::from(u32::from_le_bytes(bytes.try_into().ok()?)))
            }
            FieldKind::U64 => FieldValue::Unsigned(u64::from_le_bytes(bytes.try_into().ok()?)),
            FieldKind::I64 => FieldValue::Signed(i64::from_le_bytes(bytes.try_into().ok()?)),
            FieldKind::Blob | FieldKind::Reserved => FieldValue::Blob(bytes.to_vec()),
        })
    }

    pub fn is_reserved(&self) -> bool {
        self.kind == FieldKind::Reserved
    }
}

impl FieldValue {
    /// The value as JSON: numbers as numbers, blobs as a lowercase hex string.
    pub fn to_json(&self) -> Value {
        match self {
            Self::Unsigned(v) => Value::from(*v),
            Self::Signed(v) => Value::from(*v),
            Self::Blob(b) => Value::from(hex_string(b)),
        }
    }

    /// The value as decimal text (blobs as hex).
    pub fn display(&self) -> String {
        match self {
            Self::Unsigned(v) => v.to_string(),
            Self::Signed(v) => v.to_string(),
            Self::Blob(b) => hex_string(b),
        }
    }

    /// The value in hex, padded to the field's width.
    pub fn hex(&self, size_bytes: usize) -> String {
        match self {
            Self::Unsigned(v) => format!("0x{v:0width$x}", width = size_bytes * 2),
            Self::Signed(v) => format!("0x{:0width$x}", *v as u64, width = size_bytes * 2),
            Self::Blob(b) => hex_string(b),
        }
    }

    pub fn as_u64(&self) -> Option<u64> {
        match self {
            Self::Unsigned(v) => Some(*v),
            Self::Signed(v) => u64::try_from(*v).ok(),
            Self::Blob(_) => None,
        }
    }
}

/// Lowercase hex, no separators.
pub fn hex_string(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        // Writing to a String cannot fail.
        let _ = write!(out, "{b:02x}");
    }
    out
}

/// The bytes of lowercase or uppercase hex digits, two per byte; None for anything else.
pub fn bytes_of_hex(hex: &str) -> Option<Vec<u8>> {
    if !hex.len().is_multiple_of(2) {
        return None;
    }
    (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect()
}

/// Declares a little-endian wire struct whose fields sit at the offsets written next to
/// them. Each offset is checked at compile time, so the struct cannot drift from the
/// spec table it copies. Every field is a byte, a byte array or a zerocopy little-endian
/// integer (alignment 1), so the struct has no padding of its own: it is read with
/// `read_from_prefix` and written with `as_bytes`.
macro_rules! wire_struct {
    (
        $(#[$meta:meta])*
        $vis:vis struct $name:ident (size $size:literal) {
            $( $off:literal $field:ident : $ty:ty = $kind:ident $(, $atomic:ident)? ; $doc:literal )*
        }
    ) => {
        $(#[$meta])*
        #[allow(
            rustdoc::broken_intra_doc_links,
            reason = "a field's doc is the spec's meaning text, whose `f32[num_envs]` is no link"
        )]
        #[repr(C)]
        #[derive(
            Clone,
            Copy,
            Debug,
            zerocopy::FromBytes,
            zerocopy::IntoBytes,
            zerocopy::KnownLayout,
            zerocopy::Immutable,
        )]
        $vis struct $name {
            $( #[doc = $doc] $vis $field: $ty, )*
        }

        const _: () = {
            $( assert!(core::mem::offset_of!($name, $field) == $off); )*
            assert!(core::mem::size_of::<$name>() == $size);
            assert!(core::mem::align_of::<$name>() == 1);
        };

        impl $name {
            /// Size of the struct on the wire.
            pub const SIZE_BYTES: usize = $size;
            /// Every field in wire order, padding included (kind `Reserved`).
            pub const FIELDS: &'static [$crate::layout::fields::FieldSpec] = &[
                $( $crate::layout::fields::FieldSpec {
                    name: stringify!($field),
                    offset_bytes: $off,
                    size_bytes: core::mem::size_of::<$ty>(),
                    kind: $crate::layout::fields::FieldKind::$kind,
                    atomic: wire_struct!(@atomic $($atomic)?),
                    doc: $doc,
                }, )*
            ];
        }
    };
    (@atomic atomic) => { true };
    (@atomic) => { false };
}

pub(crate) use wire_struct;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decode_reads_little_endian_at_the_offset() {
        let spec = FieldSpec {
            name: "x",
            offset_bytes: 2,
            size_bytes: 4,
            kind: FieldKind::U32,
            atomic: false,
            doc: "",
        };
        let bytes = [0, 0, 0x78, 0x56, 0x34, 0x12, 0];
        assert_eq!(spec.decode(&bytes), Some(FieldValue::Unsigned(0x1234_5678)));
        assert_eq!(spec.decode(&bytes[..5]), None);
    }

    #[test]
    fn hex_pads_to_the_field_width() {
        assert_eq!(FieldValue::Unsigned(0x4C52_4243).hex(4), "0x4c524243");
        assert_eq!(FieldValue::Unsigned(1).hex(8), "0x0000000000000001");
        assert_eq!(
            FieldValue::Blob(vec![0xab, 0x01]).to_json(),
            Value::from("ab01")
        );
    }
}
