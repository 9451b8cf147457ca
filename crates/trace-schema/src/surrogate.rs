//! Naming a lone UTF-16 surrogate escape (`"\ud800"` with no `\udc00`–`\udfff` after it, or a
//! trailing one alone): JSON's parser reports it as "unexpected end of hex escape" or "lone
//! leading surrogate", which reads as a cut-short line; the event is whole, its text is not
//! Unicode (issue 46). Linear in the line's length.

/// The message for the first lone surrogate escape of `line` (one event's JSON text), with its
/// column (1-based, in bytes), or `None` when every `\u` escape pairs up.
pub(crate) fn lone_surrogate(line: &[u8]) -> Option<String> {
    let mut i = 0;
    while i < line.len() {
        if line[i] != b'\\' {
            i += 1;
            continue;
        }
        if line.get(i + 1) != Some(&b'u') {
            i += 2; // `\\`, `\"`, `\n`: two bytes, never the start of a `\u`
            continue;
        }
        let Some(unit) = hex4(line, i + 2) else {
            return None; // a malformed escape: the parser's own message says it
        };
        match unit {
            0xD800..=0xDBFF => {
                let pairs = line.get(i + 6) == Some(&b'\\')
                    && line.get(i + 7) == Some(&b'u')
                    && hex4(line, i + 8).is_some_and(|u| (0xDC00..=0xDFFF).contains(&u));
                if !pairs {
                    return Some(message(
                        line,
                        i,
                        "a high (leading) surrogate without its low half",
                    ));
                }
                i += 12;
            }
            0xDC00..=0xDFFF => {
                return Some(message(
                    line,
                    i,
                    "a low (trailing) surrogate without its high half",
                ));
            }
            _ => i += 6,
        }
    }
    None
}

fn message(line: &[u8], at: usize, what: &str) -> String {
    let escape = String::from_utf8_lossy(&line[at..at + 6]);
    format!(
        "lone surrogate `{escape}` at column {}: {what}; a string's \\u escapes must pair \
         \\ud800-\\udbff with \\udc00-\\udfff (the text is not Unicode)",
        at + 1
    )
}

/// The four hex digits at `at`, as a number.
fn hex4(line: &[u8], at: usize) -> Option<u32> {
    let digits = line.get(at..at + 4)?;
    let text = std::str::from_utf8(digits).ok()?;
    u32::from_str_radix(text, 16)
        .ok()
        .filter(|_| text.bytes().all(|b| b.is_ascii_hexdigit()))
}

#[cfg(test)]
mod tests {
    use super::lone_surrogate;

    #[test]
    fn lone_halves_are_named_and_pairs_pass() {
        let m = lone_surrogate(br#"{"a":"x\ud800"}"#).unwrap();
        assert!(m.starts_with("lone surrogate `\\ud800` at column 8"), "{m}");
        let m = lone_surrogate(br#"{"a":"\udc00"}"#).unwrap();
        assert!(m.contains("low (trailing)"), "{m}");
        assert_eq!(lone_surrogate(br#"{"a":"\ud83d\ude00"}"#), None);
        // an escaped backslash before `u` is no escape
        assert_eq!(lone_surrogate(br#"{"a":"\\ud800"}"#), None);
        assert_eq!(lone_surrogate(br#"{"a":"\u00e9"}"#), None);
    }
}
