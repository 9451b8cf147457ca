//! Text from a trace, made safe to print: control characters (C0, DEL, C1) and bidirectional
//! formatting characters are written as visible escapes, so an error or warning naming a trace's
//! strings cannot move a terminal's cursor, recolour it or reorder what a person reads.

/// Bidirectional formatting characters (Unicode UAX #9): marks, embeddings, overrides, isolates.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// `s` with control and bidi characters escaped (`\x1b`, `\u{202e}`); other text unchanged.
pub(crate) fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if (c as u32) < 0x80 && c.is_control() {
            out.push_str(&format!("\\x{:02x}", c as u32));
        } else if c.is_control() || is_bidi_control(c) {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn escapes_controls_and_bidi() {
        assert_eq!(printable("a\x1b[31mb"), "a\\x1b[31mb");
        assert_eq!(printable("x\u{202e}y\u{85}"), "x\\u{202e}y\\u{85}");
        assert_eq!(printable("aten::mm (é, 中)"), "aten::mm (é, 中)");
    }
}
