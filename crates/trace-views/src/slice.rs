//! Serializing a result with every array cut to its first `limit` elements and the objects that
//! are elements of arrays reduced to the named fields — written straight to the output, so what
//! is held is the analysis, never the JSON (`query --limit N --fields a,b`).
//!
//! [`Sliced`] wraps any [`Serialize`] value; its serializer forwards to the inner one (serde_json
//! in practice) and drops, as they arrive, the elements past the limit and the fields not
//! asked for. Tuples (fixed-size pairs such as `[bytes, count]`) are never cut.

use serde::ser::{
    Serialize, SerializeMap, SerializeSeq, SerializeStruct, SerializeStructVariant, SerializeTuple,
    SerializeTupleStruct, SerializeTupleVariant, Serializer,
};

/// What to keep of a result.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Slice {
    /// Keep the first `limit` elements of every array (all when `None`).
    pub limit: Option<usize>,
    /// Keep only these fields of the objects that are elements of arrays (all when `None`).
    pub fields: Option<Vec<String>>,
}

impl Slice {
    fn keeps_field(&self, in_seq: bool, key: &str) -> bool {
        match &self.fields {
            Some(f) if in_seq => f.iter().any(|k| k == key),
            _ => true,
        }
    }
}

/// `value` as [`Slice`] keeps it.
pub struct Sliced<'a, T: ?Sized> {
    value: &'a T,
    slice: &'a Slice,
    in_seq: bool,
}

impl<'a, T: ?Sized> Sliced<'a, T> {
    /// Wraps `value` (the top level is not an array element).
    pub fn new(value: &'a T, slice: &'a Slice) -> Self {
        Self {
            value,
            slice,
            in_seq: false,
        }
    }
}

impl<T: ?Sized + Serialize> Serialize for Sliced<'_, T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.value.serialize(Ser {
            inner: s,
            slice: self.slice,
            in_seq: self.in_seq,
        })
    }
}

fn wrap<'a, T: ?Sized>(value: &'a T, slice: &'a Slice, in_seq: bool) -> Sliced<'a, T> {
    Sliced {
        value,
        slice,
        in_seq,
    }
}

/// The forwarding serializer; `in_seq`: the value is an element of an array.
struct Ser<'a, S> {
    inner: S,
    slice: &'a Slice,
    in_seq: bool,
}

macro_rules! forward {
    ($($method:ident($ty:ty)),* $(,)?) => {
        $(fn $method(self, v: $ty) -> Result<S::Ok, S::Error> {
            self.inner.$method(v)
        })*
    };
}

impl<'a, S: Serializer> Serializer for Ser<'a, S> {
    type Ok = S::Ok;
    type Error = S::Error;
    type SerializeSeq = Seq<'a, S::SerializeSeq>;
    type SerializeTuple = Pass<'a, S::SerializeTuple>;
    type SerializeTupleStruct = Pass<'a, S::SerializeTupleStruct>;
    type SerializeTupleVariant = Pass<'a, S::SerializeTupleVariant>;
    type SerializeMap = Map<'a, S::SerializeMap>;
    type SerializeStruct = Struct<'a, S::SerializeStruct>;
    type SerializeStructVariant = Pass<'a, S::SerializeStructVariant>;

    forward!(
        serialize_bool(bool),
        serialize_i8(i8),
        serialize_i16(i16),
        serialize_i32(i32),
        serialize_i64(i64),
        serialize_i128(i128),
        serialize_u8(u8),
        serialize_u16(u16),
        serialize_u32(u32),
        serialize_u64(u64),
        serialize_u128(u128),
        serialize_f32(f32),
        serialize_f64(f64),
        serialize_char(char),
        serialize_str(&str),
        serialize_bytes(&[u8]),
    );

    fn serialize_none(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_none()
    }

    fn serialize_some<T: ?Sized + Serialize>(self, v: &T) -> Result<S::Ok, S::Error> {
        self.inner.serialize_some(&wrap(v, self.slice, self.in_seq))
    }

    fn serialize_unit(self) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit()
    }

    fn serialize_unit_struct(self, name: &'static str) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_struct(name)
    }

    fn serialize_unit_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
    ) -> Result<S::Ok, S::Error> {
        self.inner.serialize_unit_variant(name, index, variant)
    }

    fn serialize_newtype_struct<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_struct(name, &wrap(v, self.slice, self.in_seq))
    }

    fn serialize_newtype_variant<T: ?Sized + Serialize>(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        v: &T,
    ) -> Result<S::Ok, S::Error> {
        self.inner
            .serialize_newtype_variant(name, index, variant, &wrap(v, self.slice, false))
    }

    fn serialize_seq(self, len: Option<usize>) -> Result<Self::SerializeSeq, S::Error> {
        let len = match (len, self.slice.limit) {
            (Some(n), Some(l)) => Some(n.min(l)),
            (n, _) => n,
        };
        Ok(Seq {
            inner: self.inner.serialize_seq(len)?,
            slice: self.slice,
            seen: 0,
        })
    }

    fn serialize_tuple(self, len: usize) -> Result<Self::SerializeTuple, S::Error> {
        Ok(Pass {
            inner: self.inner.serialize_tuple(len)?,
            slice: self.slice,
        })
    }

    fn serialize_tuple_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleStruct, S::Error> {
        Ok(Pass {
            inner: self.inner.serialize_tuple_struct(name, len)?,
            slice: self.slice,
        })
    }

    fn serialize_tuple_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeTupleVariant, S::Error> {
        Ok(Pass {
            inner: self
                .inner
                .serialize_tuple_variant(name, index, variant, len)?,
            slice: self.slice,
        })
    }

    fn serialize_map(self, len: Option<usize>) -> Result<Self::SerializeMap, S::Error> {
        Ok(Map {
            inner: self.inner.serialize_map(len)?,
            slice: self.slice,
            in_seq: self.in_seq,
            skip_value: false,
        })
    }

    fn serialize_struct(
        self,
        name: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStruct, S::Error> {
        Ok(Struct {
            inner: self.inner.serialize_struct(name, len)?,
            slice: self.slice,
            in_seq: self.in_seq,
        })
    }

    fn serialize_struct_variant(
        self,
        name: &'static str,
        index: u32,
        variant: &'static str,
        len: usize,
    ) -> Result<Self::SerializeStructVariant, S::Error> {
        Ok(Pass {
            inner: self
                .inner
                .serialize_struct_variant(name, index, variant, len)?,
            slice: self.slice,
        })
    }

    fn is_human_readable(&self) -> bool {
        self.inner.is_human_readable()
    }
}

/// An array: elements past the limit are dropped.
struct Seq<'a, I> {
    inner: I,
    slice: &'a Slice,
    seen: usize,
}

impl<I: SerializeSeq> SerializeSeq for Seq<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), I::Error> {
        let keep = self.slice.limit.is_none_or(|l| self.seen < l);
        self.seen += 1;
        if keep {
            self.inner.serialize_element(&wrap(v, self.slice, true))
        } else {
            Ok(())
        }
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

/// A compound kept whole (tuples, variants); its parts are sliced.
struct Pass<'a, I> {
    inner: I,
    slice: &'a Slice,
}

impl<I: SerializeTuple> SerializeTuple for Pass<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_element<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), I::Error> {
        self.inner.serialize_element(&wrap(v, self.slice, false))
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

impl<I: SerializeTupleStruct> SerializeTupleStruct for Pass<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), I::Error> {
        self.inner.serialize_field(&wrap(v, self.slice, false))
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

impl<I: SerializeTupleVariant> SerializeTupleVariant for Pass<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_field<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), I::Error> {
        self.inner.serialize_field(&wrap(v, self.slice, false))
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

impl<I: SerializeStructVariant> SerializeStructVariant for Pass<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), I::Error> {
        self.inner.serialize_field(key, &wrap(v, self.slice, false))
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

/// An object from a struct: fields not asked for are dropped when it is an array element.
struct Struct<'a, I> {
    inner: I,
    slice: &'a Slice,
    in_seq: bool,
}

impl<I: SerializeStruct> SerializeStruct for Struct<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_field<T: ?Sized + Serialize>(
        &mut self,
        key: &'static str,
        v: &T,
    ) -> Result<(), I::Error> {
        if self.slice.keeps_field(self.in_seq, key) {
            self.inner.serialize_field(key, &wrap(v, self.slice, false))
        } else {
            Ok(())
        }
    }

    fn skip_field(&mut self, key: &'static str) -> Result<(), I::Error> {
        self.inner.skip_field(key)
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

/// An object from a map: keys not asked for are dropped when it is an array element.
struct Map<'a, I> {
    inner: I,
    slice: &'a Slice,
    in_seq: bool,
    skip_value: bool,
}

impl<I: SerializeMap> SerializeMap for Map<'_, I> {
    type Ok = I::Ok;
    type Error = I::Error;

    fn serialize_key<T: ?Sized + Serialize>(&mut self, key: &T) -> Result<(), I::Error> {
        if self.in_seq && self.slice.fields.is_some() {
            let name = serde_json::to_value(key)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string));
            if !name.is_some_and(|n| self.slice.keeps_field(true, &n)) {
                self.skip_value = true;
                return Ok(());
            }
        }
        self.inner.serialize_key(key)
    }

    fn serialize_value<T: ?Sized + Serialize>(&mut self, v: &T) -> Result<(), I::Error> {
        if std::mem::take(&mut self.skip_value) {
            return Ok(());
        }
        self.inner.serialize_value(&wrap(v, self.slice, false))
    }

    fn end(self) -> Result<I::Ok, I::Error> {
        self.inner.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sliced(v: &serde_json::Value, limit: Option<usize>, fields: Option<&[&str]>) -> String {
        let slice = Slice {
            limit,
            fields: fields.map(|f| f.iter().map(|s| s.to_string()).collect()),
        };
        serde_json::to_string(&Sliced::new(v, &slice)).unwrap()
    }

    #[derive(serde::Serialize)]
    struct Row {
        id: u32,
        bytes: u64,
        pair: (u64, u64),
        tags: Vec<u8>,
    }

    #[test]
    fn arrays_are_cut_and_array_elements_keep_the_named_fields() {
        let v =
            json!({"total": 3, "rows": [{"a": 1, "b": [1, 2, 3]}, {"a": 2, "b": []}, {"a": 3}]});
        assert_eq!(sliced(&v, None, None), serde_json::to_string(&v).unwrap());
        assert_eq!(
            sliced(&v, Some(2), None),
            r#"{"rows":[{"a":1,"b":[1,2]},{"a":2,"b":[]}],"total":3}"#
        );
        // the top-level object is not an array element: its fields stay
        assert_eq!(
            sliced(&v, Some(1), Some(&["b"])),
            r#"{"rows":[{"b":[1]}],"total":3}"#
        );
        let rows = vec![
            Row {
                id: 1,
                bytes: 10,
                pair: (1, 2),
                tags: vec![1, 2, 3],
            },
            Row {
                id: 2,
                bytes: 20,
                pair: (3, 4),
                tags: vec![],
            },
        ];
        let slice = Slice {
            limit: Some(1),
            fields: Some(vec!["bytes".into(), "pair".into()]),
        };
        // tuples are not cut
        assert_eq!(
            serde_json::to_string(&Sliced::new(&rows, &slice)).unwrap(),
            r#"[{"bytes":10,"pair":[1,2]}]"#
        );
        // what comes out is what serde_json makes of the same value cut by hand
        let slice = Slice {
            limit: Some(2),
            fields: None,
        };
        assert_eq!(
            serde_json::to_value(Sliced::new(&rows, &slice)).unwrap(),
            json!([
                {"id": 1, "bytes": 10, "pair": [1, 2], "tags": [1, 2]},
                {"id": 2, "bytes": 20, "pair": [3, 4], "tags": []}
            ])
        );
    }
}
