//! Meta fields the probe fills in by itself: versions, timestamp, host basics (never a
//! hostname).

use std::time::{SystemTime, UNIX_EPOCH};

use trace_schema::HostInfo;

/// This crate's version (the `probe_version` meta field).
pub const PROBE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The candle-core version resolved when this crate was built (read from `Cargo.lock` by the
/// build script), or `None` when no lock file named it.
pub fn candle_version() -> Option<&'static str> {
    let v = env!("TRACE_PROBE_CANDLE_VERSION");
    (!v.is_empty()).then_some(v)
}

/// Host basics: OS, architecture, logical CPUs available to the process and total memory
/// (Linux: `MemTotal` of `/proc/meminfo`; absent elsewhere). Never the hostname.
pub fn host_info() -> HostInfo {
    HostInfo {
        os: Some(std::env::consts::OS.to_string()),
        arch: Some(std::env::consts::ARCH.to_string()),
        cpu_count: std::thread::available_parallelism()
            .ok()
            .map(|n| n.get() as u64),
        memory_bytes: total_memory_bytes(),
    }
}

fn total_memory_bytes() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The current UTC time as ISO-8601 with milliseconds, e.g. `2026-11-29T08:00:00.000Z`.
pub fn utc_timestamp_now() -> String {
    let since = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    format_utc(since.as_secs(), since.subsec_millis())
}

/// Formats seconds since the Unix epoch plus milliseconds as ISO-8601 UTC.
pub(crate) fn format_utc(secs: u64, millis: u32) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{millis:03}Z",
        rem / 3600,
        (rem % 3600) / 60,
        rem % 60
    )
}

/// Howard Hinnant's `civil_from_days`: days since 1970-01-01 → (year, month, day).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_known_dates() {
        assert_eq!(format_utc(0, 0), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T12:34:56Z (a leap day) = 951827696.
        assert_eq!(format_utc(951_827_696, 7), "2000-02-29T12:34:56.007Z");
        // 2026-11-29T08:00:00Z = 1795939200.
        assert_eq!(format_utc(1_795_939_200, 999), "2026-11-29T08:00:00.999Z");
    }

    #[test]
    fn versions_and_host_are_filled() {
        assert_eq!(candle_version(), Some("0.11.1"));
        let host = host_info();
        assert!(host.os.is_some() && host.arch.is_some());
        assert!(host.cpu_count.unwrap_or(0) >= 1);
    }
}
