//! Reading the Chrome trace event format as Kineto writes it: a JSON object with a
//! `traceEvents` array and a few header keys (`schemaVersion`, `traceName`,
//! `baseTimeNanoseconds`, `profile_memory`, …), or a bare array of events.
//!
//! Source: the Chrome "Trace Event Format" document (phases `X` complete, `i`/`I` instant, `M`
//! metadata, `s`/`t`/`f` flow, …) and Kineto's `ChromeTraceLogger` (`libkineto/src/output_json.cpp`).
//!
//! The array is read element by element into borrowed raw slices, so a document cut short
//! keeps every whole event before the cut; each event is then parsed on its own, so one bad
//! event is skipped and named instead of failing the file.

use std::borrow::Cow;
use std::fmt;

use serde::de::{DeserializeSeed, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

/// Whether the document is an object with `traceEvents` or a bare array.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Form {
    Object,
    Array,
}

/// Header keys of a Kineto trace that the import uses.
#[derive(Debug, Default)]
pub(crate) struct Header {
    pub schema_version: Option<String>,
    pub trace_name: Option<String>,
    pub trace_id: Option<String>,
    /// `baseTimeNanoseconds`: add to `ts × 1000` to get Unix time in ns.
    pub base_time_ns: Option<u64>,
    pub profile_memory: Option<bool>,
    pub record_shapes: Option<bool>,
    pub with_stack: Option<bool>,
    /// Entries of `deviceProperties`.
    pub device_properties: Option<usize>,
}

/// The document split into raw events.
#[derive(Debug)]
pub(crate) struct RawTrace<'a> {
    pub form: Option<Form>,
    pub has_trace_events: bool,
    pub header: Header,
    /// Every whole element of `traceEvents`, in file order.
    pub events: Vec<&'a RawValue>,
    /// Top-level keys that were seen (for the "not a trace" message).
    pub keys: Vec<String>,
}

/// How reading the document ended.
#[derive(Debug)]
pub(crate) enum ReadEnd {
    /// The whole document was read.
    Whole,
    /// The text ends before the document does (a file cut short): the events read so far are
    /// kept.
    CutShort,
    /// The text is not JSON (or not the expected shape) at `line:column`.
    Malformed {
        line: usize,
        column: usize,
        message: String,
        /// Valid JSON of the wrong shape (serde's data category), not a syntax error.
        wrong_shape: bool,
    },
    /// Characters after the document.
    TrailingData { line: usize, column: usize },
}

/// Splits `bytes` into raw events (see the module docs).
pub(crate) fn read(bytes: &[u8]) -> (RawTrace<'_>, ReadEnd) {
    let mut out = RawTrace {
        form: None,
        has_trace_events: false,
        header: Header::default(),
        events: Vec::new(),
        keys: Vec::new(),
    };
    let mut de = serde_json::Deserializer::from_slice(bytes);
    let end = match (TopSeed { out: &mut out }).deserialize(&mut de) {
        Ok(()) => match de.end() {
            Ok(()) => ReadEnd::Whole,
            Err(e) => ReadEnd::TrailingData {
                line: e.line(),
                column: e.column(),
            },
        },
        Err(e) if e.is_eof() => ReadEnd::CutShort,
        Err(e) => ReadEnd::Malformed {
            line: e.line(),
            column: e.column(),
            message: strip_position(&e.to_string()),
            wrong_shape: e.classify() == serde_json::error::Category::Data,
        },
    };
    (out, end)
}

fn strip_position(message: &str) -> String {
    match message.rfind(" at line ") {
        Some(i) => message[..i].to_string(),
        None => message.to_string(),
    }
}

struct TopSeed<'s, 'a> {
    out: &'s mut RawTrace<'a>,
}

impl<'de> DeserializeSeed<'de> for TopSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

fn flag(v: &serde_json::Value) -> Option<bool> {
    match v {
        serde_json::Value::Bool(b) => Some(*b),
        serde_json::Value::Number(n) => n.as_i64().map(|i| i != 0),
        _ => None,
    }
}

impl<'de> Visitor<'de> for TopSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a Chrome trace: an object with `traceEvents` or an array of events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<(), A::Error> {
        self.out.form = Some(Form::Array);
        self.out.has_trace_events = true;
        EventsSeed {
            events: &mut self.out.events,
        }
        .visit_seq(seq)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.out.form = Some(Form::Object);
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            let h = &mut self.out.header;
            match key.as_ref() {
                "traceEvents" => {
                    self.out.has_trace_events = true;
                    map.next_value_seed(EventsSeed {
                        events: &mut self.out.events,
                    })?;
                }
                "schemaVersion" => {
                    let v: serde_json::Value = map.next_value()?;
                    h.schema_version = Some(match v {
                        serde_json::Value::String(s) => s,
                        other => other.to_string(),
                    });
                }
                "traceName" => h.trace_name = map.next_value::<Option<String>>().ok().flatten(),
                "trace_id" => h.trace_id = map.next_value::<Option<String>>().ok().flatten(),
                "baseTimeNanoseconds" => {
                    h.base_time_ns = map.next_value::<serde_json::Value>()?.as_u64();
                }
                "profile_memory" => h.profile_memory = flag(&map.next_value()?),
                "record_shapes" => h.record_shapes = flag(&map.next_value()?),
                "with_stack" => h.with_stack = flag(&map.next_value()?),
                "deviceProperties" => {
                    h.device_properties = match map.next_value::<serde_json::Value>()? {
                        serde_json::Value::Array(a) => Some(a.len()),
                        _ => None,
                    };
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
            if self.out.keys.len() < 16 {
                self.out.keys.push(key.into_owned());
            }
        }
        Ok(())
    }
}

struct EventsSeed<'s, 'a> {
    events: &'s mut Vec<&'a RawValue>,
}

impl<'de> DeserializeSeed<'de> for EventsSeed<'_, 'de> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_seq(self)
    }
}

impl<'de> Visitor<'de> for EventsSeed<'_, 'de> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("an array of trace events")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        while let Some(raw) = seq.next_element::<&'de RawValue>()? {
            self.events.push(raw);
        }
        Ok(())
    }
}

/// A `pid`, `tid` or flow `id`: Kineto writes integers, and strings for its own pseudo
/// processes (`"Spans"`, `"Traces"`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) enum Key {
    Num(i128),
    Text(String),
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        match self {
            Key::Num(n) => write!(f, "{n}"),
            Key::Text(s) => f.write_str(s),
        }
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an integer or a string")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Key, E> {
                Ok(Key::Num(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Key, E> {
                Ok(Key::Num(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Key, E> {
                Ok(Key::Text(v.to_string()))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key, E> {
                Ok(Key::Text(v.to_string()))
            }
        }
        d.deserialize_any(V)
    }
}

/// An `args` value the import reads as an integer; anything else is kept as `Invalid` so the
/// event can be named instead of failing the parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Int {
    #[default]
    Absent,
    Value(i128),
    Invalid,
}

impl Int {
    pub fn get(self) -> Option<i128> {
        match self {
            Int::Value(v) => Some(v),
            _ => None,
        }
    }
}

impl<'de> Deserialize<'de> for Int {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Int;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any JSON value")
            }
            fn visit_i64<E>(self, v: i64) -> Result<Int, E> {
                Ok(Int::Value(v.into()))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Int, E> {
                Ok(Int::Value(v.into()))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Int, E> {
                let integral = v.is_finite() && v.fract() == 0.0 && v.abs() < 1e30;
                Ok(if integral {
                    Int::Value(v as i128)
                } else {
                    Int::Invalid
                })
            }
            fn visit_str<E>(self, _: &str) -> Result<Int, E> {
                Ok(Int::Invalid)
            }
            fn visit_bool<E>(self, _: bool) -> Result<Int, E> {
                Ok(Int::Invalid)
            }
            fn visit_unit<E>(self) -> Result<Int, E> {
                Ok(Int::Invalid)
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Int, A::Error> {
                while seq.next_element::<IgnoredAny>()?.is_some() {}
                Ok(Int::Invalid)
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Int, A::Error> {
                while map.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {}
                Ok(Int::Invalid)
            }
        }
        d.deserialize_any(V)
    }
}

/// The `args` fields the import reads (Kineto names, with their spaces and capitals).
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct Args<'a> {
    /// `[memory]`: address of the block.
    #[serde(rename = "Addr")]
    pub addr: Int,
    /// `[memory]`: bytes allocated (> 0) or freed (< 0).
    #[serde(rename = "Bytes")]
    pub bytes: Int,
    /// `[memory]`: the allocator's allocated bytes after the event.
    #[serde(rename = "Total Allocated")]
    pub total_allocated: Int,
    /// `[memory]`: the allocator's reserved bytes after the event (caching allocators).
    #[serde(rename = "Total Reserved")]
    pub total_reserved: Int,
    /// `[memory]`: `c10::DeviceType` (0 CPU, 1 CUDA, …).
    #[serde(rename = "Device Type")]
    pub device_type: Int,
    /// `[memory]`: device index (-1 on the CPU).
    #[serde(rename = "Device Id")]
    pub device_id: Int,
    /// Ops: the record-function id shared with GPU events.
    #[serde(rename = "External id")]
    pub external_id: Int,
    /// Runtime calls and GPU events: the CUPTI correlation id linking a launch to its kernel.
    pub correlation: Int,
    /// GPU events: device index.
    pub device: Int,
    /// GPU events: stream.
    pub stream: Int,
    /// `M` events: the process or thread name.
    #[serde(borrow)]
    pub name: Option<Cow<'a, str>>,
}

/// One trace event with the fields the import reads; times stay raw text until converted.
#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct RawEvent<'a> {
    #[serde(borrow)]
    pub ph: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub cat: Option<Cow<'a, str>>,
    #[serde(borrow)]
    pub name: Option<Cow<'a, str>>,
    pub pid: Option<Key>,
    pub tid: Option<Key>,
    #[serde(borrow)]
    pub ts: Option<&'a RawValue>,
    #[serde(borrow)]
    pub dur: Option<&'a RawValue>,
    pub id: Option<Key>,
    #[serde(borrow)]
    pub args: Option<Args<'a>>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_array_and_cut() {
        let text = br#"{"schemaVersion": 1, "traceName": "t", "baseTimeNanoseconds": 7,
            "traceEvents": [{"ph":"X","ts":1.5,"dur":2}, {"ph":"i"}], "profile_memory": 1}"#;
        let (raw, end) = read(text);
        assert!(matches!(end, ReadEnd::Whole));
        assert_eq!(raw.events.len(), 2);
        assert_eq!(raw.header.schema_version.as_deref(), Some("1"));
        assert_eq!(raw.header.base_time_ns, Some(7));
        assert_eq!(raw.header.profile_memory, Some(true));
        let second = text.windows(9).position(|w| w == br#"{"ph":"i""#).unwrap();
        let cut = &text[..second + 4];
        let (raw, end) = read(cut);
        assert!(matches!(end, ReadEnd::CutShort), "{end:?}");
        assert_eq!(raw.events.len(), 1);
        let (raw, end) = read(b"[{\"ph\":\"X\"}]  x");
        assert!(matches!(end, ReadEnd::TrailingData { .. }));
        assert_eq!(raw.form, Some(Form::Array));
        let (_, end) = read(b"{\"traceEvents\": [}");
        assert!(matches!(end, ReadEnd::Malformed { line: 1, .. }), "{end:?}");
    }

    #[test]
    fn lenient_args() {
        let e: RawEvent = serde_json::from_str(
            r#"{"ph":"i","args":{"Bytes":-5,"Addr":"0x1","Total Allocated":3.0,"Other":[1]}}"#,
        )
        .unwrap();
        let a = e.args.unwrap();
        assert_eq!(a.bytes, Int::Value(-5));
        assert_eq!(a.addr, Int::Invalid);
        assert_eq!(a.total_allocated, Int::Value(3));
        assert_eq!(a.device_type, Int::Absent);
    }
}
