//! [`Device`]: what a device label (`cpu`, `cuda:0`, `metal:1`) names, parsed once instead of
//! compared as a string.

use std::fmt;

/// A device named by a trace's `device` label (Candle's `Device` display: `cpu`, `cuda:N`,
/// `metal:N`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Device {
    /// The host (`cpu`, any case, optionally with a suffix such as `cpu:0`).
    Cpu,
    /// A CUDA device and its ordinal (`cuda` alone is ordinal 0).
    Cuda(u32),
    /// A Metal device and its ordinal.
    Metal(u32),
    /// Any other label, kept as written.
    Other(String),
}

impl Device {
    /// Parses a label; never fails (unknown labels are [`Device::Other`]).
    pub fn parse(label: &str) -> Self {
        let lower = label.trim().to_ascii_lowercase();
        let (kind, ordinal) = match lower.split_once(':') {
            Some((k, o)) => (k, o.parse::<u32>().ok()),
            None => (lower.as_str(), Some(0)),
        };
        match (kind, ordinal) {
            ("cpu", _) => Device::Cpu,
            ("cuda", Some(n)) => Device::Cuda(n),
            ("metal", Some(n)) => Device::Metal(n),
            _ => Device::Other(label.to_string()),
        }
    }

    /// True for the host: its memory is the process heap, its ops run synchronously.
    pub fn is_host(&self) -> bool {
        matches!(self, Device::Cpu)
    }
}

impl fmt::Display for Device {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Device::Cpu => f.write_str("cpu"),
            Device::Cuda(n) => write!(f, "cuda:{n}"),
            Device::Metal(n) => write!(f, "metal:{n}"),
            Device::Other(s) => f.write_str(s),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_parse() {
        assert_eq!(Device::parse("cpu"), Device::Cpu);
        assert_eq!(Device::parse("CPU"), Device::Cpu);
        assert_eq!(Device::parse("cuda:1"), Device::Cuda(1));
        assert_eq!(Device::parse("cuda"), Device::Cuda(0));
        assert_eq!(Device::parse("metal:0"), Device::Metal(0));
        assert_eq!(Device::parse("tpu:0"), Device::Other("tpu:0".into()));
        assert!(Device::parse("cpu").is_host());
        assert!(!Device::parse("cuda:0").is_host());
        assert_eq!(Device::Cuda(2).to_string(), "cuda:2");
    }
}
