//! [`Line`]: a value alone on its cache line.

/// A value alone on its cache line (128 bytes: two 64-byte lines, as x86's adjacent-line
/// prefetcher pairs them). A hot atomic that some threads write does not then share a line
/// with one that every allocation reads or writes (false sharing).
#[repr(align(128))]
pub(crate) struct Line<T>(pub(crate) T);

impl<T> std::ops::Deref for Line<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}
