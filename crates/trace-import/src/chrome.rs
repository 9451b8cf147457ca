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
    /// The `candle_graph` metadata the profiling script added (`prof.add_metadata_json`):
    /// what a Kineto trace cannot say about its own run. Absent or malformed: nothing known.
    pub candle_graph: Option<ScriptMeta>,
}

/// What a profiling script declares about its run under the top-level key `candle_graph`
/// (`prof.add_metadata_json("candle_graph", json.dumps({...}))`; see
/// `xtask/pytorch/profile_fixtures.py`). Every field optional; wrong types are ignored.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct ScriptMeta {
    /// Steps run before the recorded one (the profiler schedule's wait + warm-up, and any
    /// steps before the profiler).
    #[serde(default, deserialize_with = "lenient")]
    pub warmup_steps: Option<u64>,
    /// The recorded step's 1-based number.
    #[serde(default, deserialize_with = "lenient")]
    pub capture_step: Option<u64>,
    /// `torch.get_num_threads()`.
    #[serde(default, deserialize_with = "lenient")]
    pub intra_op_threads: Option<u64>,
    /// `torch.__version__`.
    #[serde(default, deserialize_with = "lenient")]
    pub torch_version: Option<String>,
    /// The host.
    #[serde(default, deserialize_with = "lenient")]
    pub host: Option<ScriptHost>,
}

/// The host a script ran on.
#[derive(Debug, Default, Clone, PartialEq, Eq, serde::Deserialize)]
pub(crate) struct ScriptHost {
    #[serde(default, deserialize_with = "lenient")]
    pub os: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub arch: Option<String>,
    #[serde(default, deserialize_with = "lenient")]
    pub cpu_count: Option<u64>,
    #[serde(default, deserialize_with = "lenient")]
    pub memory_bytes: Option<u64>,
}

/// A field of the wrong type reads as absent, not as an error (the metadata is a courtesy).
fn lenient<'de, D: Deserializer<'de>, T: serde::de::DeserializeOwned>(
    d: D,
) -> Result<Option<T>, D::Error> {
    let v = serde_json::Value::deserialize(d)?;
    Ok(serde_json::from_value(v).ok())
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
    /// Set when a key the import reads appeared twice (the error names it).
    pub duplicate: Option<String>,
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
    /// A top-level key the import reads appears twice (JSON readers disagree on which one
    /// counts: some keep the first, some the last, this one concatenated `traceEvents`), at
    /// `line:column` of the second.
    DuplicateKey {
        line: usize,
        column: usize,
        key: String,
    },
}

/// The UTF-8 byte order mark some editors and exporters put first.
pub(crate) const BOM: &[u8] = b"\xef\xbb\xbf";

/// Splits `bytes` into raw events (see the module docs). A UTF-8 byte order mark before the
/// document is skipped.
pub(crate) fn read(bytes: &[u8]) -> (RawTrace<'_>, ReadEnd) {
    let bytes = bytes.strip_prefix(BOM).unwrap_or(bytes);
    let mut out = RawTrace {
        form: None,
        has_trace_events: false,
        header: Header::default(),
        events: Vec::new(),
        keys: Vec::new(),
        duplicate: None,
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
        Err(e) if out.duplicate.is_some() => ReadEnd::DuplicateKey {
            line: e.line(),
            column: e.column(),
            key: out.duplicate.take().unwrap_or_default(),
        },
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
        let mut seen: Vec<&'static str> = Vec::new();
        while let Some(key) = map.next_key::<Cow<'de, str>>()? {
            if let Some(&read) = READ_KEYS.iter().find(|&&k| k == key.as_ref()) {
                if seen.contains(&read) {
                    self.out.duplicate = Some(read.to_string());
                    return Err(serde::de::Error::custom(format!("duplicate key `{read}`")));
                }
                seen.push(read);
            }
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
                "candle_graph" => {
                    // `add_metadata_json` stores an object; some writers store it as a string.
                    let v: serde_json::Value = map.next_value()?;
                    let v = match v {
                        serde_json::Value::String(text) => {
                            serde_json::from_str(&text).unwrap_or(serde_json::Value::Null)
                        }
                        other => other,
                    };
                    h.candle_graph = serde_json::from_value(v).ok();
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

/// The top-level keys the import reads: each may appear once.
const READ_KEYS: &[&str] = &[
    "traceEvents",
    "schemaVersion",
    "traceName",
    "trace_id",
    "baseTimeNanoseconds",
    "profile_memory",
    "record_shapes",
    "with_stack",
    "deviceProperties",
    "candle_graph",
];

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
    /// An integer in any JSON form (`1`, `1.0`, `1e0`: one key) is a number; any other number
    /// keeps its text; a string is text.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&RawValue>::deserialize(d)?;
        let text = raw.get();
        if text.starts_with('"') {
            let s: String = serde_json::from_str(text).map_err(serde::de::Error::custom)?;
            return Ok(Key::Text(s));
        }
        match crate::time::integer(text) {
            Ok(v) => Ok(Key::Num(v)),
            Err(crate::time::NumberError::NotANumber) => {
                Err(serde::de::Error::custom("expected an integer or a string"))
            }
            Err(_) => Ok(Key::Text(text.to_string())),
        }
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
    /// Read from the number's text, exactly in every JSON form (`64`, `6.4e1`, `64.0`); a
    /// fraction, a magnitude above 10^30 or a value that is not a number is `Invalid`.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw = <&RawValue>::deserialize(d)?;
        Ok(match crate::time::integer(raw.get()) {
            Ok(v) => Int::Value(v),
            Err(_) => Int::Invalid,
        })
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
        // a byte order mark first is skipped
        let (raw, end) = read(b"\xef\xbb\xbf[{\"ph\":\"X\"}]");
        assert!(matches!(end, ReadEnd::Whole), "{end:?}");
        assert_eq!(raw.events.len(), 1);
        // a key that changes the meaning, twice: named with the line of the second
        let (_, end) = read(b"{\"traceEvents\": [],\n \"traceEvents\": [{\"ph\":\"X\"}]}");
        match end {
            ReadEnd::DuplicateKey { line, key, .. } => {
                assert_eq!((line, key.as_str()), (2, "traceEvents"))
            }
            other => panic!("{other:?}"),
        }
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
        // integers in any JSON number form, read exactly from their text
        let e: RawEvent = serde_json::from_str(
            r#"{"ph":"i","pid":1e0,"tid":"7","args":{"Bytes":6.4e1,"Addr":1.5,"Device Type":1e40}}"#,
        )
        .unwrap();
        assert_eq!(
            (e.pid, e.tid),
            (Some(Key::Num(1)), Some(Key::Text("7".into())))
        );
        let a = e.args.unwrap();
        assert_eq!(
            (a.bytes, a.addr, a.device_type),
            (Int::Value(64), Int::Invalid, Int::Invalid)
        );
    }
}
