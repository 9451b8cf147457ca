//! Dtype labels and dense byte sizes.
//!
//! Candle 0.11.1 labels (`DType::as_str`) plus the labels older traces used. Sizes are in
//! **bits** because Candle has sub-byte types (`f6e2m3`, `f6e3m2` = 6 bits, `f4` = 4 bits) for
//! which `DType::size_in_bytes()` returns 0. Dense bytes are therefore
//! `ceil(elements × bits / 8)`. An unknown label has an unknown size (`None`), never 0.

/// Size of one element in bits for a dtype label (case-insensitive), or `None` when the label
/// is unknown.
///
/// Known labels: `u8 u32 i16 i32 i64 bf16 f16 f32 f64 f8e4m3 f8e8m0 f6e2m3 f6e3m2 f4` (Candle
/// 0.11.1) and `f8 bool i8 u16 u64` (older traces).
pub fn dtype_bits(dtype: &str) -> Option<u64> {
    let lower = dtype.trim().to_ascii_lowercase();
    let bits = match lower.as_str() {
        "u8" | "i8" | "bool" | "f8" | "f8e4m3" | "f8e8m0" => 8,
        "u16" | "i16" | "f16" | "bf16" => 16,
        "u32" | "i32" | "f32" => 32,
        "u64" | "i64" | "f64" => 64,
        "f6e2m3" | "f6e3m2" => 6,
        "f4" => 4,
        _ => return None,
    };
    Some(bits)
}

/// Number of elements of a shape (product of dimensions; `1` for a scalar `[]`), or `None` on
/// overflow.
pub fn element_count(shape: &[u64]) -> Option<u64> {
    shape.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d))
}

/// Dense bytes of a tensor: `ceil(elements × bits / 8)`, or `None` when the dtype is unknown or
/// the product overflows.
///
/// This is the footprint of the tensor's elements, not the size of its backing allocation: a
/// broadcast or narrowed view misstates its storage.
pub fn dense_bytes(shape: &[u64], dtype: &str) -> Option<u64> {
    let bits = dtype_bits(dtype)?;
    let elements = element_count(shape)?;
    let total_bits = elements.checked_mul(bits)?;
    Some(total_bits.div_ceil(8))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sub_byte_types_round_up() {
        assert_eq!(dense_bytes(&[3], "f4"), Some(2));
        assert_eq!(dense_bytes(&[4], "f6e2m3"), Some(3));
        assert_eq!(dense_bytes(&[5], "f6e3m2"), Some(4));
    }

    #[test]
    fn every_candle_label_has_a_size() {
        for label in [
            "u8", "u32", "i16", "i32", "i64", "bf16", "f16", "f32", "f64", "f8e4m3", "f8e8m0",
            "f6e2m3", "f6e3m2", "f4", "f8", "bool", "i8", "u16", "u64",
        ] {
            assert!(dtype_bits(label).is_some(), "{label}");
        }
        assert_eq!(dense_bytes(&[2, 3], "F32"), Some(24));
        assert_eq!(dense_bytes(&[], "bf16"), Some(2));
    }

    #[test]
    fn unknown_label_is_unknown_not_zero() {
        assert_eq!(dtype_bits("q4k"), None);
        assert_eq!(dense_bytes(&[10], "q4k"), None);
    }

    #[test]
    fn overflow_is_unknown() {
        assert_eq!(dense_bytes(&[u64::MAX, 2], "f32"), None);
    }
}
