//! The generator's own PRNG (xorshift64*) and the even split of a budget over parts: no
//! dependency, no clock, deterministic per seed.

/// xorshift64* (Vigna); deterministic, no dependency.
#[derive(Debug, Clone)]
pub(crate) struct Rng(u64);

impl Rng {
    pub(crate) fn new(seed: u64) -> Self {
        // splitmix64 of the seed, so that 0 and nearby seeds are fine.
        let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        Self((z ^ (z >> 31)) | 1)
    }

    pub(crate) fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// Uniform in `0..n` (n > 0).
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        ((self.next() >> 32) * n) >> 32
    }

    /// True with probability `per_mille / 1000`.
    pub(crate) fn chance(&mut self, per_mille: u64) -> bool {
        self.below(1000) < per_mille
    }
}

/// `total` split over `parts` as evenly as possible: the share of part `i`.
pub(crate) fn share(total: u64, parts: u64, i: u64) -> u64 {
    if parts == 0 {
        return 0;
    }
    let t = total as u128;
    let p = parts as u128;
    let i = i as u128;
    ((t * (i + 1) / p) - (t * i / p)) as u64
}
