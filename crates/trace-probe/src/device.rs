//! Which device a tensor or a run is on, as a type (written to the trace as `cpu`, `cuda:<n>`
//! or `metal:<n>`).

use std::fmt;

use candle_core::{Device, DeviceLocation};

/// A device as the trace names it. `Display` gives the wire label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DeviceLabel {
    /// The host (`cpu`).
    Cpu,
    /// A CUDA GPU by ordinal (`cuda:<n>`).
    Cuda(usize),
    /// A Metal GPU by ordinal (`metal:<n>`).
    Metal(usize),
}

impl DeviceLabel {
    /// The label of `device`.
    pub fn of(device: &Device) -> Self {
        match device.location() {
            DeviceLocation::Cpu => DeviceLabel::Cpu,
            DeviceLocation::Cuda { gpu_id } => DeviceLabel::Cuda(gpu_id),
            DeviceLocation::Metal { gpu_id } => DeviceLabel::Metal(gpu_id),
        }
    }

    /// Whether this is the host.
    pub fn is_cpu(self) -> bool {
        self == DeviceLabel::Cpu
    }
}

impl fmt::Display for DeviceLabel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceLabel::Cpu => f.write_str("cpu"),
            DeviceLabel::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceLabel::Metal(n) => write!(f, "metal:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels() {
        assert_eq!(DeviceLabel::of(&Device::Cpu).to_string(), "cpu");
        assert_eq!(DeviceLabel::Cuda(1).to_string(), "cuda:1");
        assert_eq!(DeviceLabel::Metal(0).to_string(), "metal:0");
        assert!(DeviceLabel::Cpu.is_cpu() && !DeviceLabel::Cuda(0).is_cpu());
    }
}
