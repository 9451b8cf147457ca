//! Pretty JSON whose strings cannot steer a terminal: serde_json escapes the C0 controls, but
//! writes DEL, the C1 controls (U+0080–U+009F; U+009B is a CSI that some terminals act on) and
//! the bidirectional controls raw, which is valid JSON but reaches the screen when the output is
//! printed. [`SafeFormatter`] writes them as `\uXXXX` escapes, so the JSON means exactly the
//! same to a parser and shows nothing live to a person.

use std::io::{self, Write};

use serde_json::ser::{Formatter, PrettyFormatter};

/// Whether `c` must not reach a terminal raw (beyond serde_json's C0 escapes).
fn is_unsafe(c: char) -> bool {
    matches!(c, '\u{7f}'..='\u{9f}' | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// serde_json's pretty formatter with DEL, C1 and bidirectional controls escaped.
#[derive(Debug, Default)]
pub struct SafeFormatter<'a>(PrettyFormatter<'a>);

impl SafeFormatter<'_> {
    /// A pretty formatter (two-space indent).
    pub fn new() -> Self {
        Self(PrettyFormatter::new())
    }
}

impl Formatter for SafeFormatter<'_> {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        w: &mut W,
        fragment: &str,
    ) -> io::Result<()> {
        let mut start = 0;
        for (i, c) in fragment.char_indices() {
            if is_unsafe(c) {
                w.write_all(&fragment.as_bytes()[start..i])?;
                write!(w, "\\u{:04x}", c as u32)?;
                start = i + c.len_utf8();
            }
        }
        w.write_all(&fragment.as_bytes()[start..])
    }
    fn begin_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_array(w)
    }
    fn end_array<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array(w)
    }
    fn begin_array_value<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_array_value(w, first)
    }
    fn end_array_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_array_value(w)
    }
    fn begin_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object(w)
    }
    fn end_object<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object(w)
    }
    fn begin_object_key<W: ?Sized + Write>(&mut self, w: &mut W, first: bool) -> io::Result<()> {
        self.0.begin_object_key(w, first)
    }
    fn begin_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.begin_object_value(w)
    }
    fn end_object_value<W: ?Sized + Write>(&mut self, w: &mut W) -> io::Result<()> {
        self.0.end_object_value(w)
    }
}

/// Writes `value` as pretty JSON with [`SafeFormatter`].
///
/// # Errors
/// Write and serialization errors.
pub fn to_writer_pretty<W: Write, T: serde::Serialize + ?Sized>(
    w: W,
    value: &T,
) -> serde_json::Result<()> {
    let mut ser = serde_json::Serializer::with_formatter(w, SafeFormatter::new());
    value.serialize(&mut ser)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_are_escaped_and_the_json_means_the_same() {
        let name = "a\u{9b}31mb\u{202e}c\u{7f}d\u{1}é数";
        let mut out = Vec::new();
        to_writer_pretty(&mut out, &serde_json::json!({ "name": name, "n": [1, 2] })).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(
            text.contains(r#""a\u009b31mb\u202ec\u007fd\u0001é数""#),
            "{text}"
        );
        assert!(!text.chars().any(is_unsafe));
        let back: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(back["name"], name);
        // Pretty: the same layout as serde_json's own.
        let plain = serde_json::to_string_pretty(&serde_json::json!({ "n": [1, 2] })).unwrap();
        let mut ours = Vec::new();
        to_writer_pretty(&mut ours, &serde_json::json!({ "n": [1, 2] })).unwrap();
        assert_eq!(String::from_utf8(ours).unwrap(), plain);
    }
}
