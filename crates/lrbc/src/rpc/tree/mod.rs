//! The generic decoder: any FlatBuffer of the schema into a field tree, driven by the
//! reflection model: no per-message code, so messages added to the schema later decode
//! too. Every read is bounds- and alignment-checked, strings are checked for their
//! terminator and UTF-8, union types must be known: the walk is itself a verifier.

mod render;
mod walk;

pub use render::{clip, display_scalar, scalar_json, vector_element};

use super::schema::{Base, SchemaModel};
use walk::Walker;

/// The deepest nesting accepted.
pub const MAX_DEPTH: u16 = 64;
/// The most nodes one buffer may decode into (guards against shared sub-objects).
pub const MAX_NODES: usize = 200_000;

/// A decoded value. Strings and scalar vectors stay in the buffer (ranges into it).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum NodeValue {
    Bool(bool),
    Int(i64),
    UInt(u64),
    Float(f64),
    Enum {
        value: i64,
        name: Option<&'static str>,
    },
    /// An optional scalar that is absent.
    Null,
    Str {
        start: u32,
        len: u32,
    },
    /// `fields` direct children follow.
    Table {
        fields: u32,
    },
    Struct {
        fields: u32,
    },
    /// `len` elements follow as children (tables, structs, strings).
    Vector {
        len: u32,
    },
    /// `len` scalars at `start` in the buffer, not expanded.
    ScalarVector {
        base: Base,
        /// The enum the scalars are values of, if any.
        enum_index: Option<u32>,
        start: u32,
        len: u32,
    },
    /// The member table follows as the single child.
    Union {
        type_name: &'static str,
    },
}

/// One node of the tree, in preorder.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Node {
    pub depth: u16,
    /// Number of descendants (nodes to skip to reach the next sibling).
    pub subtree: u32,
    /// Field name; empty for vector elements and the root.
    pub name: &'static str,
    /// Type as written in the schema ("ulong", "Vec3", "\[float\]", "MethodId").
    pub type_name: &'static str,
    pub value: NodeValue,
}

/// A buffer decoded into nodes.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FieldTree {
    pub nodes: Vec<Node>,
}

/// Why a buffer is not a valid FlatBuffer of the schema.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    #[error("{what} at byte {at} is outside the {len}-byte buffer")]
    OutOfBounds {
        what: &'static str,
        at: usize,
        len: usize,
    },
    #[error("{what} at byte {at} is misaligned")]
    Misaligned { what: &'static str, at: usize },
    #[error("bad vtable at byte {at}")]
    BadVtable { at: usize },
    #[error("string at byte {at} has no NUL terminator")]
    Unterminated { at: usize },
    #[error("string at byte {at} is not UTF-8")]
    NotUtf8 { at: usize },
    #[error("union {union} has type {value}, unknown to this schema")]
    UnknownUnionType { union: &'static str, value: u8 },
    #[error("nesting deeper than {MAX_DEPTH}")]
    TooDeep,
    #[error("more than {MAX_NODES} values")]
    TooManyNodes,
    #[error("the schema type of {0} is not supported")]
    Unsupported(&'static str),
}

impl FieldTree {
    /// Decodes `buf` (a root table of type `object`) into a tree.
    pub fn decode(
        buf: &[u8],
        schema: &'static SchemaModel,
        object: usize,
    ) -> Result<Self, DecodeError> {
        let mut w = Walker {
            buf,
            schema,
            nodes: Vec::with_capacity(32),
        };
        let obj = schema
            .objects
            .get(object)
            .ok_or(DecodeError::Unsupported("the root"))?;
        let root = w.offset_target(0, "root table")?;
        w.table(root, obj, 0, "")?;
        Ok(Self { nodes: w.nodes })
    }

    /// The direct children of node `idx`, as indices.
    pub fn children(&self, idx: usize) -> impl Iterator<Item = usize> + '_ {
        let end = idx + 1 + self.nodes.get(idx).map_or(0, |n| n.subtree as usize);
        let mut next = idx + 1;
        std::iter::from_fn(move || {
            if next >= end {
                return None;
            }
            let current = next;
            next += 1 + self.nodes[current].subtree as usize;
            Some(current)
        })
    }
}
