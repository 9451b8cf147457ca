//! What a file is, decided by its content (never by its name): gzip by its magic bytes, then a
//! candle-graph JSONL trace (its first line is a JSON object with a `kind`), a Chrome trace (a
//! JSON array of events, or an object with a `traceEvents` key, as Kineto writes), or neither.

use std::borrow::Cow;
use std::io::Read;

/// The two magic bytes that open a gzip member (RFC 1952 §2.3.1).
pub const GZIP_MAGIC: [u8; 2] = [0x1f, 0x8b];

/// What the decompressed content looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContentKind {
    /// A candle-graph JSONL trace: the first line is a JSON object with a `kind` field.
    CandleTrace,
    /// A Chrome trace: a JSON array, or a JSON object with a `traceEvents` key (Kineto).
    ChromeTrace,
    /// Anything else (empty, not JSON, another JSON document); the candle-graph loader's errors
    /// explain it best.
    Unknown,
}

/// How a gzip stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GzipInfo {
    /// Bytes of the compressed file.
    pub compressed_bytes: u64,
    /// Bytes decompressed (all of them, or those before the damage).
    pub decompressed_bytes: u64,
    /// Set when the stream is cut short or damaged: what the decompressor said. The bytes
    /// before the damage are kept.
    pub damage: Option<String>,
}

/// A file's content, decompressed when it was gzip.
#[derive(Debug, Clone)]
pub struct Decoded<'a> {
    /// The (decompressed) bytes.
    pub bytes: Cow<'a, [u8]>,
    /// Present when the file was gzip.
    pub gzip: Option<GzipInfo>,
}

/// Why a file could not be decoded at all.
#[derive(Debug, thiserror::Error)]
pub enum DecodeError {
    /// The gzip stream yielded no byte.
    #[error("gzip stream is damaged before its first byte: {0}")]
    Gzip(String),
}

/// Decompresses `bytes` when they start with the gzip magic (all members of a multi-member
/// file); otherwise borrows them. A stream cut short or damaged keeps what was decompressed
/// before the damage and says so in [`GzipInfo::damage`].
///
/// # Errors
/// [`DecodeError::Gzip`] when a gzip stream yields nothing at all.
pub fn decode(bytes: &[u8]) -> Result<Decoded<'_>, DecodeError> {
    if !bytes.starts_with(&GZIP_MAGIC) {
        return Ok(Decoded {
            bytes: Cow::Borrowed(bytes),
            gzip: None,
        });
    }
    let mut decoder = flate2::read::MultiGzDecoder::new(bytes);
    // Traces compress about tenfold; the reservation is capped, the vector grows past it.
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(8).min(1 << 28));
    let mut chunk = vec![0u8; 1 << 16];
    let damage = loop {
        match decoder.read(&mut chunk) {
            Ok(0) => break None,
            Ok(n) => out.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                let what = if e.kind() == std::io::ErrorKind::UnexpectedEof {
                    "the gzip stream is cut short".to_string()
                } else {
                    format!("the gzip stream is damaged ({e})")
                };
                break Some(what);
            }
        }
    };
    if out.is_empty() {
        if let Some(d) = damage {
            return Err(DecodeError::Gzip(d));
        }
    }
    let info = GzipInfo {
        compressed_bytes: bytes.len() as u64,
        decompressed_bytes: out.len() as u64,
        damage,
    };
    Ok(Decoded {
        bytes: Cow::Owned(out),
        gzip: Some(info),
    })
}

/// Classifies decompressed content (see [`ContentKind`]). Reads the first line and, for a JSON
/// object whose first line is not a whole object, looks for the `"traceEvents"` key. O(n).
pub fn content_kind(bytes: &[u8]) -> ContentKind {
    let bytes = bytes
        .strip_prefix(b"\xef\xbb\xbf".as_slice())
        .unwrap_or(bytes);
    let Some(first) = bytes.iter().position(|b| !b.is_ascii_whitespace()) else {
        return ContentKind::Unknown;
    };
    let rest = &bytes[first..];
    match rest[0] {
        b'[' => return ContentKind::ChromeTrace,
        b'{' => {}
        _ => return ContentKind::Unknown,
    }
    let line_end = rest.iter().position(|&b| b == b'\n').unwrap_or(rest.len());
    if let Ok(serde_json::Value::Object(map)) =
        serde_json::from_slice::<serde_json::Value>(&rest[..line_end])
    {
        if map.contains_key("kind") {
            return ContentKind::CandleTrace;
        }
        if map.contains_key("traceEvents") {
            return ContentKind::ChromeTrace;
        }
        return ContentKind::Unknown;
    }
    const KEY: &[u8] = b"\"traceEvents\"";
    if rest.windows(KEY.len()).any(|w| w == KEY) {
        ContentKind::ChromeTrace
    } else {
        ContentKind::Unknown
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gz(data: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all(data).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn kinds() {
        let candle = br#"{"kind":"meta","schema":"candle-graph/trace/11"}
{"kind":"terminal"}"#;
        assert_eq!(content_kind(candle), ContentKind::CandleTrace);
        assert_eq!(
            content_kind(b"{\n  \"schemaVersion\": 1,\n  \"traceEvents\": [\n"),
            ContentKind::ChromeTrace
        );
        assert_eq!(
            content_kind(br#"{"traceEvents":[]}"#),
            ContentKind::ChromeTrace
        );
        assert_eq!(
            content_kind(b"  [{\"ph\":\"X\"}]"),
            ContentKind::ChromeTrace
        );
        assert_eq!(
            content_kind(br#"{"name":"package.json"}"#),
            ContentKind::Unknown
        );
        assert_eq!(content_kind(b"hello"), ContentKind::Unknown);
        assert_eq!(content_kind(b""), ContentKind::Unknown);
    }

    #[test]
    fn gzip_whole_and_cut() {
        let data = b"{\"traceEvents\":[]}".repeat(1000);
        let packed = gz(&data);
        let whole = decode(&packed).unwrap();
        assert_eq!(whole.bytes.as_ref(), data.as_slice());
        assert_eq!(whole.gzip.as_ref().unwrap().damage, None);
        let cut = decode(&packed[..packed.len() - 10]).unwrap();
        let info = cut.gzip.unwrap();
        assert!(info.damage.unwrap().contains("cut short"));
        assert!(data.starts_with(&cut.bytes));
        assert!(matches!(decode(&packed[..5]), Err(DecodeError::Gzip(_))));
        let plain = decode(b"abc").unwrap();
        assert!(plain.gzip.is_none() && matches!(plain.bytes, Cow::Borrowed(_)));
    }
}
