//! Human units: bytes in binary units (B, KiB, MiB, GiB, TiB — IEC 80000-13, powers of 1024,
//! never mixed with SI labels) and durations (ns, µs, ms, s).

/// Binary unit labels, each 1024 times the previous.
const BYTE_UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];

/// Formats a byte count with a binary unit: `512 B`, `1.50 KiB`, `75.77 GiB`.
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

/// Like [`bytes`], `-` when unknown (never 0 for an unobserved figure).
pub fn opt_bytes(n: Option<u64>) -> String {
    n.map(bytes).unwrap_or_else(|| "-".to_string())
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

/// Like [`duration`], `-` when unknown.
pub fn opt_duration(ns: Option<u64>) -> String {
    ns.map(duration).unwrap_or_else(|| "-".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_use_binary_units() {
        assert_eq!(bytes(0), "0 B");
        assert_eq!(bytes(1023), "1023 B");
        assert_eq!(bytes(1024), "1.00 KiB");
        assert_eq!(bytes(1536), "1.50 KiB");
        assert_eq!(bytes(3 * 1024 * 1024), "3.00 MiB");
        assert_eq!(bytes(81_358_668_431), "75.77 GiB");
        assert_eq!(bytes(1024 * 1024 - 1), "1.00 MiB");
        assert_eq!(bytes(u64::MAX), "16777216.00 TiB");
    }

    #[test]
    fn durations() {
        assert_eq!(duration(850), "850 ns");
        assert_eq!(duration(12_345), "12.3 µs");
        assert_eq!(duration(4_560_000), "4.56 ms");
        assert_eq!(duration(1_230_000_000), "1.23 s");
        assert_eq!(opt_duration(None), "-");
    }
}
