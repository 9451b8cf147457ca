//! What the window can capture here: [`availability`] (installed, calibrated) and the
//! logical-memory coverage a session declares in its contract.

use trace_wire::CoverageLevel;

use super::state::lock;
use crate::device::DeviceLabel;
use crate::storage::calibrate::{calibrate, Calibration, CalibrationError};
use crate::storage::tracker::PreSessionStorages;

/// Whether the logical memory plane can be captured here, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Availability {
    /// The allocator is installed.
    pub installed: bool,
    /// Calibration result.
    pub calibration: Result<Calibration, CalibrationError>,
}

/// Checks installation and calibrates (once per process). Prints one warning per process when
/// the allocator is not installed or calibration failed.
pub fn availability() -> Availability {
    let calibration = calibrate();
    let installed = trace_alloc::is_installed();
    let mut st = lock();
    if let Err(e) = &calibration {
        if !st.warned {
            st.warned = true;
            match e {
                CalibrationError::NotInstalled => eprintln!(
                    "warning: trace-probe: the tracking allocator is not installed \
                     (#[global_allocator] static ALLOC: trace_probe::Tracking = \
                     trace_probe::Tracking::system();): storage frees are unknown, \
                     logical memory is registration-only and declared partial"
                ),
                e => eprintln!(
                    "warning: trace-probe: automatic storage capture is off: {e}; logical \
                     memory is declared unavailable"
                ),
            }
        }
    }
    if let Ok(c) = &calibration {
        if !st.registry.watching() {
            st.registry.enable_watch(c.key_offset);
        }
    }
    Availability {
        installed,
        calibration,
    }
}

/// The logical-memory coverage to declare for a capture on `device`, with the reason when not
/// complete (`capture_contract.reasons["logical_memory"]`), for a session whose storages live
/// at capture start are described by `pre_session` (on CPU, `complete` needs [`PreSessionStorages::AllKnown`];
/// otherwise `partial` with its reason). `None`: not considered.
pub fn logical_memory_contract_with(
    device: DeviceLabel,
    pre_session: Option<&PreSessionStorages>,
) -> (CoverageLevel, Option<String>) {
    let (level, reason) = base_contract(device);
    let Some(extra) = pre_session.and_then(|p| p.reason()) else {
        return (level, reason);
    };
    // Only where the capture could otherwise know them (CPU, allocator installed and
    // calibrated); elsewhere the base reason already says why storages are missing.
    if level == CoverageLevel::None
        || !device.is_cpu()
        || !trace_alloc::is_installed()
        || calibrate().is_err()
    {
        return (level, reason);
    }
    let reason = match reason {
        Some(r) => format!("{r}; {extra}"),
        None => extra,
    };
    (CoverageLevel::Partial, Some(reason))
}

fn base_contract(device: DeviceLabel) -> (CoverageLevel, Option<String>) {
    let a = availability();
    let st = lock();
    match (&a.calibration, a.installed) {
        (Err(CalibrationError::NotInstalled), _) | (_, false) => (
            CoverageLevel::Partial,
            Some("tracking allocator not installed: frees are unknown, only registered storages at registration time".into()),
        ),
        (Err(e), _) => (
            CoverageLevel::None,
            Some(format!("automatic storage capture unavailable: {e}")),
        ),
        (Ok(_), true) if !device.is_cpu() && device_ledger_failure(device).is_some() => (
            CoverageLevel::Partial,
            Some(format!(
                "{device}: storages are captured through registration only ({}); host-side frees mark the last handle's release into the device pool",
                device_ledger_failure(device).unwrap_or_default()
            )),
        ),
        (Ok(_), true) if !st.unknown_pre_existing.is_empty() => (
            CoverageLevel::Partial,
            Some(format!(
                "pre-existing storage of unknown size: {}",
                st.unknown_pre_existing.join("; ")
            )),
        ),
        (Ok(_), true) => (CoverageLevel::Complete, None),
    }
}

/// Why `device`'s storages are not all seen at the driver (`None`: they are — a CUDA device
/// whose allocations were checked to pass through [`crate::cuda_ledger`]).
fn device_ledger_failure(device: DeviceLabel) -> Option<String> {
    match device {
        DeviceLabel::Cpu => None,
        #[cfg(feature = "cuda-ledger")]
        DeviceLabel::Cuda(_) => match crate::cuda_ledger::interpose::checked() {
            Some(Ok(())) => None,
            Some(Err(why)) => Some(why),
            None => Some("the device-allocation check did not run".into()),
        },
        _ => Some("the CPU drop signature does not apply".into()),
    }
}
