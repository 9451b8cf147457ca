//! The first `k` items of a list in a given order without sorting all of it: a selection
//! (O(n)) then a sort of the `k` chosen (O(k log k)). The answers list the largest few of
//! millions of storages (live at the end, retained); a full sort of them was a visible share
//! of a 10^7-event analysis.

use std::cmp::Ordering;

/// The first `k` of `items` in the order `cmp` gives, ties kept in input order — exactly what
/// `items.sort_by(cmp); items.truncate(k)` returns (a stable sort), in O(n + k log k)
/// comparisons instead of O(n log n) and O(k) memory: `items` is streamed through a buffer of
/// `2k` that is cut back to its best `k` by a selection whenever it fills.
pub fn first_k_by<T>(
    items: impl IntoIterator<Item = T>,
    k: usize,
    mut cmp: impl FnMut(&T, &T) -> Ordering,
) -> Vec<T> {
    if k == 0 {
        return Vec::new();
    }
    // input position breaks ties: a total order, so the unstable algorithms give the stable
    // sort's answer
    let mut total = |a: &(usize, T), b: &(usize, T)| cmp(&a.1, &b.1).then(a.0.cmp(&b.0));
    let cap = k.saturating_mul(2).max(k.saturating_add(1));
    let mut buf: Vec<(usize, T)> = Vec::new();
    for item in items.into_iter().enumerate() {
        buf.push(item);
        if buf.len() >= cap {
            buf.select_nth_unstable_by(k - 1, &mut total);
            buf.truncate(k);
        }
    }
    if buf.len() > k {
        buf.select_nth_unstable_by(k - 1, &mut total);
        buf.truncate(k);
    }
    buf.sort_unstable_by(&mut total);
    buf.into_iter().map(|(_, t)| t).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// Equal to a stable sort then truncation, ties included (few distinct keys).
        #[test]
        fn equals_stable_sort_then_truncate(
            items in proptest::collection::vec((0u8..4, 0u8..3), 0..400),
            k in 0usize..60,
        ) {
            let tagged: Vec<(u8, u8, usize)> =
                items.iter().enumerate().map(|(i, &(a, b))| (a, b, i)).collect();
            let cmp = |x: &(u8, u8, usize), y: &(u8, u8, usize)| y.0.cmp(&x.0).then(x.1.cmp(&y.1));
            let mut want = tagged.clone();
            want.sort_by(cmp);
            want.truncate(k);
            prop_assert_eq!(first_k_by(tagged, k, cmp), want);
        }
    }

    #[test]
    fn none_asked_none_given() {
        assert!(first_k_by([3, 1, 2], 0, |a: &i32, b: &i32| a.cmp(b)).is_empty());
        assert_eq!(
            first_k_by([3, 1, 2], 5, |a: &i32, b: &i32| a.cmp(b)),
            [1, 2, 3]
        );
    }
}
