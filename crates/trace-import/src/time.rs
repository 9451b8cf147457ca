//! Exact numbers from JSON text. Chrome-trace times (`ts`, `dur`) are microseconds written as
//! JSON numbers — in Kineto with three fractional digits (nanosecond resolution), by other
//! exporters in exponent form (`1.0158e4`) — and they are read from the number's text, never
//! through an `f64`: `5192767997062.378` becomes exactly `5192767997062378` ns (an `f64` has no
//! digit to spare at that magnitude) and `9.9e3` exactly `9900000` ns, so two events one
//! nanosecond apart stay apart and in order whatever form the exporter chose.

use std::fmt;

/// The largest magnitude an exact number may have (10^30): far beyond any clock or size,
/// well inside `i128`.
const LIMIT: i128 = 1_000_000_000_000_000_000_000_000_000_000;

/// Why a JSON number's text has no exact value here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumberError {
    /// Not a JSON number (`1.`, `.5`, `0x10`, a string, …).
    NotANumber,
    /// A JSON number whose magnitude exceeds 10^30 in the unit asked for.
    OutOfRange,
    /// A JSON number with digits below the unit asked for, where an integer is required.
    NotIntegral,
}

impl fmt::Display for NumberError {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(match self {
            NumberError::NotANumber => "not a JSON number",
            NumberError::OutOfRange => "out of range (magnitude above 10^30)",
            NumberError::NotIntegral => "not an integer",
        })
    }
}

/// A JSON number as ±`digits` × 10^`exp`.
struct Decimal {
    negative: bool,
    /// Significant digits (ASCII), leading zeros removed (empty for zero).
    digits: Vec<u8>,
    /// Power of ten of the last digit; saturated far outside the range that matters.
    exp: i64,
}

/// Splits a JSON number (RFC 8259: `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`,
/// surrounding whitespace allowed) into its digits and exponent.
fn decimal(text: &str) -> Result<Decimal, NumberError> {
    let b = text.trim().as_bytes();
    let mut i = 0;
    let negative = b.first() == Some(&b'-');
    if negative {
        i += 1;
    }
    let int_start = i;
    while i < b.len() && b[i].is_ascii_digit() {
        i += 1;
    }
    let int = &b[int_start..i];
    if int.is_empty() || (int.len() > 1 && int[0] == b'0') {
        return Err(NumberError::NotANumber);
    }
    let mut frac: &[u8] = &[];
    if b.get(i) == Some(&b'.') {
        i += 1;
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        frac = &b[s..i];
        if frac.is_empty() {
            return Err(NumberError::NotANumber);
        }
    }
    let mut exp: i64 = 0;
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        let minus = match b.get(i) {
            Some(b'-') => {
                i += 1;
                true
            }
            Some(b'+') => {
                i += 1;
                false
            }
            _ => false,
        };
        let s = i;
        while i < b.len() && b[i].is_ascii_digit() {
            // Saturate: anything past 10^9 is out of every range or zero.
            exp = (exp * 10 + i64::from(b[i] - b'0')).min(1_000_000_000);
            i += 1;
        }
        if i == s {
            return Err(NumberError::NotANumber);
        }
        if minus {
            exp = -exp;
        }
    }
    if i != b.len() {
        return Err(NumberError::NotANumber);
    }
    let mut all: Vec<u8> = Vec::with_capacity(int.len() + frac.len());
    all.extend_from_slice(int);
    all.extend_from_slice(frac);
    let zeros = all.iter().take_while(|&&d| d == b'0').count();
    all.drain(..zeros);
    Ok(Decimal {
        negative,
        digits: all,
        exp: exp - frac.len() as i64,
    })
}

/// The value of a JSON number's `text` times 10^`scale`, exactly, as an integer: digits below
/// the unit round to the nearest (half away from zero) when `round`, else are an error
/// ([`NumberError::NotIntegral`]). Every form JSON allows is read: exponent (`1.0158e4`,
/// `1E+2`), fraction, negative zero (`-0.0` is 0).
///
/// # Errors
/// [`NumberError`]: not a JSON number, a magnitude above 10^30, or (without `round`) digits
/// below the unit.
pub(crate) fn scaled(text: &str, scale: i64, round: bool) -> Result<i128, NumberError> {
    let d = decimal(text)?;
    if d.digits.is_empty() {
        return Ok(0);
    }
    let exp = d.exp + scale;
    let len = d.digits.len() as i64;
    let (kept, dropped): (&[u8], &[u8]) = if exp >= 0 {
        (&d.digits, &[])
    } else if len + exp > 0 {
        d.digits.split_at((len + exp) as usize)
    } else {
        (&[], &d.digits)
    };
    // Digits of the integer part: the kept digits and `exp` zeros.
    let int_len = kept.len() as i64 + exp.max(0);
    if int_len > 31 {
        return Err(NumberError::OutOfRange);
    }
    let mut v: i128 = 0;
    for &c in kept {
        v = v * 10 + i128::from(c - b'0');
    }
    for _ in 0..exp.max(0) {
        v *= 10;
    }
    // Only the first dropped digit decides, when it lies just below the unit.
    let below_unit = len + exp >= 0;
    if dropped.iter().any(|&c| c != b'0') {
        if !round {
            return Err(NumberError::NotIntegral);
        }
        if below_unit && dropped[0] >= b'5' {
            v += 1;
        }
    }
    if v > LIMIT {
        return Err(NumberError::OutOfRange);
    }
    Ok(if d.negative { -v } else { v })
}

/// Nanoseconds of a JSON number of microseconds, exactly from its text (rounded to the nearest
/// nanosecond, half away from zero, past the third fractional digit). See [`scaled`].
///
/// # Errors
/// As [`scaled`].
pub(crate) fn micros_to_ns(text: &str) -> Result<i128, NumberError> {
    scaled(text, 3, true)
}

/// An exact integer from a JSON number's text in any form (`64`, `6.4e1`, `64.0`).
///
/// # Errors
/// As [`scaled`] without rounding: a fraction that is not zero is [`NumberError::NotIntegral`].
pub(crate) fn integer(text: &str) -> Result<i128, NumberError> {
    scaled(text, 0, false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_at_kineto_magnitudes() {
        assert_eq!(micros_to_ns("5192767997062.378"), Ok(5_192_767_997_062_378));
        assert_eq!(micros_to_ns("5192767997062.379"), Ok(5_192_767_997_062_379));
        assert_eq!(micros_to_ns("12"), Ok(12_000));
        assert_eq!(micros_to_ns("0.5"), Ok(500));
        assert_eq!(micros_to_ns("0.0004"), Ok(0));
        assert_eq!(micros_to_ns("0.0005"), Ok(1));
        assert_eq!(micros_to_ns("-3.25"), Ok(-3250));
        assert_eq!(micros_to_ns("-0.0005"), Ok(-1));
    }

    #[test]
    fn every_json_number_form_is_exact() {
        // issue 32: through an f64, 9.9e3 µs read as 10,108 ns at these magnitudes' rounding
        assert_eq!(micros_to_ns("9.9e3"), Ok(9_900_000));
        assert_eq!(micros_to_ns("1.0158e4"), Ok(10_158_000));
        assert_eq!(micros_to_ns("1.5e3"), Ok(1_500_000));
        assert_eq!(micros_to_ns("1E+2"), Ok(100_000));
        assert_eq!(micros_to_ns("15e-1"), Ok(1_500));
        assert_eq!(micros_to_ns("1e-3"), Ok(1));
        assert_eq!(micros_to_ns("4e-4"), Ok(0));
        assert_eq!(micros_to_ns("5e-4"), Ok(1));
        assert_eq!(micros_to_ns("1e-999999999999"), Ok(0));
        assert_eq!(micros_to_ns("-0"), Ok(0));
        assert_eq!(micros_to_ns("-0.0e5"), Ok(0));
        assert_eq!(micros_to_ns("0e999999"), Ok(0));
        // 2^53 + 1 µs is not an f64; its text is exact
        assert_eq!(
            micros_to_ns("9.007199254740993e15"),
            Ok(9_007_199_254_740_993_000)
        );
        assert_eq!(
            micros_to_ns("5.192767997062378e12"),
            Ok(5_192_767_997_062_378)
        );
        assert_eq!(
            micros_to_ns("5192767.997062378e6"),
            Ok(5_192_767_997_062_378)
        );
        assert_eq!(integer("6.4e1"), Ok(64));
        assert_eq!(integer("64.000"), Ok(64));
        assert_eq!(integer("-5"), Ok(-5));
        assert_eq!(integer("64.5"), Err(NumberError::NotIntegral));
        assert_eq!(integer("1e-1"), Err(NumberError::NotIntegral));
    }

    #[test]
    fn what_cannot_be_represented_is_named() {
        assert_eq!(micros_to_ns("1e999"), Err(NumberError::OutOfRange));
        assert_eq!(micros_to_ns("1e28"), Err(NumberError::OutOfRange));
        assert_eq!(micros_to_ns("1e27"), Ok(LIMIT));
        assert_eq!(
            integer("123456789012345678901234567890123"),
            Err(NumberError::OutOfRange)
        );
        for bad in [
            "", "abc", "1.", ".5", "1.2.3", "--1", "\"12\"", "01", "1e", "+1", "NaN", "1e+",
        ] {
            assert_eq!(micros_to_ns(bad), Err(NumberError::NotANumber), "{bad}");
        }
    }

    proptest::proptest! {
        #[test]
        fn order_is_kept(a in 0u64..1u64 << 53, b in 0u64..1u64 << 53) {
            let text = |v: u64| format!("{}.{:03}", v / 1000, v % 1000);
            let (x, y) = (micros_to_ns(&text(a)).unwrap(), micros_to_ns(&text(b)).unwrap());
            proptest::prop_assert_eq!(x, a as i128);
            proptest::prop_assert_eq!(x.cmp(&y), a.cmp(&b));
        }

        #[test]
        fn exponent_forms_agree_with_plain_ones(v in 1u64..1u64 << 62, point in 1usize..20) {
            // v ns = v × 10^-3 µs, written `d.ddd…e<k>` with the point after `point` digits
            let digits = v.to_string();
            let p = point.min(digits.len());
            let (int, frac) = digits.split_at(p);
            let exp = frac.len() as i64 - 3;
            let text = if frac.is_empty() {
                format!("{int}e{exp}")
            } else {
                format!("{int}.{frac}e{exp}")
            };
            proptest::prop_assert_eq!(micros_to_ns(&text).unwrap(), i128::from(v), "{}", text);
            proptest::prop_assert_eq!(micros_to_ns(&format!("{digits}E-3")).unwrap(), i128::from(v));
        }
    }
}
