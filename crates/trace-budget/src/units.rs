//! Sizes and percentages as budget files and gates write them: `6 MiB`, `512 KiB`, `1.5 GiB`,
//! `100 B`, `2 MB` (decimal units), a bare integer of bytes; `40%`, `+5%`. Parsed with checked
//! arithmetic: a size past 2^64 bytes is an error, not a wrap.

use trace_schema::Pass;

/// Binary and decimal byte units, by their names as written.
const UNITS: [(&str, u64); 9] = [
    ("B", 1),
    ("KiB", 1 << 10),
    ("MiB", 1 << 20),
    ("GiB", 1 << 30),
    ("TiB", 1 << 40),
    ("KB", 1_000),
    ("MB", 1_000_000),
    ("GB", 1_000_000_000),
    ("TB", 1_000_000_000_000),
];

/// Parses a size (`6 MiB`, `1.5 GiB`, `4096`, `100 B`) into bytes.
///
/// # Errors
/// A sentence naming what is wrong: the number, the unit (with the units known), or an
/// overflow.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t.starts_with('-') {
        return Err(format!("{t:?} is negative: a size is at least 0 B"));
    }
    if t.starts_with(|c: char| c.is_ascii_alphabetic() || c == '+') || t.is_empty() {
        return Err(format!(
            "{t:?} is not a size: it does not start with a number (a size is a number and a unit, e.g. \"6 MiB\")"
        ));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = (t[..split].trim(), t[split..].trim());
    if unit.starts_with(['e', 'E'])
        && unit[1..].starts_with(|c: char| c.is_ascii_digit() || c == '-' || c == '+')
    {
        return Err(format!(
            "{t:?} has an exponent: write the size as a plain number and a unit (e.g. \"6 MiB\")"
        ));
    }
    let unit_bytes = if unit.is_empty() {
        1
    } else {
        UNITS
            .iter()
            .find(|(name, _)| *name == unit)
            .map(|(_, b)| *b)
            .ok_or_else(|| {
                format!(
                    "{:?} has an unknown unit {:?} (known: B, KiB, MiB, GiB, TiB, KB, MB, GB, TB)",
                    t, unit
                )
            })?
    };
    if number.is_empty() {
        return Err(format!("{t:?} is not a size (e.g. \"6 MiB\")"));
    }
    if let Ok(whole) = number.parse::<u64>() {
        return whole
            .checked_mul(unit_bytes)
            .ok_or_else(|| format!("{t:?} is more than 2^64 bytes"));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{t:?} is not a size (e.g. \"6 MiB\")"))?;
    let bytes = (value * unit_bytes as f64).round();
    if !bytes.is_finite() || bytes >= u64::MAX as f64 {
        return Err(format!("{t:?} is more than 2^64 bytes"));
    }
    Ok(bytes as u64)
}

/// Parses a share (`40%`, `12.5%`) into [0, 1].
///
/// # Errors
/// Not a percentage, or outside 0–100%.
pub fn parse_percent(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let Some(number) = t.strip_suffix('%') else {
        return Err(format!("{t:?} is not a percentage (e.g. \"40%\")"));
    };
    let p: f64 = number
        .trim()
        .parse()
        .map_err(|_| format!("{t:?} is not a percentage (e.g. \"40%\")"))?;
    if !(0.0..=100.0).contains(&p) {
        return Err(format!("{t:?} is outside 0–100%"));
    }
    Ok(p / 100.0)
}

/// A share as a percentage with one decimal, unsigned (`0.4` → `40.0%`).
pub(crate) fn pct(share: f64) -> String {
    format!("{:.1}%", share * 100.0)
}

/// ` in the backward pass`, or nothing.
pub(crate) fn in_pass(pass: Option<Pass>) -> String {
    pass.map(|p| format!(" in the {} pass", p.as_str()))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_in_binary_and_decimal_units() {
        assert_eq!(parse_size("6 MiB"), Ok(6 << 20));
        assert_eq!(parse_size("6MiB"), Ok(6 << 20));
        assert_eq!(parse_size("1.5 KiB"), Ok(1536));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("0 B"), Ok(0));
        assert!(parse_size("-5 MiB").unwrap_err().contains("is negative"));
        assert!(parse_size("NaN MiB")
            .unwrap_err()
            .contains("does not start with a number"));
        assert!(parse_size("inf MiB")
            .unwrap_err()
            .contains("does not start with a number"));
        assert!(parse_size("1.5e400 MiB")
            .unwrap_err()
            .contains("has an exponent"));
        assert!(parse_size("")
            .unwrap_err()
            .contains("does not start with a number"));
        assert_eq!(parse_size("2 MB"), Ok(2_000_000));
        let e = parse_size("6 MiX").unwrap_err();
        assert!(e.contains("unknown unit \"MiX\""), "{e}");
        assert!(parse_size("MiB").unwrap_err().contains("not a size"));
        assert!(parse_size("99999999999 TiB").unwrap_err().contains("2^64"));
        assert!(parse_size("1e30 TiB").is_err());
    }

    #[test]
    fn percentages() {
        assert_eq!(parse_percent("40%"), Ok(0.4));
        assert_eq!(parse_percent(" 12.5 % "), Ok(0.125));
        assert!(parse_percent("40")
            .unwrap_err()
            .contains("not a percentage"));
        assert!(parse_percent("140%").unwrap_err().contains("outside"));
    }
}
