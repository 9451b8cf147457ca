//! Which Candle device a run trains on: `cpu`, `cuda[:N]` or `metal[:N]`, as written on the
//! command line and in the trace's `device` label.
//!
//! CUDA needs the crate's `cuda` feature, Metal its `metal` feature (macOS; written, not compiled
//! on Linux). Asking for a backend this binary was built without is a clear error, never a
//! silent fall-back to CPU.

use std::fmt;
use std::str::FromStr;

use candle_core::Device;

/// A device on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum DeviceSpec {
    /// The CPU (default).
    #[default]
    Cpu,
    /// CUDA GPU number `N` (`cuda` = `cuda:0`).
    Cuda(usize),
    /// Metal GPU number `N` (`metal` = `metal:0`).
    Metal(usize),
}

impl DeviceSpec {
    /// The backend's feature name (`cuda`, `metal`), `None` for CPU.
    pub fn feature(self) -> Option<&'static str> {
        match self {
            DeviceSpec::Cpu => None,
            DeviceSpec::Cuda(_) => Some("cuda"),
            DeviceSpec::Metal(_) => Some("metal"),
        }
    }

    /// Whether this binary was compiled with the backend.
    pub fn is_compiled(self) -> bool {
        match self {
            DeviceSpec::Cpu => true,
            DeviceSpec::Cuda(_) => cfg!(feature = "cuda"),
            DeviceSpec::Metal(_) => cfg!(feature = "metal"),
        }
    }

    /// Opens the device (`Device::new_cuda(N)`, `Device::new_metal(N)`).
    ///
    /// # Errors
    /// A message when the backend is not compiled into this binary (naming the feature to
    /// build with), or Candle's error when the device cannot be opened (no GPU, driver error).
    pub fn open(self) -> Result<Device, String> {
        if !self.is_compiled() {
            let feature = self.feature().unwrap_or("");
            return Err(format!(
                "device {self}: this binary was built without the `{feature}` feature \
                 (rebuild with `--features {feature}`)"
            ));
        }
        let opened = match self {
            DeviceSpec::Cpu => Ok(Device::Cpu),
            DeviceSpec::Cuda(n) => Device::new_cuda(n),
            DeviceSpec::Metal(n) => Device::new_metal(n),
        };
        opened.map_err(|e| format!("device {self}: cannot open it: {}", without_backtrace(e)))
    }
}

/// The error without the backtrace Candle attaches to device errors (its `Display` prints every
/// frame; the command line reports causes on one line).
fn without_backtrace(mut e: candle_core::Error) -> candle_core::Error {
    while let candle_core::Error::WithBacktrace { inner, .. } = e {
        e = *inner;
    }
    e
}

impl fmt::Display for DeviceSpec {
    /// The trace's device label: `cpu`, `cuda:N`, `metal:N`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceSpec::Cpu => f.write_str("cpu"),
            DeviceSpec::Cuda(n) => write!(f, "cuda:{n}"),
            DeviceSpec::Metal(n) => write!(f, "metal:{n}"),
        }
    }
}

impl FromStr for DeviceSpec {
    type Err = String;

    /// `cpu`, `cuda`, `cuda:N`, `metal`, `metal:N` (N a GPU ordinal).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (name, ordinal) = match s.split_once(':') {
            Some((name, n)) => {
                let n: usize = n
                    .parse()
                    .map_err(|_| format!("device `{s}`: `{n}` is not a GPU number"))?;
                (name, Some(n))
            }
            None => (s, None),
        };
        match (name, ordinal) {
            ("cpu", None) => Ok(DeviceSpec::Cpu),
            ("cuda", n) => Ok(DeviceSpec::Cuda(n.unwrap_or(0))),
            ("metal", n) => Ok(DeviceSpec::Metal(n.unwrap_or(0))),
            _ => Err(format!(
                "unknown device `{s}` (expected cpu, cuda, cuda:N, metal or metal:N)"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_labels() {
        for (text, spec, label) in [
            ("cpu", DeviceSpec::Cpu, "cpu"),
            ("cuda", DeviceSpec::Cuda(0), "cuda:0"),
            ("cuda:3", DeviceSpec::Cuda(3), "cuda:3"),
            ("metal", DeviceSpec::Metal(0), "metal:0"),
            ("metal:1", DeviceSpec::Metal(1), "metal:1"),
        ] {
            let parsed: DeviceSpec = text.parse().unwrap();
            assert_eq!(parsed, spec, "{text}");
            assert_eq!(parsed.to_string(), label);
        }
        for bad in ["gpu", "cuda:x", "cpu:0", "cuda:", ""] {
            assert!(bad.parse::<DeviceSpec>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_label_is_the_probes() -> Result<(), String> {
        let device = DeviceSpec::Cpu.open()?;
        assert_eq!(
            trace_probe::DeviceLabel::of(&device).to_string(),
            DeviceSpec::Cpu.to_string()
        );
        Ok(())
    }

    #[test]
    fn device_errors_lose_their_backtrace() {
        let e = candle_core::Error::Msg("no device".into()).bt();
        assert_eq!(without_backtrace(e).to_string(), "no device");
    }

    #[test]
    fn an_uncompiled_backend_names_its_feature() {
        if !cfg!(feature = "metal") {
            let err = DeviceSpec::Metal(0).open().unwrap_err();
            assert!(err.contains("--features metal"), "{err}");
        }
        if !cfg!(feature = "cuda") {
            let err = DeviceSpec::Cuda(0).open().unwrap_err();
            assert!(err.contains("--features cuda"), "{err}");
        }
    }
}
