//! The loader's fast path: one borrowed pass over a line of the four bulk kinds (`memory`, `op`,
//! `span_start`, `span_end`), whatever the key order or whitespace.
//!
//! [`FastLine`] holds the union of those kinds' fields, each as `Option<N<T>>` so that absent,
//! `null` and a value stay distinct; strings are borrowed from the line unless they hold
//! escapes. A line is taken here only when the result is exactly what the general path
//! ([`crate::parse`]) would give: the kind is one of the four, every required field is a value,
//! a field the typed event does not allow to be `null` is not `null`, an aliased field is not
//! given twice, and the version's rules hold. In every other case (or on any JSON error, an
//! unknown kind, trace/6) the caller parses the line again on the general path, which accepts or
//! rejects it and names the line and field.

use std::borrow::Cow;

use serde::de::{Deserializer, Visitor};
use serde::Deserialize;

use crate::event::{CategorySource, MemoryAction, MemoryCategory, MemorySource, Pass, SpanKind};
use crate::version::SchemaVersion;

/// A field that tells absent (the default), `null` and a value apart (serde maps `null` to
/// `None` for `Option` fields, so this is not an `Option`).
#[derive(Debug, Default)]
pub(crate) enum F<T> {
    #[default]
    Absent,
    Null,
    V(T),
}

impl<'de, T: Deserialize<'de>> Deserialize<'de> for F<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        Ok(match Option::<T>::deserialize(d)? {
            None => F::Null,
            Some(v) => F::V(v),
        })
    }
}

/// A string borrowed from the line when it has no escapes.
#[derive(Debug)]
pub(crate) struct Str<'a>(pub Cow<'a, str>);

impl<'de: 'a, 'a> Deserialize<'de> for Str<'a> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Str<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v.to_string())))
            }
            fn visit_string<E>(self, v: String) -> Result<Self::Value, E> {
                Ok(Str(Cow::Owned(v)))
            }
        }
        d.deserialize_str(V)
    }
}

/// The union of the fields of `memory`, `op`, `span_start` and `span_end` (see the module docs).
#[derive(Debug, Deserialize)]
pub(crate) struct FastLine<'a> {
    #[serde(borrow)]
    kind: Str<'a>,
    // memory
    #[serde(default)]
    timestamp_ns: F<u64>,
    #[serde(default)]
    action: F<MemoryAction>,
    #[serde(default, borrow)]
    device: F<Str<'a>>,
    #[serde(default, borrow)]
    storage_id: F<Str<'a>>,
    #[serde(default)]
    bytes: F<u64>,
    /// Not kept by the loader; parsed so that a malformed value leaves the fast path and gets
    /// the typed parse's error.
    #[serde(default)]
    logical_bytes: F<u64>,
    #[serde(default, borrow)]
    tensor_id: F<Str<'a>>,
    #[serde(default, borrow)]
    span_id: F<Str<'a>>,
    #[serde(default, borrow)]
    op_name: F<Str<'a>>,
    #[serde(default)]
    shape: F<Vec<u64>>,
    #[serde(default, borrow)]
    dtype: F<Str<'a>>,
    #[serde(default)]
    category: F<MemoryCategory>,
    #[serde(default)]
    category_source: F<CategorySource>,
    #[serde(default)]
    source: F<MemorySource>,
    #[serde(default)]
    pre_existing: F<bool>,
    #[serde(default, borrow)]
    label: F<Str<'a>>,
    /// trace/13: the allocation site id and the allocating thread.
    #[serde(default)]
    site: F<u32>,
    #[serde(default)]
    thread: F<u64>,
    // op
    #[serde(default, borrow)]
    inputs: F<Vec<Str<'a>>>,
    #[serde(default, borrow)]
    output: F<Str<'a>>,
    #[serde(default)]
    duration_ns: F<u64>,
    #[serde(default)]
    output_dense_bytes: F<u64>,
    #[serde(default)]
    storage_bytes: F<u64>,
    #[serde(default)]
    input_dense_bytes: F<u64>,
    #[serde(default)]
    input_storage_bytes: F<u64>,
    // span_start / span_end
    #[serde(default, borrow)]
    id: F<Str<'a>>,
    #[serde(default, borrow)]
    parent_id: F<Str<'a>>,
    #[serde(default, borrow)]
    name: F<Str<'a>>,
    #[serde(default)]
    start_ns: F<u64>,
    #[serde(default)]
    span_kind: F<SpanKind>,
    #[serde(default)]
    measured: F<bool>,
    #[serde(default)]
    step: F<Pass>,
    #[serde(default, borrow)]
    module_path: F<Str<'a>>,
    #[serde(default, borrow)]
    instance_key: F<Str<'a>>,
    #[serde(default, borrow)]
    module_kind: F<Str<'a>>,
    #[serde(default, borrow)]
    forward_span_id: F<Str<'a>>,
    #[serde(default)]
    step_index: F<u64>,
    #[serde(default)]
    inferred: F<bool>,
    #[serde(default, borrow)]
    inferred_reason: F<Str<'a>>,
}

/// A `memory` event from the fast path.
#[derive(Debug)]
pub(crate) struct FastMemory<'a> {
    pub timestamp_ns: u64,
    pub action: MemoryAction,
    pub device: Cow<'a, str>,
    pub storage_id: Option<Cow<'a, str>>,
    pub bytes: Option<u64>,
    pub tensor_id: Option<Cow<'a, str>>,
    pub span_id: Option<Cow<'a, str>>,
    pub op_name: Option<Cow<'a, str>>,
    pub shape: Option<Vec<u64>>,
    pub dtype: Option<Cow<'a, str>>,
    pub category: MemoryCategory,
    pub category_source: Option<CategorySource>,
    pub source: Option<MemorySource>,
    pub pre_existing: bool,
    pub label: Option<Cow<'a, str>>,
    pub site: Option<u32>,
    pub thread: Option<u64>,
}

/// An `op` event from the fast path.
#[derive(Debug)]
pub(crate) struct FastOp<'a> {
    pub span_id: Cow<'a, str>,
    pub op_name: Cow<'a, str>,
    pub inputs: Vec<Cow<'a, str>>,
    pub output: Option<Cow<'a, str>>,
    pub shape: Vec<u64>,
    pub dtype: Cow<'a, str>,
    pub device: Cow<'a, str>,
    pub duration_ns: u64,
    pub timestamp_ns: u64,
    pub output_dense_bytes: Option<u64>,
    pub input_dense_bytes: u64,
}

/// A `span_start` event from the fast path.
#[derive(Debug)]
pub(crate) struct FastSpanStart<'a> {
    pub id: Cow<'a, str>,
    pub parent_id: Option<Cow<'a, str>>,
    pub name: Cow<'a, str>,
    pub start_ns: u64,
    pub span_kind: SpanKind,
    pub measured: bool,
    pub step: Option<Pass>,
    pub module_path: Option<Cow<'a, str>>,
    pub instance_key: Option<Cow<'a, str>>,
    pub module_kind: Option<Cow<'a, str>>,
    pub forward_span_id: Option<Cow<'a, str>>,
    pub step_index: Option<u64>,
}

/// A `span_end` event from the fast path.
#[derive(Debug)]
pub(crate) struct FastSpanEnd<'a> {
    pub id: Cow<'a, str>,
    pub duration_ns: u64,
    pub inferred: bool,
    pub inferred_reason: Option<Cow<'a, str>>,
}

/// One line taken by the fast path.
#[derive(Debug)]
pub(crate) enum Fast<'a> {
    Memory(FastMemory<'a>),
    Op(FastOp<'a>),
    SpanStart(FastSpanStart<'a>),
    SpanEnd(FastSpanEnd<'a>),
}

/// Required: a value (absent or null fails).
fn req<T>(f: F<T>) -> Option<T> {
    match f {
        F::V(v) => Some(v),
        _ => None,
    }
}

/// `Option<T>` on the typed event: absent or null is `None`.
fn opt<T>(f: F<T>) -> Option<Option<T>> {
    Some(match f {
        F::V(v) => Some(v),
        _ => None,
    })
}

/// `#[serde(default)]` on a non-`Option` field: absent is the default, null fails.
fn dflt<T: Default>(f: F<T>) -> Option<T> {
    match f {
        F::Absent => Some(T::default()),
        F::V(v) => Some(v),
        F::Null => None,
    }
}

fn s(x: Str<'_>) -> Cow<'_, str> {
    x.0
}

/// A field and its serde alias: at most one may be given (serde reports a duplicate otherwise).
fn aliased<T>(a: F<T>, b: F<T>) -> Option<F<T>> {
    match (a, b) {
        (F::Absent, b) => Some(b),
        (a, F::Absent) => Some(a),
        _ => None,
    }
}

/// Parses `bytes` (one trimmed line) on the fast path for a document of `version`; `None` sends
/// the line to the general path (see the module docs).
pub(crate) fn parse_fast(bytes: &[u8], version: SchemaVersion) -> Option<Fast<'_>> {
    if version == SchemaVersion::V6 {
        return None;
    }
    let line: FastLine<'_> = serde_json::from_slice(bytes).ok()?;
    let l = line;
    Some(match &*l.kind.0 {
        "memory" => {
            opt(l.logical_bytes)?; // validated, not kept
            let m = FastMemory {
                timestamp_ns: req(l.timestamp_ns)?,
                action: req(l.action)?,
                device: s(req(l.device)?),
                storage_id: opt(l.storage_id)?.map(s),
                bytes: opt(l.bytes)?,
                tensor_id: opt(l.tensor_id)?.map(s),
                span_id: opt(l.span_id)?.map(s),
                op_name: opt(l.op_name)?.map(s),
                shape: opt(l.shape)?,
                dtype: opt(l.dtype)?.map(s),
                category: dflt(l.category)?,
                category_source: opt(l.category_source)?,
                source: opt(l.source)?,
                pre_existing: dflt(l.pre_existing)?,
                label: opt(l.label)?.map(s),
                site: opt(l.site)?,
                thread: opt(l.thread)?,
            };
            let present = MemoryPresence {
                action: m.action,
                bytes: m.bytes.is_some(),
                span_id: m.span_id.is_some(),
                storage_id: m.storage_id.is_some(),
                tensor_id: m.tensor_id.is_some(),
                dtype: m.dtype.is_some(),
            };
            if memory_missing_field(&present, version).is_some() {
                return None;
            }
            Fast::Memory(m)
        }
        "op" => Fast::Op(FastOp {
            span_id: s(req(l.span_id)?),
            op_name: s(req(l.op_name)?),
            inputs: dflt(l.inputs)?.into_iter().map(s).collect(),
            output: opt(l.output)?.map(s),
            shape: dflt(l.shape)?,
            dtype: s(req(l.dtype)?),
            device: s(req(l.device)?),
            duration_ns: req(l.duration_ns)?,
            timestamp_ns: dflt(l.timestamp_ns)?,
            output_dense_bytes: opt(aliased(l.output_dense_bytes, l.storage_bytes)?)?,
            input_dense_bytes: dflt(aliased(l.input_dense_bytes, l.input_storage_bytes)?)?,
        }),
        "span_start" => Fast::SpanStart(FastSpanStart {
            id: s(req(l.id)?),
            parent_id: opt(l.parent_id)?.map(s),
            name: s(req(l.name)?),
            start_ns: req(l.start_ns)?,
            span_kind: req(l.span_kind)?,
            measured: dflt(l.measured)?,
            step: opt(l.step)?,
            module_path: opt(l.module_path)?.map(s),
            instance_key: opt(l.instance_key)?.map(s),
            module_kind: opt(l.module_kind)?.map(s),
            forward_span_id: opt(l.forward_span_id)?.map(s),
            step_index: opt(l.step_index)?,
        }),
        "span_end" => Fast::SpanEnd(FastSpanEnd {
            id: s(req(l.id)?),
            duration_ns: dflt(l.duration_ns)?,
            inferred: dflt(l.inferred)?,
            inferred_reason: opt(l.inferred_reason)?.map(s),
        }),
        _ => return None,
    })
}

/// Which of a memory event's version-dependent fields are present.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MemoryPresence {
    pub action: MemoryAction,
    pub bytes: bool,
    pub span_id: bool,
    pub storage_id: bool,
    pub tensor_id: bool,
    pub dtype: bool,
}

/// The per-version required fields of a memory event: the first one missing.
pub(crate) fn memory_missing_field(
    m: &MemoryPresence,
    version: SchemaVersion,
) -> Option<&'static str> {
    if m.action == MemoryAction::Alloc && !m.bytes {
        return Some("bytes");
    }
    if version <= SchemaVersion::V10 {
        if !m.bytes {
            return Some("bytes");
        }
        if !m.span_id {
            return Some("span_id");
        }
        if version >= SchemaVersion::V9 && !m.storage_id {
            return Some("storage_id");
        }
        if !m.tensor_id {
            return Some("tensor_id");
        }
    }
    if version == SchemaVersion::V6 && !m.dtype {
        return Some("dtype");
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::TraceEvent;

    fn fast(line: &str) -> Option<Fast<'_>> {
        parse_fast(line.as_bytes(), SchemaVersion::V11)
    }

    #[test]
    fn a_malformed_logical_size_leaves_the_fast_path_for_the_typed_error() {
        let ok = r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"logical_bytes":4}"#;
        assert!(matches!(fast(ok), Some(Fast::Memory(_))));
        let bad = r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"logical_bytes":"x"}"#;
        assert!(fast(bad).is_none(), "the typed parse must see it");
        let err = serde_json::from_str::<TraceEvent>(bad).expect_err("a string is not bytes");
        assert!(err.to_string().contains("invalid type"), "{err}");
    }

    #[test]
    fn a_memory_site_and_thread_take_the_fast_path_and_a_huge_id_leaves_it() {
        let ok = r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"site":3,"thread":7}"#;
        let Some(Fast::Memory(m)) = fast(ok) else {
            panic!("{ok}")
        };
        assert_eq!((m.site, m.thread), (Some(3), Some(7)));
        let huge = r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"a","bytes":8,"site":4294967296}"#;
        assert!(fast(huge).is_none(), "the typed parse must name the field");
    }

    #[test]
    fn any_key_order_and_whitespace() {
        let a = r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu","storage_id":"a","bytes":8}"#;
        let b = r#"{ "bytes" : 8, "storage_id": "a", "device":"cpu", "action": "alloc", "timestamp_ns": 5, "kind": "memory" }"#;
        for line in [a, b] {
            let Some(Fast::Memory(m)) = fast(line) else {
                panic!("{line}")
            };
            assert_eq!((m.timestamp_ns, m.bytes, &*m.device), (5, Some(8), "cpu"));
            assert!(matches!(m.storage_id, Some(Cow::Borrowed("a"))));
        }
    }

    #[test]
    fn doubt_goes_to_the_general_path() {
        // missing required field, null where the typed field is not an Option, an alias given
        // twice, an unknown kind, a field of another kind with an unexpected type
        for line in [
            r#"{"kind":"memory","timestamp_ns":5,"action":"alloc","device":"cpu"}"#,
            r#"{"kind":"memory","timestamp_ns":5,"action":"free","device":"cpu","category":null}"#,
            r#"{"kind":"op","span_id":"s","op_name":"x","dtype":"f32","device":"cpu","duration_ns":1,"storage_bytes":1,"output_dense_bytes":2}"#,
            r#"{"kind":"op","span_id":"s","op_name":"x","dtype":"f32","device":"cpu","duration_ns":1,"shape":null}"#,
            r#"{"kind":"gradient","event_id":"g","root":"m","key":"k","state":"missing"}"#,
            r#"{"kind":"span_end","id":"s1","inputs":3}"#,
        ] {
            assert!(fast(line).is_none(), "{line}");
        }
        // escapes are decoded, not a reason to leave the fast path
        let Some(Fast::SpanEnd(end)) = fast(r#"{"kind":"span_end","id":"s\u0031"}"#) else {
            panic!()
        };
        assert_eq!(end.id, "s1");
    }

    #[test]
    fn agrees_with_the_typed_parse() {
        let line = r#"{"kind":"op","span_id":"s1","op_name":"matmul","inputs":["a","b"],"shape":[2,3],"dtype":"f32","device":"cpu","duration_ns":4,"input_storage_bytes":9}"#;
        let Some(Fast::Op(op)) = fast(line) else {
            panic!()
        };
        let TraceEvent::Op(typed) = serde_json::from_str::<TraceEvent>(line).unwrap() else {
            panic!()
        };
        assert_eq!(op.inputs, typed.inputs);
        assert_eq!(
            (op.timestamp_ns, op.input_dense_bytes, op.output_dense_bytes),
            (
                typed.timestamp_ns,
                typed.input_dense_bytes,
                typed.output_dense_bytes
            )
        );
    }

    #[test]
    fn backward_span_fields_agree_with_the_typed_parse() {
        let start = r#"{"kind":"span_start","id":"s9","parent_id":"s3","name":"backward/model.fc1","start_ns":7,"span_kind":"module","step":"backward","module_kind":"linear","forward_span_id":"s4"}"#;
        let Some(Fast::SpanStart(fast_start)) = fast(start) else {
            panic!("{start}")
        };
        let TraceEvent::SpanStart(typed) = serde_json::from_str::<TraceEvent>(start).unwrap()
        else {
            panic!()
        };
        assert_eq!(
            fast_start.module_kind.as_deref(),
            typed.module_kind.as_deref()
        );
        assert_eq!(
            fast_start.forward_span_id.as_deref(),
            typed.forward_span_id.as_deref()
        );
        assert_eq!(fast_start.forward_span_id.as_deref(), Some("s4"));
        let end = r#"{"kind":"span_end","id":"s9","duration_ns":3,"inferred":true,"inferred_reason":"interleaved"}"#;
        let Some(Fast::SpanEnd(fast_end)) = fast(end) else {
            panic!("{end}")
        };
        let TraceEvent::SpanEnd(typed) = serde_json::from_str::<TraceEvent>(end).unwrap() else {
            panic!()
        };
        assert_eq!(
            (fast_end.inferred, fast_end.inferred_reason.as_deref()),
            (typed.inferred, typed.inferred_reason.as_deref())
        );
        assert!(fast_end.inferred);
        // absent: not inferred; `null` where the typed field is a plain bool: general path
        let Some(Fast::SpanEnd(plain)) = fast(r#"{"kind":"span_end","id":"s9"}"#) else {
            panic!()
        };
        assert!(!plain.inferred && plain.inferred_reason.is_none());
        assert!(fast(r#"{"kind":"span_end","id":"s9","inferred":null}"#).is_none());
    }
}
