//! Chrome-trace times: `ts` and `dur` are microseconds written as JSON numbers, in Kineto with
//! three fractional digits (nanosecond resolution). They are read from the number's text so
//! that `5192767997062.378` becomes exactly `5192767997062378` ns: an `f64` has no digit to
//! spare at that magnitude, and two events one nanosecond apart must stay apart and in order.

/// Nanoseconds of a JSON number of microseconds, read exactly from its decimal text.
///
/// Plain decimals (`-?digits(.digits)?`) are exact; digits past the third fractional one round
/// half up. A number in exponent form (`1.5e3`) goes through `f64` and is rounded to the
/// nearest nanosecond. Returns `None` for anything else (not a number, not finite, more than
/// 10^30 ns).
pub(crate) fn micros_to_ns(text: &str) -> Option<i128> {
    let text = text.trim();
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text),
    };
    if body.contains(['e', 'E']) {
        let v: f64 = text.parse().ok()?;
        let ns = (v * 1000.0).round();
        return (ns.is_finite() && ns.abs() < 1e30).then_some(ns as i128);
    }
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let digits = |s: &str| s.bytes().all(|b| b.is_ascii_digit());
    if int.is_empty() || int.len() > 27 || !digits(int) || !digits(frac) {
        return None;
    }
    if body.contains('.') && frac.is_empty() {
        return None;
    }
    let mut ns: i128 = int.parse::<i128>().ok()? * 1000;
    let f = frac.as_bytes();
    for (i, scale) in [100, 10, 1].into_iter().enumerate() {
        if let Some(&d) = f.get(i) {
            ns += i128::from(d - b'0') * scale;
        }
    }
    if f.get(3).is_some_and(|&d| d >= b'5') {
        ns += 1;
    }
    Some(if negative { -ns } else { ns })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_at_kineto_magnitudes() {
        assert_eq!(
            micros_to_ns("5192767997062.378"),
            Some(5_192_767_997_062_378)
        );
        assert_eq!(
            micros_to_ns("5192767997062.379"),
            Some(5_192_767_997_062_379)
        );
        assert_eq!(micros_to_ns("12"), Some(12_000));
        assert_eq!(micros_to_ns("0.5"), Some(500));
        assert_eq!(micros_to_ns("0.0004"), Some(0));
        assert_eq!(micros_to_ns("0.0005"), Some(1));
        assert_eq!(micros_to_ns("-3.25"), Some(-3250));
        assert_eq!(micros_to_ns("1.5e3"), Some(1_500_000));
    }

    #[test]
    fn rejects_what_is_not_a_number() {
        for bad in ["", "abc", "1.", ".5", "1.2.3", "--1", "1e999", "\"12\""] {
            assert_eq!(micros_to_ns(bad), None, "{bad}");
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
    }
}
