//! Parsing one line into a [`TraceEvent`], per schema version, with diagnostics that name the
//! line and the field.
//!
//! The fast path deserializes straight into [`TraceEvent`]. Only when that fails is the line
//! parsed again, slowly, to say exactly what is wrong (malformed JSON, unknown kind, or the field
//! path of a missing or mistyped field).

use serde::de::DeserializeOwned;
use serde::Deserialize;

use crate::error::LoadError;
use crate::event::*;
use crate::fast::{memory_missing_field, MemoryPresence};
use crate::version::SchemaVersion;

/// A trace/6 edge: untagged call edge with `duration_ns`.
#[derive(Deserialize)]
struct LegacyCallEdge {
    from_span: String,
    to_span: String,
    #[serde(default)]
    duration_ns: u64,
}

/// Mirrors of the edge variants, so that a diagnosis can name the field (serde loses the path
/// inside internally tagged enums).
#[derive(Deserialize)]
#[allow(dead_code)]
struct CallEdge {
    from_span: String,
    to_span: String,
    host_duration_ns: u64,
}

#[derive(Deserialize)]
#[allow(dead_code)]
struct DataEdge {
    from_tensor: String,
    to_tensor: String,
}

/// Parses one non-empty line. `version` is `None` only for the first event (which must be
/// `meta`).
pub(crate) fn parse_line(
    bytes: &[u8],
    line: u64,
    version: Option<SchemaVersion>,
) -> Result<TraceEvent, LoadError> {
    if let Some(err) = duplicate_kind(bytes, line) {
        return Err(err);
    }
    let legacy = version == Some(SchemaVersion::V6);
    let event = if legacy && looks_like_kind(bytes, b"edge") {
        let edge: LegacyCallEdge = typed(bytes, line, "edge")?;
        TraceEvent::Edge(EdgeEvent::Call {
            from_span: edge.from_span,
            to_span: edge.to_span,
            host_duration_ns: edge.duration_ns,
        })
    } else {
        match fast_parse(bytes).unwrap_or_else(|| serde_json::from_slice::<TraceEvent>(bytes)) {
            Ok(event) => event,
            Err(_) => return Err(diagnose(bytes, line)),
        }
    };
    // The first meta is checked against the version it declares; a second meta is left to the
    // reader, which reports it as a duplicate.
    let rules_version = match (&event, version) {
        (TraceEvent::Meta(meta), None) => SchemaVersion::parse(&meta.schema),
        (TraceEvent::Meta(_), Some(_)) => None,
        (_, version) => version,
    };
    if let Some(version) = rules_version {
        check_version_rules(&event, line, version)?;
    }
    Ok(legacy_fixups(event, legacy))
}

/// The fast path for lines that start with `{"kind":"<kind>"` (as every writer of this crate and
/// the probe write them): deserialize straight into the body struct, skipping the buffering
/// serde does for internally tagged enums (the struct ignores the `kind` key). `None` when the
/// line does not start that way or the kind is `meta` or `edge`; the caller then takes the
/// general path, which accepts `kind` anywhere in the object.
fn fast_parse(bytes: &[u8]) -> Option<serde_json::Result<TraceEvent>> {
    const PREFIX: &[u8] = b"{\"kind\":\"";
    let rest = bytes.strip_prefix(PREFIX)?;
    let end = rest.iter().position(|&b| b == b'"')?;
    fn parse<T: DeserializeOwned>(
        bytes: &[u8],
        wrap: fn(T) -> TraceEvent,
    ) -> Option<serde_json::Result<TraceEvent>> {
        Some(serde_json::from_slice::<T>(bytes).map(wrap))
    }
    match &rest[..end] {
        b"memory" => parse(bytes, TraceEvent::Memory),
        b"op" => parse(bytes, TraceEvent::Op),
        b"span_start" => parse(bytes, TraceEvent::SpanStart),
        b"span_end" => parse(bytes, TraceEvent::SpanEnd),
        b"tensor" => parse(bytes, TraceEvent::Tensor),
        b"tensor_stats" => parse(bytes, TraceEvent::TensorStats),
        b"device_memory" => parse(bytes, TraceEvent::DeviceMemory),
        b"device_interval" => parse(bytes, TraceEvent::DeviceInterval),
        b"gradient" => parse(bytes, TraceEvent::Gradient),
        b"dropped_events" => parse(bytes, TraceEvent::DroppedEvents),
        b"terminal" => parse(bytes, TraceEvent::Terminal),
        _ => None,
    }
}

/// A line whose `kind` key appears twice is an error: serde reads the first, other JSON readers
/// the last, so the event would depend on the reader. The bytes `"kind"` appear at most once in
/// nearly every line, so the exact check (the object's top-level keys) runs only when they
/// appear twice.
fn duplicate_kind(bytes: &[u8], line: u64) -> Option<LoadError> {
    let mut hits = memchr::memmem::find_iter(bytes, b"\"kind\"");
    hits.next()?;
    hits.next()?;
    struct Keys(u32);
    impl<'de> serde::de::Visitor<'de> for Keys {
        type Value = u32;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("an object")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(mut self, mut map: A) -> Result<u32, A::Error> {
            while let Some(key) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                if key == "kind" {
                    self.0 += 1;
                }
                map.next_value::<serde::de::IgnoredAny>()?;
            }
            Ok(self.0)
        }
    }
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let count = serde::Deserializer::deserialize_map(&mut de, Keys(0)).ok()?;
    (count > 1).then(|| LoadError::Field {
        line,
        kind: "?".to_string(),
        field: "kind".to_string(),
        message: format!(
            "the key `kind` appears {count} times (JSON readers disagree on which one counts; keep one)"
        ),
    })
}

fn looks_like_kind(bytes: &[u8], kind: &[u8]) -> bool {
    #[derive(Deserialize)]
    struct Kind<'a> {
        #[serde(borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    serde_json::from_slice::<Kind>(bytes).is_ok_and(|k| k.kind.as_bytes() == kind)
}

fn typed<T: DeserializeOwned>(bytes: &[u8], line: u64, kind: &str) -> Result<T, LoadError> {
    let mut de = serde_json::Deserializer::from_slice(bytes);
    serde_path_to_error::deserialize(&mut de).map_err(|err| {
        let field = err.path().to_string();
        let inner = err.into_inner();
        if inner.is_syntax() || inner.is_eof() {
            LoadError::Malformed {
                line,
                message: syntax_message(&inner),
            }
        } else {
            field_error(line, kind, &field, &inner.to_string())
        }
    })
}

/// serde_json's message for one event's line, with the position as a column: serde counts
/// lines inside the text it was given (always line 1 of one event), which beside the file's
/// line number reads as a contradiction.
fn syntax_message(err: &serde_json::Error) -> String {
    let text = err.to_string();
    match text.rsplit_once(" at line ") {
        Some((message, _)) if err.column() > 0 => format!("{message} at column {}", err.column()),
        Some((message, _)) => message.to_string(),
        None => text,
    }
}

fn field_error(line: u64, kind: &str, path: &str, message: &str) -> LoadError {
    // serde reports a missing field at the enclosing path with "missing field `x`".
    // and a field given twice with "duplicate field `x`", also at the enclosing path
    let missing = message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("duplicate field `"))
        .and_then(|rest| rest.split('`').next());
    let field = match (missing, path) {
        (Some(name), "." | "") => name.to_string(),
        (Some(name), p) => format!("{p}.{name}"),
        (None, "." | "") => "?".to_string(),
        (None, p) => p.to_string(),
    };
    let message = message
        .rsplit_once(" at line ")
        .map_or(message, |(m, _)| m)
        .to_string();
    LoadError::Field {
        line,
        kind: kind.to_string(),
        field,
        message,
    }
}

/// The diagnosis of one body type: the field path of the first missing or mistyped field.
struct Typed<'a> {
    bytes: &'a [u8],
    line: u64,
    kind: &'a str,
}

impl BodyVisitor for Typed<'_> {
    type Output = LoadError;

    fn visit<T: DeserializeOwned>(self, _kind: &'static str) -> LoadError {
        match typed::<T>(self.bytes, self.line, self.kind) {
            Err(err) => err,
            Ok(_) => LoadError::Malformed {
                line: self.line,
                message: "event does not parse".to_string(),
            },
        }
    }
}

/// The slow path: say precisely why `bytes` is not a valid event.
fn diagnose(bytes: &[u8], line: u64) -> LoadError {
    let value: serde_json::Value = match serde_json::from_slice(bytes) {
        Ok(v) => v,
        Err(err) => {
            let message = match std::str::from_utf8(bytes) {
                Ok(_) => {
                    crate::surrogate::lone_surrogate(bytes).unwrap_or_else(|| syntax_message(&err))
                }
                Err(utf8) => format!("not valid UTF-8 ({utf8})"),
            };
            return LoadError::Malformed { line, message };
        }
    };
    let Some(object) = value.as_object() else {
        return LoadError::Malformed {
            line,
            message: "an event must be a JSON object".to_string(),
        };
    };
    let kind = match object.get("kind") {
        Some(serde_json::Value::String(kind)) => kind.clone(),
        Some(_) => return field_error(line, "?", "kind", "must be a string"),
        None => return field_error(line, "?", "", "missing field `kind`"),
    };
    let typed_check = || Typed {
        bytes,
        line,
        kind: &kind,
    };
    macro_rules! check {
        ($ty:ty) => {
            typed_check().visit::<$ty>("")
        };
    }
    match kind.as_str() {
        "meta" => match object.get("schema") {
            Some(serde_json::Value::String(_)) => check!(crate::meta::RunMeta),
            Some(_) => field_error(line, "meta", "schema", "must be a string"),
            None => field_error(line, "meta", "", "missing field `schema`"),
        },
        "edge" => match object.get("edge_kind").and_then(|k| k.as_str()) {
            Some("call") => check!(CallEdge),
            Some("data") => check!(DataEdge),
            Some(_) => field_error(
                line,
                "edge",
                "edge_kind",
                "unknown variant, expected `call` or `data`",
            ),
            None if object.contains_key("edge_kind") => {
                field_error(line, "edge", "edge_kind", "must be a string")
            }
            None => field_error(line, "edge", "", "missing field `edge_kind`"),
        },
        // Every other kind: its body type, from the one table of kinds (trace-wire's
        // `trace_events!`).
        _ => TraceEvent::visit_body(
            &kind,
            Typed {
                bytes,
                line,
                kind: &kind,
            },
        )
        .unwrap_or_else(|| LoadError::UnknownKind {
            line,
            kind: kind.clone(),
        }),
    }
}

/// Per-version presence rules the shared types cannot express (they hold every field that
/// arrived later as optional).
fn check_version_rules(
    event: &TraceEvent,
    line: u64,
    version: SchemaVersion,
) -> Result<(), LoadError> {
    let kind = event.kind_name();
    if !version.allows_kind(kind) {
        return Err(LoadError::UnsupportedSchema {
            line,
            schema: version.as_str().to_string(),
            detail: format!(": `{kind}` events do not exist in this version"),
        });
    }
    let missing = |field: &str| {
        Err(LoadError::Field {
            line,
            kind: kind.to_string(),
            field: field.to_string(),
            message: format!("missing field `{field}`"),
        })
    };
    match event {
        TraceEvent::Memory(m) => {
            let present = MemoryPresence {
                action: m.action,
                bytes: m.bytes.is_some(),
                span_id: m.span_id.is_some(),
                storage_id: m.storage_id.is_some(),
                tensor_id: m.tensor_id.is_some(),
                dtype: m.dtype.is_some(),
            };
            if let Some(field) = memory_missing_field(&present, version) {
                return missing(field);
            }
        }
        TraceEvent::TensorStats(t) if version == SchemaVersion::V10 => {
            for (name, value) in [("rms", t.rms), ("abs_max", t.abs_max), ("mean", t.mean)] {
                if value.is_none() {
                    return missing(name);
                }
            }
        }
        TraceEvent::DeviceMemory(d) if version == SchemaVersion::V6 => {
            if d.used_bytes.is_none() {
                return missing("used_bytes");
            }
            if d.free_bytes.is_none() {
                return missing("free_bytes");
            }
        }
        // trace/8–10 required these (the original's `TraceRunMeta`); trace/11 writes each only
        // when known.
        TraceEvent::Meta(meta) if (SchemaVersion::V8..=SchemaVersion::V10).contains(&version) => {
            let run = &meta.run;
            if run.correlation_id.is_none() {
                return missing("correlation_id");
            }
            if run.capture_step.is_none() {
                return missing("capture_step");
            }
            if run.warmup_steps.is_none() {
                return missing("warmup_steps");
            }
            if run.device.is_none() {
                return missing("device");
            }
            if run.phase.is_none() {
                return missing("phase");
            }
        }
        TraceEvent::Meta(meta) if meta.run.phase.is_none() => return missing("phase"),
        _ => {}
    }
    Ok(())
}

/// trace/6 `tensor.storage_bytes` was the dense size.
fn legacy_fixups(event: TraceEvent, legacy: bool) -> TraceEvent {
    match event {
        TraceEvent::Tensor(mut t) if legacy => {
            if t.dense_bytes.is_none() {
                t.dense_bytes = t.storage_bytes.take();
            }
            TraceEvent::Tensor(t)
        }
        other => other,
    }
}
