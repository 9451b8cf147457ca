//! The flame graph data of the report: trace-ops's flame trees of the sampled call stacks (one
//! per thread and pass, outermost frame under the root, bounded: small frames merged into
//! [`trace_ops::flame::OTHER`] nodes) as compact columns for the page's script.
//!
//! Names (functions, op labels) are escaped with [`trace_format::escape`], elided in the
//! middle to [`NAME_CHARS`] characters and interned once for all trees. The conversion is one
//! loop over the nodes (no recursion on depth); the page lays trees out with explicit stacks.

use std::collections::HashMap;

use serde_json::{json, Value};
use trace_ops::{FlameTree, OpKind};

/// Characters kept of a function name or op label (elided in the middle beyond).
pub const NAME_CHARS: usize = 160;

/// The label of a tree's tab: its pass (`forward`, …, `outside passes`), with the thread when
/// the trace sampled more than one.
pub fn tree_label(tree: &FlameTree, threads: usize) -> String {
    let pass = tree.pass.map_or("outside passes", |p| p.as_str());
    if threads > 1 {
        format!("thread {} · {pass}", tree.thread)
    } else {
        pass.to_string()
    }
}

fn is_merged(n: &trace_ops::FlameNode) -> bool {
    n.name == trace_ops::flame::OTHER && n.op.is_none() && n.children.is_empty() && n.depth > 0
}

/// The trees as JSON for the page: `strings` (every name once) and per tree its `label`,
/// `pass`, `thread`, `samples`, `merged_nodes`, `rooted_at` (the step frame the tree starts at,
/// its frames above cut: see [`trace_ops::flame`]; index into `strings` or `-1`) and the nodes as columns in the trees' order (a
/// parent before its children, children most samples first): `name` and `op` (indices into
/// `strings`, `-1` for no op), `kind` (the op's kind or `null`), `parent` (`-1` for the root),
/// `value` (samples through the node), `self` (samples innermost in it), `merged` (1 for a node
/// standing for merged smaller frames).
pub fn flame_data(trees: &[FlameTree]) -> Value {
    let mut strings: Vec<String> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    let mut intern = |s: &str| -> usize {
        let text = trace_format::elide_middle(&trace_format::escape(s), NAME_CHARS).into_owned();
        if let Some(&i) = index.get(&text) {
            return i;
        }
        strings.push(text.clone());
        index.insert(text, strings.len() - 1);
        strings.len() - 1
    };
    let mut threads: Vec<u64> = trees.iter().map(|t| t.thread).collect();
    threads.sort_unstable();
    threads.dedup();
    let out: Vec<Value> = trees
        .iter()
        .map(|t| {
            let n = t.nodes.len();
            let (mut name, mut op, mut kind, mut parent, mut value, mut own, mut merged) = (
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
                Vec::with_capacity(n),
            );
            for node in &t.nodes {
                let m = is_merged(node);
                name.push(intern(&node.name));
                op.push(node.op.as_deref().map_or(-1, |o| intern(o) as i64));
                kind.push(node.kind.map(OpKind::as_str));
                parent.push(node.parent.map_or(-1, i64::from));
                value.push(node.total_samples);
                own.push(if m { 0 } else { node.self_samples });
                merged.push(u8::from(m));
            }
            let rooted_at = t.rooted_at.as_deref().map_or(-1, |r| intern(r) as i64);
            json!({
                "label": tree_label(t, threads.len()),
                "rooted_at": rooted_at,
                "pass": t.pass.map(|p| p.as_str()),
                "thread": t.thread,
                "samples": t.samples,
                "merged_nodes": t.merged_nodes,
                "name": name,
                "op": op,
                "kind": kind,
                "parent": parent,
                "value": value,
                "self": own,
                "merged": merged,
            })
        })
        .collect();
    json!({ "strings": strings, "trees": out })
}
