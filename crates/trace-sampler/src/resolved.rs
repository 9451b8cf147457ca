//! [`Resolved`]: one frame an address resolved to, what the symboliser hands the stack table.

/// One frame an address resolved to (by the platform's symboliser).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Resolved {
    /// Demangled name without the hash.
    pub function: Option<String>,
    /// Source file, as the line tables name it.
    pub file: Option<String>,
    /// 1-based line.
    pub line: Option<u32>,
    /// File name of the object (executable or shared library) holding the address.
    pub module: Option<String>,
}
