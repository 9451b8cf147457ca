//! Range-add / range-max segment tree and a Fenwick tree of sums, for the per-node sweep. Values
//! are sums of distinct lifetimes' bytes, bounded by the trace's checked total (see
//! `alloc_bytes_overflow`), so plain additions cannot overflow.

/// Range add, range max over `n` positions (values start at 0). Bottom-up, `2n + n` words,
/// O(log n) per operation.
#[derive(Debug, Clone)]
pub(crate) struct MaxAddTree {
    n: usize,
    h: u32,
    t: Vec<u64>,
    d: Vec<u64>,
}

impl MaxAddTree {
    pub(crate) fn new(n: usize) -> Self {
        let h = usize::BITS - n.leading_zeros();
        Self {
            n,
            h,
            t: vec![0; 2 * n],
            d: vec![0; n],
        }
    }

    #[inline]
    fn apply(&mut self, p: usize, v: u64) {
        self.t[p] += v;
        if p < self.n {
            self.d[p] += v;
        }
    }

    fn build(&mut self, mut p: usize) {
        while p > 1 {
            p >>= 1;
            self.t[p] = self.t[2 * p].max(self.t[2 * p + 1]) + self.d[p];
        }
    }

    fn push(&mut self, p: usize) {
        for s in (1..=self.h).rev() {
            let i = p >> s;
            if i > 0 && self.d[i] != 0 {
                let v = self.d[i];
                self.apply(2 * i, v);
                self.apply(2 * i + 1, v);
                self.d[i] = 0;
            }
        }
    }

    /// Adds `v` to positions `[l, r)`.
    pub(crate) fn add(&mut self, l: usize, r: usize, v: u64) {
        if l >= r || v == 0 {
            return;
        }
        let (mut l, mut r) = (l + self.n, r + self.n);
        let (l0, r0) = (l, r);
        while l < r {
            if l & 1 == 1 {
                self.apply(l, v);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                self.apply(r, v);
            }
            l >>= 1;
            r >>= 1;
        }
        self.build(l0);
        self.build(r0 - 1);
    }

    /// Maximum over positions `[l, r)`; 0 for an empty range.
    pub(crate) fn max(&mut self, l: usize, r: usize) -> u64 {
        if l >= r {
            return 0;
        }
        let (mut l, mut r) = (l + self.n, r + self.n);
        self.push(l);
        self.push(r - 1);
        let mut res = 0u64;
        while l < r {
            if l & 1 == 1 {
                res = res.max(self.t[l]);
                l += 1;
            }
            if r & 1 == 1 {
                r -= 1;
                res = res.max(self.t[r]);
            }
            l >>= 1;
            r >>= 1;
        }
        res
    }
}

/// Fenwick tree of sums over `n` positions.
#[derive(Debug, Clone)]
pub(crate) struct Fenwick {
    t: Vec<u64>,
}

impl Fenwick {
    pub(crate) fn new(n: usize) -> Self {
        Self { t: vec![0; n + 1] }
    }

    /// Adds `v` at position `i`.
    pub(crate) fn add(&mut self, i: usize, v: u64) {
        let mut i = i + 1;
        while i < self.t.len() {
            self.t[i] += v;
            i += i & i.wrapping_neg();
        }
    }

    fn prefix(&self, mut i: usize) -> u64 {
        let mut s = 0u64;
        while i > 0 {
            s += self.t[i];
            i &= i - 1;
        }
        s
    }

    /// Sum over positions `[l, r)`.
    pub(crate) fn sum(&self, l: usize, r: usize) -> u64 {
        if l >= r {
            0
        } else {
            self.prefix(r) - self.prefix(l)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn max_add_tree_matches_brute_force(
            n in 1usize..40,
            ops in prop::collection::vec((0usize..40, 0usize..40, 0u64..1000, any::<bool>()), 1..60),
        ) {
            let mut tree = MaxAddTree::new(n);
            let mut brute = vec![0u64; n];
            for (a, b, v, is_add) in ops {
                let (l, r) = (a.min(b) % (n + 1), a.max(b) % (n + 1));
                let (l, r) = (l.min(r), l.max(r));
                if is_add {
                    tree.add(l, r, v);
                    for x in &mut brute[l..r] { *x += v; }
                } else {
                    let want = brute[l..r].iter().copied().max().unwrap_or(0);
                    prop_assert_eq!(tree.max(l, r), want);
                }
            }
        }

        #[test]
        fn fenwick_matches_brute_force(
            n in 1usize..40,
            ops in prop::collection::vec((0usize..40, 0usize..40, 0u64..1000), 1..60),
        ) {
            let mut f = Fenwick::new(n);
            let mut brute = vec![0u64; n];
            for (a, b, v) in ops {
                f.add(a % n, v);
                brute[a % n] += v;
                let (l, r) = ((a % (n + 1)).min(b % (n + 1)), (a % (n + 1)).max(b % (n + 1)));
                prop_assert_eq!(f.sum(l, r), brute[l..r].iter().sum::<u64>());
            }
        }
    }
}
