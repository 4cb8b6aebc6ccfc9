//! The verifying walk over a buffer that builds a [`FieldTree`]'s nodes.

use super::{DecodeError, MAX_DEPTH, MAX_NODES, Node, NodeValue};
use crate::rpc::schema::{Base, FieldModel, ObjectModel, SchemaModel, TypeModel};

/// Walks a buffer, verifying every read, and appends the nodes it finds.
pub(super) struct Walker<'a> {
    pub buf: &'a [u8],
    pub schema: &'static SchemaModel,
    pub nodes: Vec<Node>,
}

type R<T> = Result<T, DecodeError>;

impl Walker<'_> {
    fn bytes(&self, at: usize, n: usize, what: &'static str) -> R<&[u8]> {
        at.checked_add(n)
            .and_then(|end| self.buf.get(at..end))
            .ok_or(DecodeError::OutOfBounds {
                what,
                at,
                len: self.buf.len(),
            })
    }

    fn aligned(&self, at: usize, align: usize, what: &'static str) -> R<()> {
        if align > 1 && !at.is_multiple_of(align) {
            return Err(DecodeError::Misaligned { what, at });
        }
        Ok(())
    }

    fn u16_at(&self, at: usize, what: &'static str) -> R<u16> {
        let b = self.bytes(at, 2, what)?;
        Ok(u16::from_le_bytes([b[0], b[1]]))
    }

    fn u32_at(&self, at: usize, what: &'static str) -> R<u32> {
        let b = self.bytes(at, 4, what)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Where the uoffset stored at `at` points.
    pub(super) fn offset_target(&self, at: usize, what: &'static str) -> R<usize> {
        self.aligned(at, 4, what)?;
        let off = self.u32_at(at, what)? as usize;
        let target = at.checked_add(off).ok_or(DecodeError::OutOfBounds {
            what,
            at,
            len: self.buf.len(),
        })?;
        if off == 0 || target >= self.buf.len() {
            return Err(DecodeError::OutOfBounds {
                what,
                at: target,
                len: self.buf.len(),
            });
        }
        Ok(target)
    }

    fn push(
        &mut self,
        depth: u16,
        name: &'static str,
        type_name: &'static str,
        value: NodeValue,
    ) -> R<usize> {
        if self.nodes.len() >= MAX_NODES {
            return Err(DecodeError::TooManyNodes);
        }
        self.nodes.push(Node {
            depth,
            subtree: 0,
            name,
            type_name,
            value,
        });
        Ok(self.nodes.len() - 1)
    }

    fn close(&mut self, idx: usize) {
        self.nodes[idx].subtree = (self.nodes.len() - idx - 1) as u32;
    }

    fn scalar(&self, at: usize, base: Base, enum_index: Option<u32>) -> R<NodeValue> {
        let size = base.size();
        self.aligned(at, size, "scalar")?;
        let b = self.bytes(at, size, "scalar")?;
        let raw = |n: usize| {
            let mut v = [0u8; 8];
            v[..n].copy_from_slice(&b[..n]);
            u64::from_le_bytes(v)
        };
        let v = match base {
            Base::Bool => NodeValue::Bool(b[0] != 0),
            Base::Byte => NodeValue::Int(i64::from(b[0] as i8)),
            Base::Short => NodeValue::Int(i64::from(raw(2) as u16 as i16)),
            Base::Int => NodeValue::Int(i64::from(raw(4) as u32 as i32)),
            Base::Long => NodeValue::Int(raw(8) as i64),
            Base::UType | Base::UByte | Base::UShort | Base::UInt | Base::ULong => {
                NodeValue::UInt(raw(size))
            }
            Base::Float => NodeValue::Float(f64::from(f32::from_bits(raw(4) as u32))),
            Base::Double => NodeValue::Float(f64::from_bits(raw(8))),
            _ => return Err(DecodeError::Unsupported("a non-scalar")),
        };
        Ok(self.enumify(v, enum_index))
    }

    fn enumify(&self, v: NodeValue, enum_index: Option<u32>) -> NodeValue {
        let Some(enum_index) = enum_index else {
            return v;
        };
        let value = match v {
            NodeValue::Int(i) => i,
            NodeValue::UInt(u) => u as i64,
            NodeValue::Bool(b) => i64::from(b),
            other => return other,
        };
        let name = self
            .schema
            .enums
            .get(enum_index as usize)
            .and_then(|e| e.name_of(value));
        NodeValue::Enum { value, name }
    }

    fn default_value(&self, f: &'static FieldModel) -> NodeValue {
        if f.optional {
            return NodeValue::Null;
        }
        let v = match f.ty.base {
            Base::Bool => NodeValue::Bool(f.default_integer != 0),
            Base::Float | Base::Double => NodeValue::Float(f.default_real),
            Base::Byte | Base::Short | Base::Int | Base::Long => NodeValue::Int(f.default_integer),
            _ => NodeValue::UInt(f.default_integer as u64),
        };
        self.enumify(v, f.ty.index)
    }

    fn string(&mut self, at: usize, depth: u16, name: &'static str) -> R<()> {
        self.aligned(at, 4, "string")?;
        let len = self.u32_at(at, "string length")? as usize;
        let start = at + 4;
        let bytes = self.bytes(start, len, "string")?;
        if std::str::from_utf8(bytes).is_err() {
            return Err(DecodeError::NotUtf8 { at });
        }
        if self.buf.get(start + len) != Some(&0) {
            return Err(DecodeError::Unterminated { at });
        }
        self.push(
            depth,
            name,
            "string",
            NodeValue::Str {
                start: start as u32,
                len: len as u32,
            },
        )?;
        Ok(())
    }

    fn object(&self, index: Option<u32>) -> R<&'static ObjectModel> {
        index
            .and_then(|i| self.schema.objects.get(i as usize))
            .ok_or(DecodeError::Unsupported("an object"))
    }

    fn structure(
        &mut self,
        at: usize,
        obj: &'static ObjectModel,
        depth: u16,
        name: &'static str,
    ) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        self.aligned(at, obj.minalign, "struct")?;
        self.bytes(at, obj.bytesize, "struct")?;
        let idx = self.push(
            depth,
            name,
            &obj.name,
            NodeValue::Struct {
                fields: obj.fields.len() as u32,
            },
        )?;
        for f in &obj.fields {
            let field_at = at + usize::from(f.offset);
            match f.ty.base {
                Base::Obj => {
                    let inner = self.object(f.ty.index)?;
                    self.structure(field_at, inner, depth + 1, &f.name)?;
                }
                Base::Array => return Err(DecodeError::Unsupported("a fixed-size array")),
                b => {
                    let v = self.scalar(field_at, b, f.ty.index)?;
                    self.push(depth + 1, &f.name, &f.type_name, v)?;
                }
            }
        }
        self.close(idx);
        Ok(())
    }

    pub(super) fn table(
        &mut self,
        at: usize,
        obj: &'static ObjectModel,
        depth: u16,
        name: &'static str,
    ) -> R<()> {
        if depth > MAX_DEPTH {
            return Err(DecodeError::TooDeep);
        }
        let vtable = self.vtable(at)?;
        let table_len = vtable.table_len;
        let shown = obj
            .fields
            .iter()
            .filter(|f| !f.deprecated && f.ty.base != Base::UType)
            .count();
        let idx = self.push(
            depth,
            name,
            &obj.name,
            NodeValue::Table {
                fields: shown as u32,
            },
        )?;
        for f in obj.fields.iter().filter(|f| !f.deprecated) {
            if f.ty.base == Base::UType {
                continue;
            }
            let off = vtable.slot(self, f.id)?;
            let field_size = match f.ty.base {
                Base::Obj => match self.object(f.ty.index)? {
                    o if o.is_struct => o.bytesize,
                    _ => 4,
                },
                b => b.size().max(1),
            };
            if off != 0 && off + field_size > table_len {
                return Err(DecodeError::OutOfBounds {
                    what: "table field",
                    at: at + off,
                    len: at + table_len,
                });
            }
            let field_at = at + off;
            let (d, n, tn) = (depth + 1, f.name.as_str(), f.type_name.as_str());
            match f.ty.base {
                b if b.is_scalar() => {
                    let v = if off == 0 {
                        self.default_value(f)
                    } else {
                        self.scalar(field_at, b, f.ty.index)?
                    };
                    self.push(d, n, tn, v)?;
                }
                // Absent: nothing to show. Unions and tables too.
                _ if off == 0 => self.hide_field(idx),
                Base::String => {
                    let target = self.offset_target(field_at, "string")?;
                    self.string(target, d, n)?;
                }
                Base::Obj => {
                    let inner = self.object(f.ty.index)?;
                    if inner.is_struct {
                        self.structure(field_at, inner, d, n)?;
                    } else {
                        let target = self.offset_target(field_at, "table")?;
                        self.table(target, inner, d, n)?;
                    }
                }
                Base::Vector => {
                    let target = self.offset_target(field_at, "vector")?;
                    self.vector(target, &f.ty, d, n, tn)?;
                }
                Base::Union => {
                    if !self.union_field(at, &vtable, obj, f, d)? {
                        self.hide_field(idx);
                    }
                }
                _ => return Err(DecodeError::Unsupported("a field")),
            }
        }
        self.close(idx);
        Ok(())
    }

    /// The vtable of the table at `at`, checked to lie in the buffer (aligned, its length
    /// even and at least 4), and the table's bytes after it.
    fn vtable(&self, at: usize) -> R<VTable> {
        self.aligned(at, 4, "table")?;
        let soff = self.u32_at(at, "table")? as i32;
        let vt = (at as i64 - i64::from(soff)) as usize;
        if (at as i64 - i64::from(soff)) < 0 {
            return Err(DecodeError::BadVtable { at });
        }
        self.aligned(vt, 2, "vtable")?;
        let len = usize::from(self.u16_at(vt, "vtable")?);
        let table_len = usize::from(self.u16_at(vt + 2, "vtable")?);
        if len < 4 || len % 2 != 0 {
            return Err(DecodeError::BadVtable { at: vt });
        }
        self.bytes(vt, len, "vtable")?;
        self.bytes(at, table_len.max(4), "table")?;
        Ok(VTable {
            at: vt,
            len,
            table_len,
        })
    }

    /// One field fewer shown in the table node `idx` (an absent or empty field).
    fn hide_field(&mut self, idx: usize) {
        if let Some(node) = self.nodes.get_mut(idx)
            && let NodeValue::Table { fields } = &mut node.value
        {
            *fields -= 1;
        }
    }

    /// The union field `f` of the table at `at`: its member named by the type field
    /// before it, walked as a table. False when the union holds nothing (type 0).
    fn union_field(
        &mut self,
        at: usize,
        vtable: &VTable,
        obj: &'static ObjectModel,
        f: &'static FieldModel,
        d: u16,
    ) -> R<bool> {
        let off = vtable.slot(self, f.id)?;
        let utype = obj
            .fields
            .iter()
            .find(|u| u.ty.base == Base::UType && u.id + 1 == f.id)
            .ok_or(DecodeError::Unsupported("a union without a type field"))?;
        let type_off = vtable.slot(self, utype.id)?;
        let type_value = if type_off == 0 {
            0
        } else {
            self.bytes(at + type_off, 1, "union type")?[0]
        };
        let e = self
            .schema
            .enums
            .get(f.ty.index.map_or(usize::MAX, |i| i as usize))
            .ok_or(DecodeError::Unsupported("a union"))?;
        let member = e.values.iter().find(|v| v.value == i64::from(type_value));
        let Some(member) = member else {
            return Err(DecodeError::UnknownUnionType {
                union: &e.name,
                value: type_value,
            });
        };
        if type_value == 0 {
            return Ok(false);
        }
        let field_at = at + off;
        let (n, tn) = (f.name.as_str(), f.type_name.as_str());
        let u = self.push(
            d,
            n,
            tn,
            NodeValue::Union {
                type_name: &member.name,
            },
        )?;
        let inner = self.object(member.table)?;
        let target = self.offset_target(field_at, "union member")?;
        self.table(target, inner, d + 1, &member.name)?;
        self.close(u);
        Ok(true)
    }

    fn vector(
        &mut self,
        at: usize,
        ty: &'static TypeModel,
        depth: u16,
        name: &'static str,
        type_name: &'static str,
    ) -> R<()> {
        self.aligned(at, 4, "vector")?;
        let len = self.u32_at(at, "vector length")? as usize;
        let start = at + 4;
        let elem = ty.element;
        let elem_obj = if elem == Base::Obj {
            Some(self.object(ty.index)?)
        } else {
            None
        };
        let elem_size = match elem_obj {
            Some(o) if o.is_struct => o.bytesize,
            _ => elem.size(),
        };
        if elem_size == 0 {
            return Err(DecodeError::Unsupported("a vector element"));
        }
        let total = len.checked_mul(elem_size).ok_or(DecodeError::OutOfBounds {
            what: "vector",
            at,
            len: self.buf.len(),
        })?;
        self.bytes(start, total, "vector")?;
        if elem.is_scalar() {
            self.aligned(start, elem_size, "vector elements")?;
            self.push(
                depth,
                name,
                type_name,
                NodeValue::ScalarVector {
                    base: elem,
                    enum_index: ty.index,
                    start: start as u32,
                    len: len as u32,
                },
            )?;
            return Ok(());
        }
        let idx = self.push(
            depth,
            name,
            type_name,
            NodeValue::Vector { len: len as u32 },
        )?;
        for i in 0..len {
            let at = start + i * elem_size;
            match (elem, elem_obj) {
                (Base::String, _) => {
                    let target = self.offset_target(at, "string")?;
                    self.string(target, depth + 1, "")?;
                }
                (Base::Obj, Some(o)) if o.is_struct => self.structure(at, o, depth + 1, "")?,
                (Base::Obj, Some(o)) => {
                    let target = self.offset_target(at, "table")?;
                    self.table(target, o, depth + 1, "")?;
                }
                _ => return Err(DecodeError::Unsupported("a vector of unions")),
            }
        }
        self.close(idx);
        Ok(())
    }
}

/// A table's vtable: where it is, its length, and the table's length it gives.
struct VTable {
    at: usize,
    len: usize,
    table_len: usize,
}

impl VTable {
    /// The offset of field `id` from the table's start, 0 when the vtable has no slot
    /// for it (the field is absent).
    fn slot(&self, walker: &Walker<'_>, id: u16) -> R<usize> {
        let pos = 4 + 2 * usize::from(id);
        if pos + 2 > self.len {
            return Ok(0);
        }
        Ok(usize::from(walker.u16_at(self.at + pos, "vtable")?))
    }
}
