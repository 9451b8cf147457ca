//! Meta fields the probe fills in by itself: run identity, versions, timestamp, host basics
//! (never a hostname).

use std::time::SystemTime;

use trace_wire::{CaptureContract, HostInfo, RunMeta, TimingMode};

use crate::device::DeviceLabel;
use crate::run::ProfileRun;

/// This crate's version (the `probe_version` meta field).
pub const PROBE_VERSION: &str = env!("CARGO_PKG_VERSION");

/// The candle-core version resolved when this crate was built (read from `Cargo.lock` by the
/// build script), or `None` when no lock file named it.
pub fn candle_version() -> Option<&'static str> {
    let v = env!("TRACE_PROBE_CANDLE_VERSION");
    (!v.is_empty()).then_some(v)
}

/// The tag holding Candle's CPU thread count (`candle_core::utils::get_num_threads()`).
pub const CANDLE_THREADS_TAG: &str = "candle.threads";

/// Candle's CPU thread count, read once per process (without `RAYON_NUM_THREADS`, Candle reads
/// `/proc/cpuinfo` for it: ≈ 60 µs).
pub fn candle_threads() -> usize {
    static THREADS: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *THREADS.get_or_init(candle_core::utils::get_num_threads)
}

/// Host basics: OS, architecture, logical CPUs available to the process and total memory
/// (Linux: `MemTotal` of `/proc/meminfo`; absent elsewhere). Never the hostname. Read once per
/// process (the meta is written inside the captured step, and reading `/proc` and the cgroup
/// files there cost ≈ 0.1 ms of it).
pub fn host_info() -> HostInfo {
    static HOST: std::sync::OnceLock<HostInfo> = std::sync::OnceLock::new();
    HOST.get_or_init(read_host_info).clone()
}

fn read_host_info() -> HostInfo {
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

/// `at` as RFC 3339 / ISO-8601 UTC with milliseconds, e.g. `2026-11-29T08:00:00.000Z`
/// (instants before 1970 are written as the epoch). Own code for one format call: the
/// `humantime` crate it replaced was one more crate in every user's build of the probe.
pub fn utc_timestamp(at: SystemTime) -> String {
    let since = at
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let secs = since.as_secs();
    let (days, day_secs) = (secs / 86_400, secs % 86_400);
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        day_secs / 3600,
        day_secs / 60 % 60,
        day_secs % 60,
        since.subsec_millis()
    )
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01 (H. Hinnant's
/// `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u64, u64) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z / 146_097;
    let doe = z - era * 146_097; // [0, 146096]
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // [0, 365]
    let mp = (5 * doy + 2) / 153; // [0, 11], March = 0
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

/// The run meta of `run` on `device` declaring `contract` (plug-ins adjust it before it is
/// written). Deterministic mode: run id `run-deterministic`, timestamp at the Unix epoch, no
/// host fields.
pub(crate) fn run_meta(
    run: &ProfileRun,
    device: DeviceLabel,
    contract: CaptureContract,
) -> RunMeta {
    let deterministic = run.deterministic;
    let now = SystemTime::now();
    RunMeta {
        run_id: if deterministic {
            "run-deterministic".to_string()
        } else {
            let ns = now
                .duration_since(SystemTime::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or_default();
            format!("run-{}-{ns}", std::process::id())
        },
        correlation_id: Some(
            run.correlation_id
                .clone()
                .unwrap_or_else(|| run.default_correlation_id()),
        ),
        entrypoint: run.entrypoint.clone(),
        phase: Some(run.phase),
        timestamp: utc_timestamp(if deterministic {
            SystemTime::UNIX_EPOCH
        } else {
            now
        }),
        capture_step: Some(run.capture_step),
        warmup_steps: Some(run.warmup_steps),
        last_capture_step: (run.last_capture_step > run.capture_step)
            .then_some(run.last_capture_step),
        device: Some(device.to_string()),
        measured_region_device_synchronized: !device.is_cpu(),
        timing_mode: Some(TimingMode::Host),
        capture_contract: Some(contract),
        comparison_identity: run.comparison_identity.clone(),
        tags: {
            let mut tags = run.tags.clone();
            if !deterministic {
                // Candle's CPU thread count (`RAYON_NUM_THREADS`, else the CPUs): op times of
                // two runs compare only at equal counts (`diff`'s operations section).
                tags.entry(CANDLE_THREADS_TAG.to_string())
                    .or_insert_with(|| candle_threads().to_string());
            }
            tags
        },
        candle_version: candle_version().map(str::to_string),
        probe_version: Some(PROBE_VERSION.to_string()),
        tracking_allocator_installed: None,
        host: (!deterministic).then(host_info),
        rank: run.ranks.info().map(|i| i.rank),
        local_rank: run.ranks.info().and_then(|i| i.local_rank),
        world_size: run.ranks.info().map(|i| i.world_size),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn formats_known_dates() {
        let at = |secs: u64, millis: u64| {
            SystemTime::UNIX_EPOCH + Duration::from_secs(secs) + Duration::from_millis(millis)
        };
        assert_eq!(utc_timestamp(at(0, 0)), "1970-01-01T00:00:00.000Z");
        // 2000-02-29T12:34:56Z (a leap day) = 951827696.
        assert_eq!(
            utc_timestamp(at(951_827_696, 7)),
            "2000-02-29T12:34:56.007Z"
        );
        // 2026-11-29T08:00:00Z = 1795939200.
        assert_eq!(
            utc_timestamp(at(1_795_939_200, 999)),
            "2026-11-29T08:00:00.999Z"
        );
    }

    #[test]
    fn agrees_with_humantime_across_four_centuries() {
        // Every 97th day from 1970 to 2400 (leap years, centuries, 2000's leap day), at an odd
        // time of day with milliseconds.
        for day in (0..157_000u64).step_by(97) {
            let at = SystemTime::UNIX_EPOCH + Duration::from_millis(day * 86_400_000 + 45_296_789);
            assert_eq!(
                utc_timestamp(at),
                humantime::format_rfc3339_millis(at).to_string(),
                "day {day}"
            );
        }
    }

    #[test]
    fn versions_and_host_are_filled() {
        assert_eq!(candle_version(), Some("0.11.1"));
        let host = host_info();
        assert!(host.os.is_some() && host.arch.is_some());
        assert!(host.cpu_count.unwrap_or(0) >= 1);
    }
}
