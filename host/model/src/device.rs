//! Where the model runs: `model.device = "cpu" | "cuda:N"` in a config, `--device` on the
//! command line. This is the one place that names candle's devices; every tensor is then
//! created on the device of the weights it meets (`Brain::device`), so nothing else may
//! name the CPU (`tests/device.rs` checks).

use std::fmt;
use std::str::FromStr;

use candle_core::Device;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};

/// A device a config can name.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum DeviceChoice {
    /// The host CPU (every build).
    #[default]
    Cpu,
    /// The N-th CUDA GPU (a build with `--features cuda`, `make build-cuda`).
    Cuda(usize),
}

impl DeviceChoice {
    /// Whether this is the CPU (the default, left out of serialised configs).
    pub fn is_cpu(&self) -> bool {
        *self == DeviceChoice::Cpu
    }

    /// Opens the device. A CUDA device in a build without CUDA, or one the driver cannot
    /// open, is a clear error, never a silent fall back to the CPU.
    pub fn open(&self) -> Result<Device> {
        match *self {
            DeviceChoice::Cpu => Ok(Device::Cpu),
            DeviceChoice::Cuda(n) if !cfg!(feature = "cuda") => Err(Error::InvalidConfig(format!(
                "device cuda:{n}: this onebrain was built without CUDA; build it with `make build-cuda`"
            ))),
            DeviceChoice::Cuda(n) => Device::new_cuda(n)
                .map_err(|e| Error::InvalidConfig(format!("device cuda:{n} cannot be opened: {e}"))),
        }
    }
}

impl fmt::Display for DeviceChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DeviceChoice::Cpu => f.write_str("cpu"),
            DeviceChoice::Cuda(n) => write!(f, "cuda:{n}"),
        }
    }
}

impl FromStr for DeviceChoice {
    type Err = Error;

    fn from_str(s: &str) -> Result<DeviceChoice> {
        let bad = || Error::InvalidConfig(format!("unknown device `{s}` (expected cpu, cuda or cuda:N)"));
        match s.trim().to_ascii_lowercase().as_str() {
            "cpu" => Ok(DeviceChoice::Cpu),
            "cuda" => Ok(DeviceChoice::Cuda(0)),
            other => match other.strip_prefix("cuda:") {
                Some(n) => n.parse().map(DeviceChoice::Cuda).map_err(|_| bad()),
                None => Err(bad()),
            },
        }
    }
}

impl TryFrom<String> for DeviceChoice {
    type Error = Error;

    fn try_from(s: String) -> Result<DeviceChoice> {
        s.parse()
    }
}

impl From<DeviceChoice> for String {
    fn from(d: DeviceChoice) -> String {
        d.to_string()
    }
}

/// How dense frozen backbone matrices are stored: the dense copy training reads (and a
/// safetensors model). Trainable parameters, norms and activations stay f32.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WeightDtype {
    /// 4 bytes a weight; every device.
    #[default]
    F32,
    /// 2 bytes a weight, matmuls in bf16 (tensor cores); CUDA only, where it halves the
    /// dense backbone's memory. The CPU has no fast bf16 matmul.
    Bf16,
}

impl WeightDtype {
    /// Whether this is f32 (the default, left out of serialised configs).
    pub fn is_f32(&self) -> bool {
        *self == WeightDtype::F32
    }

    /// candle's dtype.
    pub fn dtype(&self) -> candle_core::DType {
        match self {
            WeightDtype::F32 => candle_core::DType::F32,
            WeightDtype::Bf16 => candle_core::DType::BF16,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_parse_print_and_open() {
        for (text, d) in [("cpu", DeviceChoice::Cpu), ("CUDA", DeviceChoice::Cuda(0)), ("cuda:3", DeviceChoice::Cuda(3))] {
            assert_eq!(text.parse::<DeviceChoice>().unwrap(), d);
        }
        assert_eq!(DeviceChoice::Cuda(1).to_string(), "cuda:1");
        for bad in ["gpu", "cuda:", "cuda:x", "metal"] {
            assert!(bad.parse::<DeviceChoice>().unwrap_err().to_string().contains("expected cpu"), "{bad}");
        }
        assert!(DeviceChoice::Cpu.open().unwrap().is_cpu());
        if !cfg!(feature = "cuda") {
            let e = DeviceChoice::Cuda(0).open().unwrap_err().to_string();
            assert!(e.contains("make build-cuda"), "{e}");
        }
    }
}
