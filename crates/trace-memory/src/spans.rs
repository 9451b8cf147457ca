//! [`SpanIndex`]: the span hierarchy of a document resolved once — parents, children in
//! canonical order, a depth-first pre-order, depth, the effective [`Pass`] of every span, the
//! measured region, `/`-joined paths and "which span holds time t". Every analysis and display
//! (memory peaks, findings, the CLI) asks this one index, so they cannot disagree.
//!
//! Canonical order: children sorted by `(start_ns, id)` with ids compared by natural order
//! (`s2` < `s10`), roots likewise; nothing depends on how events were interleaved in the file.
//! Built in O(S log S); paths are capped at 32 names ([`PATH_HEAD_NAMES`]) and O(32); other
//! queries are O(depth) or, for [`SpanIndex::innermost_at`], O(S).

use std::cmp::Ordering;

use trace_schema::{Pass, SpanRecord, TraceDocument};

/// The resolved span hierarchy of one document; index `i` is `doc.spans[i]`.
#[derive(Debug, Clone, Default)]
pub struct SpanIndex {
    /// Parent span index per span (`None` for roots and for spans naming an unknown parent).
    pub parent: Vec<Option<u32>>,
    /// True when the span names a parent id that is not a span.
    pub parent_unknown: Vec<bool>,
    /// Child spans per span, in canonical order.
    pub children: Vec<Vec<u32>>,
    /// Spans without a (known) parent, in canonical order.
    pub roots: Vec<u32>,
    /// Spans reachable from a root, depth first, children in canonical order.
    pub preorder: Vec<u32>,
    /// Spans not reachable from a root: on or below a parent cycle.
    pub in_cycle: Vec<bool>,
    /// Depth below its root (roots and cycle members: 0).
    pub depth: Vec<u32>,
    /// The pass of each span: its own, else its nearest ancestor's (a cycle ends the walk).
    pub pass: Vec<Option<Pass>>,
    /// Index of the measured span: the first in canonical order when a trace has several.
    pub measured: Option<usize>,
    /// Per span: its ancestor (or itself) at depth `PATH_HEAD_NAMES - 1`, the last name of the
    /// head a capped path shows (see [`SpanIndex::path`]).
    head_anchor: Vec<u32>,
    /// Per span: its 1-based occurrence among same-named siblings in canonical order when its
    /// name repeats among them, else 0 (see [`SpanIndex::indexed_path`]).
    occurrence: Vec<u32>,
}

/// A displayed path deeper than [`PATH_HEAD_NAMES`] + [`PATH_TAIL_NAMES`] levels shows its
/// first `PATH_HEAD_NAMES` names, a marker with the number of names left out and the full
/// depth, and its last `PATH_TAIL_NAMES` names: a path is bounded whatever the trace's depth,
/// so output that prints a path per span or per row stays linear in the trace (a chain of
/// 100,000 nested spans would otherwise print 5·10^9 names).
pub const PATH_HEAD_NAMES: usize = 8;

/// See [`PATH_HEAD_NAMES`].
pub const PATH_TAIL_NAMES: usize = 24;

/// Joins a path of `levels` names in all from its first names `head` (root first) and its last
/// names `tail` (leaf last): all of them when `head` and `tail` together are the whole path,
/// else with the marker `…(N of M levels left out)…` between them (see [`PATH_HEAD_NAMES`]).
pub fn join_capped_path<S: AsRef<str>>(head: &[S], tail: &[S], levels: usize) -> String {
    let mut out = String::new();
    for (k, name) in head.iter().enumerate() {
        if k > 0 {
            out.push('/');
        }
        out.push_str(name.as_ref());
    }
    let shown = head.len() + tail.len();
    if shown < levels {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(&format!(
            "…({} of {levels} levels left out)…",
            levels - shown
        ));
    }
    for name in tail {
        if !out.is_empty() {
            out.push('/');
        }
        out.push_str(name.as_ref());
    }
    out
}

/// Compares strings with embedded numbers by value (`s2` < `s10`), so probe ids sort in
/// creation order; ties fall back to plain byte order.
pub fn natural_cmp(a: &str, b: &str) -> Ordering {
    let (mut x, mut y) = (a.as_bytes(), b.as_bytes());
    while !x.is_empty() && !y.is_empty() {
        if x[0].is_ascii_digit() && y[0].is_ascii_digit() {
            let nx = x.iter().take_while(|c| c.is_ascii_digit()).count();
            let ny = y.iter().take_while(|c| c.is_ascii_digit()).count();
            let (dx, dy) = (trim_zeros(&x[..nx]), trim_zeros(&y[..ny]));
            let ord = dx.len().cmp(&dy.len()).then_with(|| dx.cmp(dy));
            if ord != Ordering::Equal {
                return ord;
            }
            x = &x[nx..];
            y = &y[ny..];
        } else {
            if x[0] != y[0] {
                return x[0].cmp(&y[0]);
            }
            x = &x[1..];
            y = &y[1..];
        }
    }
    x.len().cmp(&y.len()).then_with(|| a.cmp(b))
}

fn trim_zeros(d: &[u8]) -> &[u8] {
    let z = d.iter().take_while(|&&c| c == b'0').count();
    &d[z..]
}

impl SpanIndex {
    /// Resolves the hierarchy of `doc`.
    pub fn build(doc: &TraceDocument) -> Self {
        let n = doc.spans.len();
        let mut parent = vec![None; n];
        let mut parent_unknown = vec![false; n];
        let mut children: Vec<Vec<u32>> = vec![Vec::new(); n];
        let mut roots = Vec::new();
        for (i, span) in doc.spans.iter().enumerate() {
            match span.parent {
                None => roots.push(i as u32),
                Some(p) => match doc.span_index(p) {
                    Some(pi) => {
                        parent[i] = Some(pi as u32);
                        children[pi].push(i as u32);
                    }
                    None => {
                        parent_unknown[i] = true;
                        roots.push(i as u32);
                    }
                },
            }
        }
        let order = |a: &u32, b: &u32| canonical_cmp(doc, *a as usize, *b as usize);
        for list in &mut children {
            list.sort_by(order);
        }
        roots.sort_by(order);

        let mut preorder = Vec::with_capacity(n);
        let mut visited = vec![false; n];
        let mut depth = vec![0u32; n];
        let mut pass: Vec<Option<Pass>> = doc.spans.iter().map(|s| s.pass).collect();
        let mut stack: Vec<u32> = roots.iter().rev().copied().collect();
        while let Some(s) = stack.pop() {
            let s = s as usize;
            if std::mem::replace(&mut visited[s], true) {
                continue;
            }
            preorder.push(s as u32);
            for &c in children[s].iter().rev() {
                let c = c as usize;
                depth[c] = depth[s] + 1;
                if pass[c].is_none() {
                    pass[c] = pass[s];
                }
                stack.push(c as u32);
            }
        }
        let in_cycle: Vec<bool> = visited.iter().map(|v| !v).collect();
        // Spans on a cycle inherit only along the cycle's own parents: each walk stops at a
        // declared pass, a span already resolved or its own start, and resolves every span it
        // walked, so each span is walked once (O(S), not O(S · cycle length)).
        let mut resolved = vec![false; n];
        let mut on_walk = vec![usize::MAX; n];
        let mut walked: Vec<usize> = Vec::new();
        for i in 0..n {
            if !in_cycle[i] || pass[i].is_some() || resolved[i] {
                continue;
            }
            walked.clear();
            let mut found = None;
            let mut cur = Some(i);
            while let Some(c) = cur {
                if doc.spans[c].pass.is_some() || resolved[c] {
                    found = pass[c];
                    break;
                }
                if on_walk[c] == i {
                    break; // round the cycle: no declared pass on it
                }
                on_walk[c] = i;
                walked.push(c);
                cur = parent[c].map(|p| p as usize);
            }
            for &w in &walked {
                pass[w] = found;
                resolved[w] = true;
            }
        }
        // The head anchor: itself down to depth PATH_HEAD_NAMES - 1, else its parent's.
        let mut head_anchor: Vec<u32> = (0..n as u32).collect();
        for &s in &preorder {
            let s = s as usize;
            if depth[s] as usize >= PATH_HEAD_NAMES {
                if let Some(p) = parent[s] {
                    head_anchor[s] = head_anchor[p as usize];
                }
            }
        }
        let mut occurrence = vec![0u32; n];
        let mut counts: rustc_hash::FxHashMap<&str, u32> = rustc_hash::FxHashMap::default();
        for list in children.iter().chain(std::iter::once(&roots)) {
            counts.clear();
            for &c in list {
                *counts
                    .entry(doc.str(doc.spans[c as usize].name))
                    .or_insert(0) += 1;
            }
            if counts.len() == list.len() {
                continue; // no repeated name among these siblings
            }
            let mut seen: rustc_hash::FxHashMap<&str, u32> = rustc_hash::FxHashMap::default();
            for &c in list {
                let name = doc.str(doc.spans[c as usize].name);
                if counts[name] > 1 {
                    let k = seen.entry(name).or_insert(0);
                    *k += 1;
                    occurrence[c as usize] = *k;
                }
            }
        }
        let measured = preorder
            .iter()
            .map(|&s| s as usize)
            .find(|&s| doc.spans[s].measured)
            .or_else(|| doc.spans.iter().position(|s| s.measured));
        Self {
            parent,
            parent_unknown,
            children,
            roots,
            preorder,
            in_cycle,
            depth,
            pass,
            measured,
            head_anchor,
            occurrence,
        }
    }

    /// Number of spans.
    pub fn len(&self) -> usize {
        self.parent.len()
    }

    /// True for a document without spans.
    pub fn is_empty(&self) -> bool {
        self.parent.is_empty()
    }

    /// Names from the root to span `i`, joined by `/`; deeper than 32 levels, capped (first 8
    /// names, `…(N of M levels left out)…`, last 24: see [`PATH_HEAD_NAMES`]). O(32) for a span
    /// below a root; a span on a parent cycle walks the cycle once (at most 32 names, then
    /// `…/` first). Raw trace text: escape before display.
    pub fn path(&self, doc: &TraceDocument, i: usize) -> String {
        self.path_with(doc, i, false)
    }

    /// [`Self::path`] with layer indices: a name repeated among its siblings carries its
    /// 1-based call order from the second call on, `name#k` (llama's two decoder layers are
    /// `model/block/attn` and `model/block#2/attn`), the names the probe itself gives a second
    /// instance of a module name since trace/13 — so an older trace and a new one read alike. Views that list or group spans by
    /// path use this one, so distinct layers are distinct rows. Same cost and cap as
    /// [`Self::path`]. Raw trace text: escape before display.
    pub fn indexed_path(&self, doc: &TraceDocument, i: usize) -> String {
        self.path_with(doc, i, true)
    }

    /// [`Self::indexed_path`] of a span id; `None` for an id that is not a span.
    pub fn indexed_path_of_id(&self, doc: &TraceDocument, id: &str) -> Option<String> {
        let i = doc.span_index(doc.sym(id)?)?;
        Some(self.indexed_path(doc, i))
    }

    /// The 1-based call order of span `i` among same-named siblings when its name repeats
    /// among them; `None` for a name that occurs once.
    pub fn occurrence(&self, i: usize) -> Option<u32> {
        self.occurrence.get(i).copied().filter(|&k| k > 0)
    }

    fn path_with(&self, doc: &TraceDocument, i: usize, indexed: bool) -> String {
        let name = |s: usize| -> std::borrow::Cow<'_, str> {
            let n = doc.str(doc.spans[s].name);
            match self.occurrence[s] {
                k if indexed && k > 1 => format!("{n}#{k}").into(),
                _ => n.into(),
            }
        };
        let cap = PATH_HEAD_NAMES + PATH_TAIL_NAMES;
        let mut tail: Vec<usize> = vec![i];
        if self.in_cycle.get(i).copied().unwrap_or(true) {
            let mut cur = self.parent[i];
            while let Some(p) = cur {
                let p = p as usize;
                if tail.contains(&p) {
                    break;
                }
                if tail.len() == cap {
                    let names: Vec<_> = tail.iter().rev().map(|&s| name(s)).collect();
                    return format!("…/{}", names.join("/"));
                }
                tail.push(p);
                cur = self.parent[p];
            }
            let names: Vec<_> = tail.iter().rev().map(|&s| name(s)).collect();
            return names.join("/");
        }
        let levels = self.depth[i] as usize + 1;
        let tail_len = if levels <= cap {
            levels
        } else {
            PATH_TAIL_NAMES
        };
        let mut cur = self.parent[i];
        while tail.len() < tail_len {
            let Some(p) = cur else { break };
            tail.push(p as usize);
            cur = self.parent[p as usize];
        }
        let mut head: Vec<_> = Vec::new();
        if levels > cap {
            let mut cur = Some(self.head_anchor[i]);
            while let Some(p) = cur {
                head.push(name(p as usize));
                cur = self.parent[p as usize];
            }
            head.reverse();
        }
        let tail: Vec<_> = tail.iter().rev().map(|&s| name(s)).collect();
        join_capped_path(&head, &tail, levels)
    }

    /// [`Self::path`] of a span id; `None` for an id that is not a span.
    pub fn path_of_id(&self, doc: &TraceDocument, id: &str) -> Option<String> {
        let i = doc.span_index(doc.sym(id)?)?;
        Some(self.path(doc, i))
    }

    /// [`Self::pass`] of a span id; `None` for an id that is not a span or a span in no pass.
    pub fn pass_of_id(&self, doc: &TraceDocument, id: &str) -> Option<Pass> {
        self.pass[doc.span_index(doc.sym(id)?)?]
    }

    /// Start and end of the measured region (`end` is `None` while the span is open).
    pub fn measured_region(&self, doc: &TraceDocument) -> Option<(u64, Option<u64>)> {
        self.measured.map(|m| {
            let s = &doc.spans[m];
            (s.start_ns, s.end_ns())
        })
    }

    /// The innermost span whose interval `[start, end)` contains `t` (an open span runs to the
    /// end of the trace; a closed span of duration 0 contains only its start): the deepest,
    /// then the latest start, then the last in canonical order. O(S).
    pub fn innermost_at(&self, doc: &TraceDocument, t: u64) -> Option<usize> {
        let mut best: Option<usize> = None;
        for &s in &self.preorder {
            let s = s as usize;
            let span = &doc.spans[s];
            if !contains(span, t) {
                continue;
            }
            let better = best.is_none_or(|b| {
                (self.depth[s], span.start_ns) >= (self.depth[b], doc.spans[b].start_ns)
            });
            if better {
                best = Some(s);
            }
        }
        best
    }

    /// The first span declaring `pass` itself: earliest start, then outermost, then canonical
    /// order — independent of the file's interleaving.
    pub fn first_declaring(&self, doc: &TraceDocument, pass: Pass) -> Option<usize> {
        (0..self.len())
            .filter(|&i| doc.spans[i].pass == Some(pass))
            .min_by(|&a, &b| {
                (doc.spans[a].start_ns, self.depth[a])
                    .cmp(&(doc.spans[b].start_ns, self.depth[b]))
                    .then_with(|| canonical_cmp(doc, a, b))
            })
    }
}

/// `start <= t < end` (an open span runs to the end; duration 0 holds its start instant).
fn contains(span: &SpanRecord, t: u64) -> bool {
    if t < span.start_ns {
        return false;
    }
    match span.duration_ns {
        None => true,
        Some(0) => t == span.start_ns,
        Some(d) => t - span.start_ns < d,
    }
}

/// Canonical order of two spans: start, then id in natural order.
fn canonical_cmp(doc: &TraceDocument, a: usize, b: usize) -> Ordering {
    let (sa, sb) = (&doc.spans[a], &doc.spans[b]);
    sa.start_ns
        .cmp(&sb.start_ns)
        .then_with(|| natural_cmp(doc.str(sa.id), doc.str(sb.id)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_paths_are_capped_and_state_the_full_depth() {
        let n = 20_000;
        let mut text = String::from(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        );
        text.push('\n');
        for i in 1..=n {
            let parent = if i > 1 {
                format!(r#","parent_id":"s{}""#, i - 1)
            } else {
                String::new()
            };
            text.push_str(&format!(
                r#"{{"kind":"span_start","id":"s{i}"{parent},"name":"n{i}","start_ns":{i},"span_kind":"function"}}"#
            ));
            text.push('\n');
        }
        let doc = trace_schema::load_str(&text).unwrap();
        let ix = SpanIndex::build(&doc);
        let deep = ix.path_of_id(&doc, &format!("s{n}")).unwrap();
        let tail: Vec<String> = (n - 23..=n).map(|i| format!("n{i}")).collect();
        assert_eq!(
            deep,
            format!(
                "n1/n2/n3/n4/n5/n6/n7/n8/…({} of {n} levels left out)…/{}",
                n - 32,
                tail.join("/")
            )
        );
        let shallow: Vec<String> = (1..=32).map(|i| format!("n{i}")).collect();
        assert_eq!(ix.path_of_id(&doc, "s32").unwrap(), shallow.join("/"));
        assert!(ix
            .path_of_id(&doc, "s33")
            .unwrap()
            .contains("…(1 of 33 levels left out)…"));
        // every path of the chain: linear output, not 2·10^8 names
        let total: usize = (0..doc.spans.len()).map(|i| ix.path(&doc, i).len()).sum();
        assert!(total < n * 300, "{total}");
    }

    #[test]
    fn indexed_paths_number_repeated_siblings_in_call_order() {
        // two `block`s under `model` (started out of file order), each with an `attn`; one `lm_head`
        let doc = trace_schema::load_str(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
            r#"{"kind":"span_start","id":"s1","name":"model","start_ns":0,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_start","id":"s4","parent_id":"s1","name":"block","start_ns":20,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"block","start_ns":10,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_start","id":"s3","parent_id":"s2","name":"attn","start_ns":11,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_start","id":"s5","parent_id":"s4","name":"attn","start_ns":21,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_start","id":"s6","parent_id":"s1","name":"lm_head","start_ns":30,"span_kind":"module"}"#, "\n",
        ))
        .unwrap();
        let ix = SpanIndex::build(&doc);
        let p = |id: &str| ix.indexed_path_of_id(&doc, id).unwrap();
        assert_eq!(p("s3"), "model/block/attn"); // the first call keeps its name
        assert_eq!(p("s5"), "model/block#2/attn");
        assert_eq!(p("s4"), "model/block#2");
        assert_eq!(p("s6"), "model/lm_head");
        assert_eq!(p("s1"), "model");
        // the plain path keeps the names only
        assert_eq!(ix.path_of_id(&doc, "s5").unwrap(), "model/block/attn");
        let i = |id: &str| doc.span_index(doc.sym(id).unwrap()).unwrap();
        assert_eq!(ix.occurrence(i("s2")), Some(1));
        assert_eq!(ix.occurrence(i("s6")), None);
    }

    #[test]
    fn natural_order_compares_numbers_by_value() {
        assert_eq!(natural_cmp("s2", "s10"), Ordering::Less);
        assert_eq!(natural_cmp("s10", "s10"), Ordering::Equal);
        assert_eq!(natural_cmp("a", "b"), Ordering::Less);
        assert_eq!(natural_cmp("s1/op/3", "s1/op/12"), Ordering::Less);
        assert_eq!(natural_cmp("s01", "s1"), Ordering::Less);
    }

    #[test]
    fn paths_passes_and_the_span_holding_a_time() {
        let doc = trace_schema::load_str(concat!(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
            r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
            r#"{"kind":"span_start","id":"s2","parent_id":"s1","name":"forward","start_ns":1,"span_kind":"function","step":"forward"}"#, "\n",
            r#"{"kind":"span_start","id":"s3","parent_id":"s2","name":"linear","start_ns":2,"span_kind":"module"}"#, "\n",
            r#"{"kind":"span_end","id":"s3","duration_ns":3}"#, "\n",
            r#"{"kind":"span_end","id":"s2","duration_ns":9}"#, "\n",
        ))
        .unwrap();
        let ix = SpanIndex::build(&doc);
        assert_eq!(
            ix.path_of_id(&doc, "s3").as_deref(),
            Some("step/forward/linear")
        );
        assert_eq!(ix.path_of_id(&doc, "nope"), None);
        assert_eq!(ix.pass_of_id(&doc, "s3"), Some(Pass::Forward));
        assert_eq!(ix.pass_of_id(&doc, "s1"), None);
        assert_eq!(ix.measured, Some(0));
        assert_eq!(ix.measured_region(&doc), Some((0, None)));
        assert_eq!(ix.innermost_at(&doc, 3), Some(2));
        assert_eq!(ix.innermost_at(&doc, 5), Some(1));
        assert_eq!(ix.innermost_at(&doc, 50), Some(0));
        assert_eq!(ix.first_declaring(&doc, Pass::Forward), Some(1));
        assert_eq!(ix.depth, vec![0, 1, 2]);
    }
}
