//! Counted nouns: `1 sample`, `2 samples`, never `1 samples`.

/// `n` and the noun in the number `n` asks for: `count(1, "sample", "samples")` is
/// `1 sample`, `count(0, …)` and `count(2, …)` are `0 samples` and `2 samples`.
///
/// ```
/// assert_eq!(trace_format::count(1, "storage", "storages"), "1 storage");
/// assert_eq!(trace_format::count(61, "storage", "storages"), "61 storages");
/// ```
pub fn count(n: u64, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// What a table leaves out: `more(1, "group", "groups")` is `1 more group`, `more(25, …)`
/// `25 more groups`.
///
/// ```
/// assert_eq!(trace_format::more(25, "group", "groups"), "25 more groups");
/// ```
pub fn more(n: u64, one: &str, many: &str) -> String {
    format!("{n} more {}", if n == 1 { one } else { many })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_everything_else_plural() {
        assert_eq!(count(0, "group", "groups"), "0 groups");
        assert_eq!(count(1, "group", "groups"), "1 group");
        assert_eq!(count(2, "group", "groups"), "2 groups");
        assert_eq!(
            count(u64::MAX, "span", "spans"),
            format!("{} spans", u64::MAX)
        );
        assert_eq!(more(1, "row", "rows"), "1 more row");
        assert_eq!(more(3, "row", "rows"), "3 more rows");
    }
}
