//! One source file read with `syn`: its functions with their line spans, and the modules of its
//! own crate that its code names (`use crate::a::b`, `super::x`, a path through a child module).

use std::collections::BTreeSet;

use proc_macro2::Span;
use syn::visit::Visit;

/// A named function and the lines its signature and body take.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FnSpan {
    /// `name`, or `Type::name` inside an `impl`, or `Trait::name` inside a trait.
    pub name: String,
    /// First line of the signature (the `fn` keyword), 1-based.
    pub start_line: usize,
    /// Line of the closing brace, 1-based.
    pub end_line: usize,
}

impl FnSpan {
    /// Lines from the `fn` keyword to the closing brace, both included.
    pub fn lines(&self) -> usize {
        self.end_line.saturating_sub(self.start_line) + 1
    }
}

/// What one file holds, as far as the house rules care.
#[derive(Debug, Default)]
pub struct FileFacts {
    /// Every named function with a body.
    pub fns: Vec<FnSpan>,
    /// Absolute module paths (`["a", "b", "Item"]`, crate root left out) named by this file's
    /// non-test code, before resolution to a file. Re-exports (`pub use`) are facades, not
    /// dependencies, and are left out.
    pub paths: BTreeSet<Vec<String>>,
}

/// Reads `source`, whose module path in its crate is `module` (`[]` for the crate root), and
/// whose direct child modules are `children`.
///
/// # Errors
/// The `syn` parse error when the file is not valid Rust.
pub fn scan(
    source: &str,
    module: &[String],
    children: &BTreeSet<String>,
) -> syn::Result<FileFacts> {
    let file = syn::parse_file(source)?;
    let mut v = Scanner {
        module: module.to_vec(),
        children: children.clone(),
        owner: Vec::new(),
        facts: FileFacts::default(),
    };
    v.visit_file(&file);
    Ok(v.facts)
}

struct Scanner {
    module: Vec<String>,
    children: BTreeSet<String>,
    owner: Vec<String>,
    facts: FileFacts,
}

fn line(span: Span) -> usize {
    span.start().line
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        let p = a.path();
        if p.is_ident("test") {
            return true;
        }
        if p.is_ident("cfg") {
            let text = a
                .meta
                .require_list()
                .map(|l| l.tokens.to_string())
                .unwrap_or_default();
            return text
                .split(|c: char| !c.is_alphanumeric() && c != '_')
                .any(|w| w == "test");
        }
        false
    })
}

impl Scanner {
    fn push_fn(&mut self, name: &syn::Ident, fn_token: Span, close: Span) {
        let name = match self.owner.last() {
            Some(owner) => format!("{owner}::{name}"),
            None => name.to_string(),
        };
        self.facts.fns.push(FnSpan {
            name,
            start_line: line(fn_token),
            end_line: close.end().line,
        });
    }

    /// Turns a path as written into an absolute one inside the crate, or `None` when it leaves
    /// the crate (another crate, `std`, a local item).
    fn absolute(&self, segments: &[String]) -> Option<Vec<String>> {
        let first = segments.first()?;
        match first.as_str() {
            "crate" => Some(segments[1..].to_vec()),
            "self" => {
                let mut out = self.module.clone();
                out.extend_from_slice(&segments[1..]);
                Some(out)
            }
            "super" => {
                let mut out = self.module.clone();
                let mut rest = segments;
                while rest.first().map(String::as_str) == Some("super") {
                    out.pop()?;
                    rest = &rest[1..];
                }
                out.extend_from_slice(rest);
                Some(out)
            }
            child if self.children.contains(child) => {
                let mut out = self.module.clone();
                out.extend_from_slice(segments);
                Some(out)
            }
            _ => None,
        }
    }

    fn record(&mut self, segments: Vec<String>) {
        if let Some(abs) = self.absolute(&segments) {
            self.facts.paths.insert(abs);
        }
    }
}

fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => {
            let mut full = prefix.clone();
            if n.ident != "self" {
                full.push(n.ident.to_string());
            }
            out.push(full);
        }
        syn::UseTree::Rename(r) => {
            let mut full = prefix.clone();
            full.push(r.ident.to_string());
            out.push(full);
        }
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => {
            for t in &g.items {
                use_paths(t, prefix, out);
            }
        }
    }
}

impl<'ast> Visit<'ast> for Scanner {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.push_fn(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        if is_test(&f.attrs) {
            return;
        }
        self.push_fn(
            &f.sig.ident,
            f.sig.fn_token.span,
            f.block.brace_token.span.close(),
        );
        syn::visit::visit_impl_item_fn(self, f);
    }

    fn visit_trait_item_fn(&mut self, f: &'ast syn::TraitItemFn) {
        if let Some(body) = &f.default {
            self.push_fn(
                &f.sig.ident,
                f.sig.fn_token.span,
                body.brace_token.span.close(),
            );
        }
        syn::visit::visit_trait_item_fn(self, f);
    }

    fn visit_item_impl(&mut self, i: &'ast syn::ItemImpl) {
        if is_test(&i.attrs) {
            return;
        }
        let ty = match &*i.self_ty {
            syn::Type::Path(p) => p
                .path
                .segments
                .last()
                .map(|s| s.ident.to_string())
                .unwrap_or_else(|| "impl".into()),
            _ => "impl".into(),
        };
        self.owner.push(ty);
        syn::visit::visit_item_impl(self, i);
        self.owner.pop();
    }

    fn visit_item_trait(&mut self, t: &'ast syn::ItemTrait) {
        self.owner.push(t.ident.to_string());
        syn::visit::visit_item_trait(self, t);
        self.owner.pop();
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        // An inline module's paths are relative to it; `#[cfg(test)]` modules are not the
        // library's code. Inline modules are rare enough here to be read as the file's own.
        if is_test(&m.attrs) {
            return;
        }
        syn::visit::visit_item_mod(self, m);
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        if is_test(&u.attrs) || !matches!(u.vis, syn::Visibility::Inherited) {
            return;
        }
        let mut out = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut out);
        for p in out {
            self.record(p);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        if segments.len() > 1 {
            self.record(segments);
        }
        syn::visit::visit_path(self, p);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn children(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn functions_are_measured_from_their_fn_keyword_to_their_closing_brace() {
        let src = "/// doc\n#[inline]\npub fn a() {\n    let x = 1;\n}\n\nstruct S;\nimpl S {\n    fn b(&self) {}\n}\n";
        let facts = scan(src, &[], &children(&[])).unwrap();
        assert_eq!(
            facts.fns,
            vec![
                FnSpan {
                    name: "a".into(),
                    start_line: 3,
                    end_line: 5
                },
                FnSpan {
                    name: "S::b".into(),
                    start_line: 9,
                    end_line: 9
                },
            ]
        );
        assert_eq!(facts.fns[0].lines(), 3);
    }

    #[test]
    fn imports_resolve_through_crate_super_and_child_modules_but_not_reexports_or_tests() {
        let src = "use crate::alloc::hook::Hook;\nuse super::state::{self, State};\npub use crate::facade::Item;\nuse std::sync::Arc;\nfn f() { child::g(); crate::clock::now(); }\n#[cfg(test)]\nmod tests { use crate::testonly::X; }\n";
        let module = vec!["sampler".to_string(), "slots".to_string()];
        let facts = scan(src, &module, &children(&["child"])).unwrap();
        let got: Vec<String> = facts.paths.iter().map(|p| p.join("::")).collect();
        assert_eq!(
            got,
            vec![
                "alloc::hook::Hook",
                "clock::now",
                "sampler::slots::child::g",
                "sampler::state",
                "sampler::state::State",
            ]
        );
    }

    #[test]
    fn test_functions_are_not_library_functions() {
        let src = "#[test]\nfn t() {\n}\n#[cfg(test)]\nmod tests { fn helper() {} }\n";
        assert!(scan(src, &[], &children(&[])).unwrap().fns.is_empty());
    }
}
