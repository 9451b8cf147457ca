//! # trace-format
//!
//! How candle-graph shows a figure or a name to a person, in one place for every report
//! (the CLI's tables, trace-graph's findings and health messages):
//! - [`bytes`]: binary units (B, KiB, MiB, GiB, TiB, PiB, EiB — IEC 80000-13, powers of 1024,
//!   never mixed with SI labels); [`opt_bytes`] / [`checked_bytes`] for unknown and overflowed
//!   figures, which are never shown as a number;
//! - [`duration`]: ns, µs, ms, s; [`at`]: a time relative to an origin (the start of the
//!   measured region), signed;
//! - [`delta_bytes`], [`delta_duration`], [`percent`]: a change between two runs, always signed
//!   (`+1.50 KiB`, `-2.21 ms`, `-24.8%`);
//! - [`escape`]: text from a trace made safe for a terminal — C0 and C1 controls, DEL and the
//!   bidirectional controls are written visibly (`\x01`, `\u{202e}`), so a trace cannot move the
//!   cursor, recolour or reorder what a person reads;
//! - [`width`] and [`elide`]: display columns (wide CJK characters count two) and elision with
//!   `…` to a column width;
//! - [`markup_escape`]: text inside XML or HTML markup (the five entities, no controls);
//! - [`count`]: a counted noun, singular for one (`1 sample`, `2 samples`).
//!
//! ```
//! assert_eq!(trace_format::bytes(1536), "1.50 KiB");
//! assert_eq!(trace_format::duration(4_560_000), "4.56 ms");
//! assert_eq!(trace_format::at(1_500, 2_000), "-500 ns");
//! assert_eq!(trace_format::escape("a\u{1}b\u{202e}c"), "a\\x01b\\u{202e}c");
//! assert_eq!(trace_format::elide("model/encoder/layer", 10), "model/enc…");
//! assert_eq!(trace_format::width("数据"), 4);
//! ```

#![deny(missing_docs)]

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

mod markup;
mod words;

pub use markup::markup_escape;
pub use words::{count, more};

/// Binary unit labels, each 1024 times the previous.
const BYTE_UNITS: [&str; 7] = ["B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"];

/// How a figure whose checked sum overflowed `u64` reads (never a number).
pub const OVERFLOWED: &str = "overflowed";

/// How an unknown figure reads (never 0).
pub const UNKNOWN: &str = "-";

/// Formats a byte count with a binary unit: `512 B`, `1.50 KiB`, `75.77 GiB`, `16.00 EiB`.
///
/// Values below 1 KiB are exact; larger ones have two decimals.
pub fn bytes(n: u64) -> String {
    if n < 1024 {
        return format!("{n} B");
    }
    let mut value = n as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < BYTE_UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    // 1023.999 KiB would print as "1024.00 KiB": move to the next unit instead.
    if format!("{value:.2}") == "1024.00" && unit < BYTE_UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    format!("{value:.2} {}", BYTE_UNITS[unit])
}

/// Like [`bytes`], [`UNKNOWN`] when not observed.
pub fn opt_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| UNKNOWN.to_string(), bytes)
}

/// Like [`bytes`] for a checked sum: [`OVERFLOWED`] when the sum overflowed (`None`).
pub fn checked_bytes(n: Option<u64>) -> String {
    n.map_or_else(|| OVERFLOWED.to_string(), bytes)
}

/// Formats nanoseconds: `850 ns`, `12.3 µs`, `4.56 ms`, `1.23 s`.
pub fn duration(ns: u64) -> String {
    match ns {
        0..=999 => format!("{ns} ns"),
        1_000..=999_999 => format!("{:.1} µs", ns as f64 / 1e3),
        1_000_000..=999_999_999 => format!("{:.2} ms", ns as f64 / 1e6),
        _ => format!("{:.2} s", ns as f64 / 1e9),
    }
}

/// Like [`duration`], [`UNKNOWN`] when not known.
pub fn opt_duration(ns: Option<u64>) -> String {
    ns.map_or_else(|| UNKNOWN.to_string(), duration)
}

/// A trace time `t_ns` as a person reads it: relative to `origin_ns` (the start of the measured
/// region), negative before it: `4.56 ms`, `-500 ns`.
pub fn at(t_ns: u64, origin_ns: u64) -> String {
    if t_ns >= origin_ns {
        duration(t_ns - origin_ns)
    } else {
        format!("-{}", duration(origin_ns - t_ns))
    }
}

/// A change of a byte count, signed (`+1.50 KiB`, `-512 B`, `0 B`); the magnitude as [`bytes`]
/// (a difference of two `u64` figures: its magnitude fits a `u64`, larger ones saturate).
pub fn delta_bytes(delta: i128) -> String {
    signed(delta, bytes)
}

/// A change of a duration in ns, signed (`+850 ns`, `-2.21 ms`, `0 ns`); the magnitude as
/// [`duration`].
pub fn delta_duration(delta_ns: i128) -> String {
    signed(delta_ns, duration)
}

/// A ratio as a signed percentage with one decimal (`-0.248` → `-24.8%`, `0.0` → `0.0%`); a
/// non-finite ratio reads [`UNKNOWN`].
pub fn percent(ratio: f64) -> String {
    if !ratio.is_finite() {
        return UNKNOWN.to_string();
    }
    let p = ratio * 100.0;
    if format!("{:.1}", p.abs()) == "0.0" {
        return "0.0%".to_string();
    }
    format!("{}{:.1}%", if p < 0.0 { "-" } else { "+" }, p.abs())
}

fn signed(delta: i128, unit: fn(u64) -> String) -> String {
    let magnitude = u64::try_from(delta.unsigned_abs()).unwrap_or(u64::MAX);
    match delta.signum() {
        1 => format!("+{}", unit(magnitude)),
        -1 => format!("-{}", unit(magnitude)),
        _ => unit(0),
    }
}

/// True for the characters [`escape`] rewrites: C0 controls, DEL, C1 controls, the Unicode
/// bidirectional controls (ALM, LRM, RLM, LRE–RLO, LRI–PDI), and the invisible characters that
/// make one name look like another or break a line: soft hyphen, zero-width space, non-joiner
/// and joiner, line and paragraph separators, word joiner and invisible operators, the byte
/// order mark, interlinear annotation controls (Unicode general categories Cc, Cf, Zl, Zp).
pub fn is_unsafe(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{ad}' | '\u{61c}' | '\u{200b}'..='\u{200f}'
        | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}'
        | '\u{feff}' | '\u{fff9}'..='\u{fffb}')
}

/// Text from a trace made safe for a terminal: every [`is_unsafe`] character is written
/// visibly, `\xNN` below U+0100 and `\u{NNNN}` above; everything else is unchanged. Newlines
/// and tabs are escaped too: one name is one line.
pub fn escape(s: &str) -> Cow<'_, str> {
    if !s.chars().any(is_unsafe) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if !is_unsafe(c) {
            out.push(c);
        } else if (c as u32) < 0x100 {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            let _ = write!(out, "\\u{{{:x}}}", c as u32);
        }
    }
    Cow::Owned(out)
}

/// Display columns of `s` in a terminal (wide CJK characters count two, combining marks
/// zero). Meant for text already passed through [`escape`].
pub fn width(s: &str) -> usize {
    s.chars().map(|c| c.width().unwrap_or(0)).sum()
}

/// `s` cut to at most `max` display columns, ending in `…` when cut (the full text belongs in
/// `--json`). A `max` of 0 gives "".
pub fn elide(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max {
        return Cow::Borrowed(s);
    }
    if max == 0 {
        return Cow::Borrowed("");
    }
    let mut out = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > max - 1 {
            break;
        }
        out.push(c);
        used += w;
    }
    out.push('…');
    Cow::Owned(out)
}

/// Display columns a name gets in a header line (an entrypoint, a run id, a device): a longer
/// one is elided in the middle ([`name`]), so that hostile or generated names keep the line
/// bounded. JSON outputs keep names whole.
pub const NAME_COLUMNS: usize = 120;

/// `s` elided in the middle to [`NAME_COLUMNS`] and escaped for a terminal or a page's text.
pub fn name(s: &str) -> String {
    escape(&elide_middle(s, NAME_COLUMNS)).into_owned()
}

/// `s` cut to at most `max` display columns by dropping its middle for one `…`: a third of the
/// room keeps the start, the rest the end — for paths (`train_step/…/attn.q_proj`), whose
/// last part names the module. Short strings and `max` below 3 as [`elide`].
pub fn elide_middle(s: &str, max: usize) -> Cow<'_, str> {
    if width(s) <= max || max < 3 {
        return elide(s, max);
    }
    let head_room = (max - 1) / 3;
    let tail_room = max - 1 - head_room;
    let mut head = String::new();
    let mut used = 0;
    for c in s.chars() {
        let w = c.width().unwrap_or(0);
        if used + w > head_room {
            break;
        }
        head.push(c);
        used += w;
    }
    let mut tail: Vec<char> = Vec::new();
    let mut used = 0;
    for c in s.chars().rev() {
        let w = c.width().unwrap_or(0);
        if used + w > tail_room {
            break;
        }
        tail.push(c);
        used += w;
    }
    // a combining mark cut from its base would sit on the `…`
    while tail.last().is_some_and(|&c| c.width() == Some(0)) {
        tail.pop();
    }
    head.push('…');
    head.extend(tail.into_iter().rev());
    Cow::Owned(head)
}

/// A sentence from a trace's analysis (a finding's summary) ready for a terminal line: escaped,
/// and every word (a run without spaces: a span path, a label) over [`NAME_COLUMNS`] elided in
/// the middle, so that a hostile or generated name in it keeps the line bounded while the prose
/// around it stays whole. JSON outputs keep the sentence whole.
pub fn sentence(s: &str) -> String {
    let escaped = escape(s);
    if width(&escaped) <= NAME_COLUMNS {
        return escaped.into_owned();
    }
    escaped
        .split(' ')
        .map(|w| elide_middle(w, NAME_COLUMNS))
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`escape`] then [`elide_middle`]: a span path ready for a table cell of `max` columns.
pub fn path_cell(s: &str, max: usize) -> String {
    elide_middle(&escape(s), max).into_owned()
}

/// [`escape`] then [`elide`]: a trace string ready for a table cell of `max` columns.
pub fn cell(s: &str, max: usize) -> String {
    elide(&escape(s), max).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sentence_keeps_its_prose_and_elides_its_long_words() {
        let path = format!("train/{}/attn", "F".repeat(2_000));
        let s = format!("peaks at 5 MiB (in {path}); largest: x \u{1b}[31m");
        let out = sentence(&s);
        assert!(out.starts_with("peaks at 5 MiB (in train/FFF"), "{out}");
        assert!(out.contains("F…F"), "{out}");
        assert!(out.ends_with("F/attn); largest: x \\x1b[31m"), "{out}");
        assert!(width(&out) < 2 * NAME_COLUMNS, "{out}");
        assert_eq!(sentence("short (in a/b)"), "short (in a/b)");
    }

    #[test]
    fn paths_lose_their_middle_not_their_end() {
        let p = "train_step/backward/model.layers.11.self_attn.q_proj.backward";
        let cut = elide_middle(p, 30);
        assert_eq!(cut, "train_ste…attn.q_proj.backward");
        assert_eq!(width(&cut), 30);
        assert_eq!(elide_middle("short", 30), "short");
        assert_eq!(elide_middle(p, 2), "t…");
        // wide characters count two columns on either side
        let wide = "数据数据数据数据数据/模块";
        let cut = elide_middle(wide, 9);
        assert!(width(&cut) <= 9, "{cut}");
        assert!(cut.ends_with("模块"), "{cut}");
        // a combining mark whose base is cut off is dropped with it, not put on the `…`
        assert_eq!(elide_middle("abcdefghij\u{301}xyz", 5), "a…xyz");
        assert_eq!(elide_middle("abcdefghij\u{301}xyz", 8), "ab…ij\u{301}xyz");
        // invisible characters are written visibly
        assert_eq!(
            escape("a\u{200b}b\u{2028}c\u{feff}"),
            "a\\u{200b}b\\u{2028}c\\u{feff}"
        );
        // escaped first: a control character cannot survive the cut
        assert!(!path_cell(&format!("a\u{1b}[2J{}", "x".repeat(80)), 20).contains('\u{1b}'));
    }

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.00 KiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.00 MiB");
        assert_eq!(bytes(81_358_668_431), "75.77 GiB");
        assert_eq!(bytes(1024 * 1024 - 1), "1.00 MiB");
        assert_eq!(bytes(u64::MAX), "16.00 EiB");
        assert_eq!(opt_bytes(None), "-");
        assert_eq!(checked_bytes(None), "overflowed");
        assert_eq!(checked_bytes(Some(5)), "5 B");
    }

    #[test]
    fn durations_and_relative_times() {
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(12_345), "12.3 µs");
        assert_eq!(duration(4_560_000), "4.56 ms");
        assert_eq!(duration(1_230_000_000), "1.23 s");
        assert_eq!(opt_duration(None), "-");
        assert_eq!(at(25_760_000, 9_880_000), "15.88 ms");
        assert_eq!(at(0, 1_000), "-1.0 µs");
    }

    #[test]
    fn changes_are_signed() {
        assert_eq!(delta_bytes(1536), "+1.50 KiB");
        assert_eq!(delta_bytes(-512), "-512 B");
        assert_eq!(delta_bytes(0), "0 B");
        assert_eq!(delta_bytes(-i128::from(u64::MAX)), "-16.00 EiB");
        assert_eq!(delta_duration(-2_210_000), "-2.21 ms");
        assert_eq!(delta_duration(850), "+850 ns");
        assert_eq!(percent(-0.248), "-24.8%");
        assert_eq!(percent(0.00001), "0.0%");
        assert_eq!(percent(1.5), "+150.0%");
        assert_eq!(percent(f64::NAN), "-");
    }

    #[test]
    fn controls_and_bidi_overrides_are_visible() {
        assert_eq!(escape("plain µ 数据"), "plain µ 数据");
        assert!(matches!(escape("plain"), Cow::Borrowed(_)));
        assert_eq!(escape("\u{1b}[31mred"), "\\x1b[31mred");
        assert_eq!(escape("a\nb\tc\u{7f}"), "a\\x0ab\\x09c\\x7f");
        assert_eq!(escape("\u{85}"), "\\x85");
        assert_eq!(escape("abc\u{202e}fed\u{2066}"), "abc\\u{202e}fed\\u{2066}");
    }

    #[test]
    fn widths_count_columns_and_elision_fits_them() {
        assert_eq!(width("abc"), 3);
        assert_eq!(width("数据集"), 6);
        assert_eq!(elide("abcdef", 6), "abcdef");
        assert_eq!(elide("abcdefg", 6), "abcde…");
        assert_eq!(elide("数据集合", 5), "数据…");
        assert_eq!(width(&elide("数据集合", 5)), 5);
        assert_eq!(elide("abc", 0), "");
        assert_eq!(cell("a\u{1}bcdef", 5), "a\\x0…");
    }
}
