//! A decoded tree as JSON, as a one-line summary, and its scalars as text.

use serde_json::{Map, Value};

use super::{FieldTree, NodeValue};
use crate::rpc::schema::Base;

impl FieldTree {
    /// The tree as JSON: tables and structs as objects, unions as `{"Member": {...}}`,
    /// enums by name (their number when unnamed), `[ubyte]` as a hex string.
    pub fn to_json(&self, buf: &[u8]) -> Value {
        if self.nodes.is_empty() {
            return Value::Null;
        }
        self.json_at(buf, 0)
    }

    fn json_at(&self, buf: &[u8], idx: usize) -> Value {
        let node = &self.nodes[idx];
        match node.value {
            NodeValue::Table { .. } | NodeValue::Struct { .. } => {
                let mut map = Map::new();
                for c in self.children(idx) {
                    map.insert(self.nodes[c].name.to_string(), self.json_at(buf, c));
                }
                Value::Object(map)
            }
            NodeValue::Vector { .. } => {
                Value::Array(self.children(idx).map(|c| self.json_at(buf, c)).collect())
            }
            NodeValue::Union { type_name } => {
                let inner = self
                    .children(idx)
                    .next()
                    .map_or(Value::Null, |c| self.json_at(buf, c));
                let mut map = Map::new();
                map.insert(type_name.to_string(), inner);
                Value::Object(map)
            }
            v => scalar_json(buf, v),
        }
    }

    /// A short one-line rendering of node `idx` for lists.
    pub fn summary(&self, buf: &[u8], idx: usize, max_chars: usize) -> String {
        let mut s = String::new();
        self.summarise(buf, idx, &mut s, max_chars);
        clip(s, max_chars)
    }

    fn summarise(&self, buf: &[u8], idx: usize, out: &mut String, budget: usize) {
        if out.len() > budget {
            return;
        }
        let node = &self.nodes[idx];
        match node.value {
            NodeValue::Table { .. } | NodeValue::Struct { .. } => {
                out.push('{');
                for (i, c) in self.children(idx).enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(self.nodes[c].name);
                    out.push_str(": ");
                    self.summarise(buf, c, out, budget);
                    if out.len() > budget {
                        break;
                    }
                }
                out.push('}');
            }
            NodeValue::Vector { len } => out.push_str(&format!(
                "[{len} × {}]",
                node.type_name.trim_matches(['[', ']'])
            )),
            NodeValue::Union { type_name } => {
                out.push_str(type_name);
                if let Some(c) = self.children(idx).next() {
                    out.push(' ');
                    self.summarise(buf, c, out, budget);
                }
            }
            v => out.push_str(&display_scalar(buf, v)),
        }
    }
}

/// A scalar-like value as JSON.
pub fn scalar_json(buf: &[u8], v: NodeValue) -> Value {
    match v {
        NodeValue::Bool(b) => Value::Bool(b),
        NodeValue::Int(i) => Value::from(i),
        NodeValue::UInt(u) => Value::from(u),
        NodeValue::Float(f) => serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number),
        NodeValue::Enum { value, name } => name.map_or_else(|| Value::from(value), Value::from),
        NodeValue::Null => Value::Null,
        NodeValue::Str { start, len } => Value::from(str_at(buf, start, len)),
        NodeValue::ScalarVector {
            base: Base::UByte | Base::Byte,
            enum_index: None,
            start,
            len,
        } => Value::from(crate::layout::fields::hex_string(
            buf.get(start as usize..(start + len) as usize)
                .unwrap_or_default(),
        )),
        NodeValue::ScalarVector {
            base,
            enum_index,
            start,
            len,
        } => Value::Array(
            (0..len as usize)
                .map(|i| scalar_json(buf, vector_element(buf, base, enum_index, start, i)))
                .collect(),
        ),
        NodeValue::Table { .. }
        | NodeValue::Struct { .. }
        | NodeValue::Vector { .. }
        | NodeValue::Union { .. } => Value::Null,
    }
}

fn str_at(buf: &[u8], start: u32, len: u32) -> &str {
    buf.get(start as usize..(start + len) as usize)
        .and_then(|b| std::str::from_utf8(b).ok())
        .unwrap_or_default()
}

/// Element `i` of a scalar vector (validated at decode time).
pub fn vector_element(
    buf: &[u8],
    base: Base,
    enum_index: Option<u32>,
    start: u32,
    i: usize,
) -> NodeValue {
    let size = base.size();
    let at = start as usize + i * size;
    let Some(b) = buf.get(at..at + size) else {
        return NodeValue::Null;
    };
    let mut v = [0u8; 8];
    v[..size].copy_from_slice(b);
    let raw = u64::from_le_bytes(v);
    let value = match base {
        Base::Bool => NodeValue::Bool(raw != 0),
        Base::Byte => NodeValue::Int(i64::from(raw as u8 as i8)),
        Base::Short => NodeValue::Int(i64::from(raw as u16 as i16)),
        Base::Int => NodeValue::Int(i64::from(raw as u32 as i32)),
        Base::Long => NodeValue::Int(raw as i64),
        Base::Float => NodeValue::Float(f64::from(f32::from_bits(raw as u32))),
        Base::Double => NodeValue::Float(f64::from_bits(raw)),
        _ => NodeValue::UInt(raw),
    };
    if let Some(enum_index) = enum_index {
        let value_i = match value {
            NodeValue::Int(i) => i,
            NodeValue::UInt(u) => u as i64,
            _ => return value,
        };
        let name = crate::rpc::schema::schema()
            .ok()
            .and_then(|s| s.enums.get(enum_index as usize))
            .and_then(|e| e.name_of(value_i));
        return NodeValue::Enum {
            value: value_i,
            name,
        };
    }
    value
}

/// A scalar-like value as display text.
pub fn display_scalar(buf: &[u8], v: NodeValue) -> String {
    match v {
        NodeValue::Bool(b) => b.to_string(),
        NodeValue::Int(i) => i.to_string(),
        NodeValue::UInt(u) => u.to_string(),
        NodeValue::Float(f) => format!("{f}"),
        NodeValue::Enum { value, name } => name.map_or_else(|| value.to_string(), str::to_string),
        NodeValue::Null => "null".into(),
        NodeValue::Str { start, len } => format!("{:?}", str_at(buf, start, len)),
        NodeValue::ScalarVector {
            base,
            start,
            len,
            enum_index,
        } => {
            let shown: Vec<String> = (0..(len as usize).min(8))
                .map(|i| display_scalar(buf, vector_element(buf, base, enum_index, start, i)))
                .collect();
            let more = if len > 8 { ", …" } else { "" };
            format!("[{}{more}] ({len})", shown.join(", "))
        }
        NodeValue::Table { .. } => "{…}".into(),
        NodeValue::Struct { .. } => "{…}".into(),
        NodeValue::Vector { len } => format!("[{len}]"),
        NodeValue::Union { type_name } => type_name.to_string(),
    }
}

/// `s` in at most `max_chars` characters, an ellipsis ending one that was cut.
pub fn clip(s: String, max_chars: usize) -> String {
    if s.chars().count() > max_chars {
        let cut: String = s.chars().take(max_chars.saturating_sub(1)).collect();
        return cut + "…";
    }
    s
}
