//! Candle's tensor ids as numbers, without parsing text.
//!
//! `candle_core::TensorId` is a newtype over a `usize` counter (ids count up in creation order)
//! with no public accessor; it derives `Hash`, which hashes exactly that field, so a `Hasher`
//! that keeps what it is given reads the number.

use std::hash::{Hash, Hasher};

use candle_core::TensorId;

/// A hasher that records the last integer written to it.
#[derive(Default)]
struct Capture(u64);

impl Hasher for Capture {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        // Only reached if `TensorId`'s field stopped being an integer: keep a stable number.
        for b in bytes {
            self.0 = (self.0 << 8) | u64::from(*b);
        }
    }
    fn write_usize(&mut self, n: usize) {
        self.0 = n as u64;
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

/// Candle's number of a tensor id (creation order within the process).
pub(crate) fn tensor_number(id: TensorId) -> u64 {
    let mut h = Capture::default();
    id.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{DType, Device, Tensor};

    #[test]
    fn numbers_count_up_in_creation_order() -> candle_core::Result<()> {
        let a = Tensor::zeros(3, DType::U8, &Device::Cpu)?;
        let b = Tensor::zeros(3, DType::U8, &Device::Cpu)?;
        let (na, nb) = (tensor_number(a.id()), tensor_number(b.id()));
        assert!(na > 0 && nb > na, "{na} {nb}");
        assert_eq!(format!("{:?}", a.id()), format!("TensorId({na})"));
        Ok(())
    }
}
