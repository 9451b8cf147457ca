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
