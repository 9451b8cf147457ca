//! Reading a demangled Rust function name as the symboliser writes it (`{:#}`: no hash):
//! `candle_core::tensor::Tensor::matmul`, `<candle_nn::linear::Linear as candle_core::Module>::forward`,
//! `candle_core::tensor_cat::<impl candle_core::tensor::Tensor>::cat`,
//! `llama::train_step::{{closure}}`, `core::ptr::drop_in_place<candle_core::tensor::Tensor>`.
//!
//! The path is split at `::` outside angle brackets; closure segments (`{{closure}}`,
//! `{closure#0}`) and generic-argument segments (`::<f32>`) are dropped and a segment's trailing
//! generic arguments (`to_vec1<f32>`) cut. Linear in the name's length, no recursion.

/// A function name split into its path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnName<'a> {
    /// Path segments without closures and generic arguments; a qualified segment
    /// (`<A as B>`, `<impl A>`) is kept whole.
    pub segments: Vec<&'a str>,
}

impl<'a> FnName<'a> {
    /// Splits `name`.
    pub fn parse(name: &'a str) -> Self {
        let mut segments = Vec::new();
        let bytes = name.as_bytes();
        let (mut depth, mut start, mut i) = (0i32, 0usize, 0usize);
        while i < bytes.len() {
            match bytes[i] {
                b'<' => depth += 1,
                // `->` inside `<fn() -> T as Trait>` is not a closing bracket
                b'>' if i == 0 || bytes[i - 1] != b'-' => depth -= 1,
                b':' if depth == 0 && bytes.get(i + 1) == Some(&b':') => {
                    push_segment(&mut segments, &name[start..i]);
                    i += 2;
                    start = i;
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        push_segment(&mut segments, &name[start..]);
        Self { segments }
    }

    /// The last segment: the function or method (`matmul`), `""` for an empty name.
    pub fn method(&self) -> &'a str {
        self.segments.last().copied().unwrap_or("")
    }

    /// The first segment's crate: `candle_core` for `candle_core::tensor::Tensor::matmul`, the
    /// self type's crate for `<candle_nn::linear::Linear as candle_core::Module>::forward`.
    pub fn crate_name(&self) -> &'a str {
        match self.segments.first() {
            Some(s) if s.starts_with('<') => first_segment(self_type(s).0),
            Some(s) => s,
            None => "",
        }
    }

    /// The type the method belongs to and its trait, when the name says: `<A as B>::m` →
    /// `(A, Some(B))`; `m::<impl A>::m` → `(A, None)`; `a::b::T::m` → `(a::b::T, None)` when
    /// `T` starts with an upper-case letter; `None` for a free function.
    pub fn self_type(&self) -> Option<(String, Option<&'a str>)> {
        let n = self.segments.len();
        if n < 2 {
            return None;
        }
        let q = self.segments[n - 2];
        if q.starts_with('<') {
            let (ty, tr) = self_type(q);
            return Some((ty.trim_start_matches('&').trim().to_string(), tr));
        }
        if q.chars().next().is_some_and(char::is_uppercase) {
            return Some((self.segments[..n - 1].join("::"), None));
        }
        None
    }

    /// [`Self::clean`] with a qualified segment named by its type: `<A as B>::m` and
    /// `x::<impl A>::m` become `A::m` (its generic arguments and a leading `&` dropped).
    pub fn short(&self) -> String {
        // the last qualified segment's type is a full path: what precedes it is dropped
        let Some(q) = self.segments.iter().rposition(|s| s.starts_with('<')) else {
            return self.clean();
        };
        let ty = self_type(self.segments[q]).0.trim_start_matches('&').trim();
        let ty = ty.strip_prefix("mut ").unwrap_or(ty);
        let mut parts = vec![ty.split('<').next().unwrap_or(ty)];
        parts.extend(&self.segments[q + 1..]);
        parts.join("::")
    }

    /// The path joined back without closures and generic arguments
    /// (`llama::train_step::{{closure}}` → `llama::train_step`).
    pub fn clean(&self) -> String {
        self.segments.join("::")
    }
}

/// `<A as B>` → `(A, Some(B))`, `<impl A>` → `(A, None)`, other text unchanged.
fn self_type(q: &str) -> (&str, Option<&str>) {
    let inner = q
        .strip_prefix('<')
        .and_then(|s| s.strip_suffix('>'))
        .unwrap_or(q);
    if let Some(ty) = inner.strip_prefix("impl ") {
        return (ty, None);
    }
    // the ` as ` at bracket depth 0
    let bytes = inner.as_bytes();
    let mut depth = 0i32;
    for i in 0..bytes.len() {
        match bytes[i] {
            b'<' => depth += 1,
            b'>' if i == 0 || bytes[i - 1] != b'-' => depth -= 1,
            b' ' if depth == 0 && inner[i..].starts_with(" as ") => {
                return (&inner[..i], Some(&inner[i + 4..]));
            }
            _ => {}
        }
    }
    (inner, None)
}

/// The first `::` segment of a path (`candle_nn::linear::Linear` → `candle_nn`).
fn first_segment(path: &str) -> &str {
    let path = path.trim_start_matches(['&', '*', '[', '(']);
    let path = path
        .strip_prefix("mut ")
        .or_else(|| path.strip_prefix("const "))
        .unwrap_or(path);
    path.split("::").next().unwrap_or(path)
}

fn push_segment<'a>(segments: &mut Vec<&'a str>, seg: &'a str) {
    if seg.is_empty() || seg.starts_with('{') {
        return; // `{{closure}}`, `{closure#0}`, `{shim:vtable#0}`
    }
    if seg.starts_with('<') {
        // `<A as B>` and `<impl A>` name the type; `<f32>` after `::` is a generic argument
        if seg.contains(" as ") || seg.starts_with("<impl ") {
            segments.push(seg);
        }
        return;
    }
    let cut = seg.find('<').map_or(seg, |i| &seg[..i]);
    if !cut.is_empty() {
        segments.push(cut);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_real_names() {
        let n = FnName::parse("candle_core::tensor::Tensor::matmul::{{closure}}");
        assert_eq!(n.segments, ["candle_core", "tensor", "Tensor", "matmul"]);
        assert_eq!(n.method(), "matmul");
        assert_eq!(
            n.self_type(),
            Some(("candle_core::tensor::Tensor".into(), None))
        );
        let n = FnName::parse("<candle_nn::linear::Linear as candle_core::Module>::forward");
        assert_eq!(n.crate_name(), "candle_nn");
        assert_eq!(
            n.self_type(),
            Some((
                "candle_nn::linear::Linear".into(),
                Some("candle_core::Module")
            ))
        );
        let n = FnName::parse("candle_core::tensor_cat::<impl candle_core::tensor::Tensor>::cat");
        assert_eq!(
            n.self_type(),
            Some(("candle_core::tensor::Tensor".into(), None))
        );
        assert_eq!(n.segments[1], "tensor_cat");
        let n = FnName::parse("core::ptr::drop_in_place<candle_core::tensor::Tensor>");
        assert_eq!(n.segments, ["core", "ptr", "drop_in_place"]);
        let n = FnName::parse("candle_core::tensor::Tensor::to_vec1::<f32>");
        assert_eq!(n.method(), "to_vec1");
        let n = FnName::parse(
            "<&candle_core::tensor::Tensor as core::ops::arith::Add<&candle_core::tensor::Tensor>>::add",
        );
        assert_eq!(n.crate_name(), "candle_core");
        let (ty, tr) = n.self_type().unwrap();
        assert_eq!(ty, "candle_core::tensor::Tensor");
        assert_eq!(
            tr,
            Some("core::ops::arith::Add<&candle_core::tensor::Tensor>")
        );
        assert_eq!(FnName::parse("malloc").crate_name(), "malloc");
        assert_eq!(FnName::parse("").method(), "");
        let n = FnName::parse("<fn() -> u8 as core::ops::function::FnOnce<()>>::call_once");
        assert_eq!(n.method(), "call_once");
        assert_eq!(
            FnName::parse("llama::train_step::{{closure}}").clean(),
            "llama::train_step"
        );
        assert_eq!(
            FnName::parse("<candle_nn::optim::AdamW as candle_nn::optim::Optimizer>::step").short(),
            "candle_nn::optim::AdamW::step"
        );
        assert_eq!(
            FnName::parse("candle_core::tensor_cat::<impl candle_core::tensor::Tensor>::cat")
                .short(),
            "candle_core::tensor::Tensor::cat"
        );
    }
}

/// Where a frame's source file is: the crate (from the directory above the last `src/`:
/// `…/candle-core-0.11.1/src/tensor.rs` → `candle_core` 0.11.1; `…/crates/trace-probe/src/nn.rs`
/// → `trace_probe`; the standard library's `/rustc/<hash>/library/core/src/…` → `core`) and the
/// module path below `src/` (`cpu_backend/utils.rs` → `cpu_backend::utils`; `mod.rs`, `lib.rs`,
/// `main.rs` name their directory).
///
/// Release builds with `debug = "line-tables-only"` name inlined frames by their short name
/// (`matmul`, `forward<candle_nn::linear::Linear>`): the file is what says whose function it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SourcePath<'a> {
    /// Crate name, `-` written `_` (`candle_core`).
    pub crate_name: String,
    /// The crate directory's version suffix (`0.11.1`), when it has one.
    pub version: Option<&'a str>,
    /// Module segments below `src/`.
    pub module: Vec<&'a str>,
    /// The standard library or one of its vendored dependencies (`/rustc/…/library/…`,
    /// `/rust/deps/…`).
    pub std: bool,
}

impl<'a> SourcePath<'a> {
    /// Parses a source path; `None` when it has no `src/` directory.
    pub fn parse(file: &'a str) -> Option<Self> {
        let std = file.starts_with("/rustc/")
            || file.starts_with("/rust/deps/")
            || file.contains("/library/std/")
            || file.contains("/library/core/")
            || file.contains("/library/alloc/");
        let i = file.rfind("/src/")?;
        let dir = file[..i].rsplit(['/', '\\']).next().unwrap_or("");
        let (name, version) = split_version(dir);
        let rest = file[i + 5..].strip_suffix(".rs").unwrap_or(&file[i + 5..]);
        let mut module: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
        if matches!(module.last(), Some(&"mod") | Some(&"lib") | Some(&"main")) {
            module.pop();
        }
        Some(Self {
            crate_name: name.replace('-', "_"),
            version,
            module,
            std,
        })
    }

    /// `crate::module` (`candle_core::cpu_backend::utils`).
    pub fn path(&self) -> String {
        let mut p = self.crate_name.clone();
        for m in &self.module {
            p.push_str("::");
            p.push_str(m);
        }
        p
    }
}

/// `candle-core-0.11.1` → (`candle-core`, `Some("0.11.1")`); `trace-probe` → (`trace-probe`, None).
fn split_version(dir: &str) -> (&str, Option<&str>) {
    let bytes = dir.as_bytes();
    for i in (0..bytes.len()).rev() {
        if bytes[i] == b'-' && bytes.get(i + 1).is_some_and(u8::is_ascii_digit) {
            let v = &dir[i + 1..];
            if v.split('.').take(3).count() == 3
                && v.split('.')
                    .take(2)
                    .all(|p| p.chars().all(|c| c.is_ascii_digit()) && !p.is_empty())
            {
                return (&dir[..i], Some(v));
            }
        }
    }
    (dir, None)
}

/// True when `name` is a full path (`a::b`, `<A as B>::m`) rather than a short name
/// (`matmul`, `forward<candle_nn::linear::Linear>`, `{closure#0}<…>`): `::` outside angle
/// brackets.
pub fn is_full_path(name: &str) -> bool {
    let n = FnName::parse(name);
    n.segments.len() > 1 || n.segments.first().is_some_and(|s| s.starts_with('<'))
}

/// A frame's function as a path a person reads: a full path without closures and generics
/// ([`FnName::short`]); a short name prefixed by its file's `crate::module`
/// (`binary_map` in `candle-core-0.11.1/src/cpu_backend/utils.rs` →
/// `candle_core::cpu_backend::utils::binary_map`; a closure → `…::{closure}`).
pub fn display_path(function: &str, file: Option<&str>) -> String {
    if is_full_path(function) {
        let s = FnName::parse(function).short();
        return if s.is_empty() {
            function.to_string()
        } else {
            s
        };
    }
    let short = FnName::parse(function);
    let method = match short.method() {
        "" if function.starts_with('{') => "{closure}",
        "" => function,
        m => m,
    };
    match file.and_then(SourcePath::parse) {
        Some(src) => format!("{}::{method}", src.path()),
        None => method.to_string(),
    }
}

#[cfg(test)]
mod source_tests {
    use super::*;

    #[test]
    fn source_paths_and_display_names_of_real_frames() {
        let core = "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/candle-core-0.11.1/src/cpu_backend/utils.rs";
        let s = SourcePath::parse(core).unwrap();
        assert_eq!(
            (s.crate_name.as_str(), s.version, s.module.clone(), s.std),
            (
                "candle_core",
                Some("0.11.1"),
                vec!["cpu_backend", "utils"],
                false
            )
        );
        let s = SourcePath::parse("/work/wt-sampler/crates/trace-probe/src/alloc/hook.rs").unwrap();
        assert_eq!((s.crate_name.as_str(), s.version), ("trace_probe", None));
        let s = SourcePath::parse(
            "/rustc/59807616e1fa2540724bfbac14d7976d7e4a3860/library/core/src/slice/iter/macros.rs",
        )
        .unwrap();
        assert!(s.std);
        assert_eq!(s.path(), "core::slice::iter::macros");
        assert!(
            SourcePath::parse("/rust/deps/hashbrown-0.16.1/src/raw/mod.rs")
                .unwrap()
                .std
        );
        assert_eq!(
            SourcePath::parse("/x/gemm-common-0.19.0/src/gemm.rs")
                .unwrap()
                .crate_name,
            "gemm_common"
        );
        assert_eq!(
            display_path(
                "map<candle_core::cpu_backend::IndexSelect<u32>>",
                Some(core)
            ),
            "candle_core::cpu_backend::utils::map"
        );
        assert_eq!(
            display_path("{closure#0}<candle_core::op::Exp>", Some(core)),
            "candle_core::cpu_backend::utils::{closure}"
        );
        assert_eq!(
            display_path("std::rt::lang_start_internal::{closure#0}", None),
            "std::rt::lang_start_internal"
        );
        assert_eq!(display_path("main", None), "main");
        assert!(!is_full_path("forward<candle_nn::linear::Linear>"));
        assert!(is_full_path(
            "<&dyn core::ops::function::Fn<()> as core::ops::function::FnOnce<()>>::call_once"
        ));
    }
}
