//! The span tree: host spans nested by time on each thread, training passes, the `backward`
//! spans grouping autograd ops, thread spans (several threads only) and the measured root.
//!
//! Nesting: on one thread, spans are taken in (start, longer first, file order); a span is the
//! child of the innermost earlier span whose half-open interval `[start, end)` holds its start.
//! So at equal starts the longer encloses, and a zero-length span encloses nothing.
//!
//! Passes, when the trace makes them unambiguous:
//! - declared: a `user_annotation` named `forward`, `backward` or `optimizer` (ASCII case
//!   ignored), and `Optimizer.step#…` (PyTorch's own optimizer range) for the optimizer;
//! - backward, inferred: ops named as autograd work (`autograd::engine::evaluate_function: …`,
//!   autograd nodes `…Backward<N>`, `torch::autograd::AccumulateGrad`) and every top-level span
//!   of an autograd engine thread (`pt_autograd_<device>`). Each maximal run of such sibling
//!   spans (split at `ProfilerStep#N` boundaries) is grouped under one added `backward` span;
//! - inside a span with a pass, nothing else is examined: a declared pass nested in another
//!   pass, or backward ops inside a `forward` or optimizer span, keep the outer pass and are
//!   counted in a warning;
//! - anything else has no pass (a forward pass needs a `forward` annotation: PyTorch records
//!   none of its own).

use trace_schema::{Pass, SpanKind};

use crate::collect::{Collected, HostCat, Node, NodeClass};
use crate::report::ImportReport;

/// Name of the spans added around runs of autograd ops.
pub const DERIVED_BACKWARD: &str = "backward";

/// The finished tree: `nodes[0]` is the root; `order` is a depth-first pre-order (children by
/// start), which also gives span ids (`s<position + 1>`).
#[derive(Debug)]
pub(crate) struct Tree {
    pub order: Vec<u32>,
    /// Position of each node in `order`.
    pub position: Vec<u32>,
    /// The span of each thread that holds its top-level spans and unattributed memory: a
    /// thread span, or the root.
    pub thread_home: Vec<u32>,
}

fn declared_step(node: &Node) -> Option<Pass> {
    let NodeClass::Host(cat) = node.class else {
        return None;
    };
    if node.name.starts_with("Optimizer.step#") {
        return Some(Pass::Optimizer);
    }
    if cat != HostCat::UserAnnotation {
        return None;
    }
    let n = node.name.as_str();
    if n.eq_ignore_ascii_case("forward") {
        Some(Pass::Forward)
    } else if n.eq_ignore_ascii_case("backward") {
        Some(Pass::Backward)
    } else if n.eq_ignore_ascii_case("optimizer") {
        Some(Pass::Optimizer)
    } else {
        None
    }
}

/// Autograd node names end in `Backward` and a number (`AddmmBackward0`).
fn is_autograd_node(name: &str) -> bool {
    let digits = name.trim_end_matches(|c: char| c.is_ascii_digit());
    digits.len() < name.len() && digits.ends_with("Backward")
}

fn named_as_backward(node: &Node) -> bool {
    matches!(node.class, NodeClass::Host(HostCat::CpuOp | HostCat::Other))
        && (node
            .name
            .starts_with("autograd::engine::evaluate_function: ")
            || node.name == "torch::autograd::AccumulateGrad"
            || is_autograd_node(&node.name))
}

/// Builds the tree in `c.nodes` (adding the root first, then derived and thread spans).
pub(crate) fn build(c: &mut Collected, origin: i128, report: &mut ImportReport) -> Tree {
    // The root goes first: shift host nodes by one.
    let n_threads = c.threads.len();
    let mut end = origin;
    for n in &c.nodes {
        end = end.max(n.end);
    }
    for m in &c.mems {
        end = end.max(m.ts);
    }
    for g in &c.gpus {
        end = end.max(g.end);
    }
    if let Some((_, e)) = c.window {
        end = end.max(e);
    }
    c.nodes.insert(
        0,
        Node {
            name: "profiler window".to_string(),
            kind: SpanKind::Function,
            class: NodeClass::Root,
            thread: None,
            start: origin,
            end,
            file: 0,
            external_id: None,
            correlation: None,
            parent: None,
            step: None,
            module_path: None,
        },
    );
    nest(c, report);
    passes(c, report);
    let thread_home = thread_spans(c, n_threads);
    module_paths(c);
    let order = preorder(c);
    let mut position = vec![0u32; c.nodes.len()];
    for (p, &i) in order.iter().enumerate() {
        position[i as usize] = p as u32;
    }
    Tree {
        order,
        position,
        thread_home,
    }
}

/// Host spans of each thread, in nesting order.
fn by_thread(c: &Collected) -> Vec<Vec<u32>> {
    let mut lists = vec![Vec::new(); c.threads.len()];
    for (i, n) in c.nodes.iter().enumerate() {
        if let (NodeClass::Host(_), Some(t)) = (n.class, n.thread) {
            lists[t as usize].push(i as u32);
        }
    }
    for list in &mut lists {
        list.sort_by_key(|&i| {
            let n = &c.nodes[i as usize];
            (n.start, std::cmp::Reverse(n.end), n.file)
        });
    }
    lists
}

fn nest(c: &mut Collected, report: &mut ImportReport) {
    for list in by_thread(c) {
        let mut stack: Vec<u32> = Vec::new();
        for i in list {
            let (start, end) = (c.nodes[i as usize].start, c.nodes[i as usize].end);
            while let Some(&top) = stack.last() {
                let t = &c.nodes[top as usize];
                if t.start <= start && start < t.end {
                    break;
                }
                stack.pop();
            }
            if let Some(&top) = stack.last() {
                c.nodes[i as usize].parent = Some(top);
                if end > c.nodes[top as usize].end {
                    report.spans.overlapping += 1;
                }
            }
            stack.push(i);
        }
    }
}

/// Children lists (sorted by start, longer first, file order) and top-level host spans per
/// thread (parent `None` at this stage).
fn children(c: &Collected) -> (Vec<Vec<u32>>, Vec<Vec<u32>>) {
    let mut kids = vec![Vec::new(); c.nodes.len()];
    let mut tops = vec![Vec::new(); c.threads.len()];
    for (i, n) in c.nodes.iter().enumerate() {
        match (n.parent, n.class, n.thread) {
            (Some(p), _, _) => kids[p as usize].push(i as u32),
            (None, NodeClass::Host(_), Some(t)) => tops[t as usize].push(i as u32),
            _ => {}
        }
    }
    let key = |i: &u32| {
        let n = &c.nodes[*i as usize];
        (n.start, std::cmp::Reverse(n.end), n.file)
    };
    for list in kids.iter_mut().chain(tops.iter_mut()) {
        list.sort_by_key(key);
    }
    (kids, tops)
}

fn passes(c: &mut Collected, report: &mut ImportReport) {
    let (kids, tops) = children(c);
    let mut boundaries: Vec<i128> = c
        .nodes
        .iter()
        .filter(|n| n.name.starts_with("ProfilerStep#"))
        .map(|n| n.start)
        .collect();
    boundaries.sort_unstable();
    let mut nested_declared = 0u64;
    let mut backward_in_other_pass = 0u64;
    let mut candidates = vec![false; c.nodes.len()];
    // Depth-first over each thread with the inherited pass.
    let mut stack: Vec<(u32, Option<Pass>, bool)> = Vec::new();
    for (t, top) in tops.iter().enumerate() {
        let autograd_thread = c.threads[t].is_autograd();
        for &i in top.iter().rev() {
            stack.push((i, None, autograd_thread));
        }
        while let Some((i, inherited, top_of_autograd)) = stack.pop() {
            let declared = declared_step(&c.nodes[i as usize]);
            let named = named_as_backward(&c.nodes[i as usize]);
            let mut pass = inherited;
            match (declared, inherited) {
                (Some(d), None) => {
                    c.nodes[i as usize].step = Some(d);
                    pass = Some(d);
                }
                (Some(_), Some(_)) => nested_declared += 1,
                (None, None) if top_of_autograd || named => {
                    candidates[i as usize] = true;
                    pass = Some(Pass::Backward);
                }
                (None, Some(p)) if p != Pass::Backward && named => {
                    backward_in_other_pass += 1;
                }
                _ => {}
            }
            for &k in kids[i as usize].iter().rev() {
                stack.push((k, pass, false));
            }
        }
    }
    if nested_declared > 0 {
        report.warn(format!(
            "{nested_declared} pass ranges (forward/backward/optimizer annotations, Optimizer.step#…) lie inside another pass's range; they keep the outer pass"
        ));
    }
    if backward_in_other_pass > 0 {
        report.warn(format!(
            "{backward_in_other_pass} autograd ops lie inside a forward or optimizer range; they stay in that pass (is a `forward` annotation around loss.backward()?)"
        ));
    }
    // Group runs of candidate siblings under one `backward` span.
    let lists: Vec<(Option<u32>, &Vec<u32>)> = kids
        .iter()
        .enumerate()
        .map(|(p, l)| (Some(p as u32), l))
        .chain(tops.iter().map(|l| (None, l)))
        .collect();
    let mut runs: Vec<(Option<u32>, Vec<u32>)> = Vec::new();
    for (parent, list) in lists {
        let mut run: Vec<u32> = Vec::new();
        for &i in list {
            let split = run.last().is_some_and(|&prev| {
                let (a, b) = (c.nodes[prev as usize].start, c.nodes[i as usize].start);
                let k = boundaries.partition_point(|&x| x <= a);
                boundaries.get(k).is_some_and(|&x| x <= b)
            });
            if (!candidates[i as usize] || split) && !run.is_empty() {
                runs.push((parent, std::mem::take(&mut run)));
            }
            if candidates[i as usize] {
                run.push(i);
            }
        }
        if !run.is_empty() {
            runs.push((parent, run));
        }
    }
    for (parent, run) in runs {
        let first = &c.nodes[run[0] as usize];
        let (start, thread) = (first.start, first.thread);
        let end = run
            .iter()
            .map(|&i| c.nodes[i as usize].end)
            .max()
            .unwrap_or(start);
        let id = c.nodes.len() as u32;
        c.nodes.push(Node {
            name: DERIVED_BACKWARD.to_string(),
            kind: SpanKind::Function,
            class: NodeClass::Derived,
            thread,
            start,
            end,
            file: c.nodes[run[0] as usize].file,
            external_id: None,
            correlation: None,
            parent,
            step: Some(Pass::Backward),
            module_path: None,
        });
        for i in run {
            c.nodes[i as usize].parent = Some(id);
        }
        report.spans.derived_backward += 1;
    }
}

/// With several threads, one span per thread (named by its `thread_name`) under the root holds
/// that thread's top-level spans; with one, they hang on the root. Returns each thread's home.
fn thread_spans(c: &mut Collected, n_threads: usize) -> Vec<u32> {
    if n_threads <= 1 {
        for n in c.nodes.iter_mut().skip(1) {
            if n.parent.is_none() {
                n.parent = Some(0);
            }
        }
        return vec![0; n_threads];
    }
    let mut bounds: Vec<Option<(i128, i128)>> = vec![None; n_threads];
    let mut widen = |t: Option<u32>, s: i128, e: i128| {
        if let Some(t) = t {
            let b = &mut bounds[t as usize];
            *b = Some(b.map_or((s, e), |(a, z)| (a.min(s), z.max(e))));
        }
    };
    for n in c.nodes.iter().skip(1) {
        widen(n.thread, n.start, n.end);
    }
    for m in &c.mems {
        widen(m.thread, m.ts, m.ts);
    }
    let mut homes = Vec::with_capacity(n_threads);
    for (t, b) in bounds.into_iter().enumerate() {
        let (start, end) = b.unwrap_or((c.nodes[0].start, c.nodes[0].start));
        homes.push(c.nodes.len() as u32);
        c.nodes.push(Node {
            name: c.threads[t].label(),
            kind: SpanKind::Function,
            class: NodeClass::Thread,
            thread: Some(t as u32),
            start,
            end,
            file: 0,
            external_id: None,
            correlation: None,
            parent: Some(0),
            step: None,
            module_path: None,
        });
    }
    for i in 1..c.nodes.len() {
        let n = &c.nodes[i];
        if n.parent.is_none() {
            c.nodes[i].parent = Some(n.thread.map_or(0, |t| homes[t as usize]));
        }
    }
    homes
}

/// Most module names a `module_path` holds: a deeper module's path keeps the first 8 and the
/// last 24 around `…(N of M levels left out)…` (the CLI's paths are capped the same way), so the
/// paths of a chain of nested modules are linear in the trace, not quadratic.
const MODULE_PATH_HEAD: usize = 8;
/// See [`MODULE_PATH_HEAD`].
const MODULE_PATH_TAIL: usize = 24;

/// `nn.Module: X` Python spans (with_modules) are module spans; their path joins the names of
/// the enclosing module spans with `/` (capped: [`MODULE_PATH_HEAD`]). O(n): each node's nearest
/// enclosing module is inherited in pre-order, never searched for.
fn module_paths(c: &mut Collected) {
    let order = preorder(c);
    let n = c.nodes.len();
    // nearest module at or above each node; per module: its enclosing module, module depth,
    // and its ancestor module at depth MODULE_PATH_HEAD - 1
    let mut nearest: Vec<Option<u32>> = vec![None; n];
    let mut outer: Vec<Option<u32>> = vec![None; n];
    let mut depth = vec![0usize; n];
    let mut anchor: Vec<u32> = (0..n as u32).collect();
    let own = |c: &Collected, i: usize| {
        c.nodes[i]
            .name
            .trim_start_matches("nn.Module: ")
            .to_string()
    };
    for i in order {
        let i = i as usize;
        let inherited = c.nodes[i].parent.and_then(|p| nearest[p as usize]);
        if c.nodes[i].kind != SpanKind::Module {
            nearest[i] = inherited;
            continue;
        }
        nearest[i] = Some(i as u32);
        outer[i] = inherited;
        if let Some(o) = inherited {
            depth[i] = depth[o as usize] + 1;
            if depth[i] >= MODULE_PATH_HEAD {
                anchor[i] = anchor[o as usize];
            }
        }
        let levels = depth[i] + 1;
        let cap = MODULE_PATH_HEAD + MODULE_PATH_TAIL;
        let path = if levels <= cap {
            // the enclosing path (itself bounded) and this name
            match inherited {
                Some(o) => format!(
                    "{}/{}",
                    c.nodes[o as usize].module_path.as_deref().unwrap_or(""),
                    own(c, i)
                ),
                None => own(c, i),
            }
        } else {
            let mut tail = Vec::with_capacity(MODULE_PATH_TAIL);
            let mut cur = Some(i as u32);
            while tail.len() < MODULE_PATH_TAIL {
                let Some(k) = cur else { break };
                tail.push(own(c, k as usize));
                cur = outer[k as usize];
            }
            tail.reverse();
            let mut head = Vec::with_capacity(MODULE_PATH_HEAD);
            let mut cur = Some(anchor[i]);
            while let Some(k) = cur {
                head.push(own(c, k as usize));
                cur = outer[k as usize];
            }
            head.reverse();
            format!(
                "{}/…({} of {levels} levels left out)…/{}",
                head.join("/"),
                levels - cap,
                tail.join("/")
            )
        };
        c.nodes[i].module_path = Some(path);
    }
}

/// Depth-first pre-order from the root, children by (start, longer first, class, file).
fn preorder(c: &Collected) -> Vec<u32> {
    let mut kids = vec![Vec::new(); c.nodes.len()];
    for (i, n) in c.nodes.iter().enumerate() {
        if let Some(p) = n.parent {
            kids[p as usize].push(i as u32);
        }
    }
    let rank = |class: NodeClass| match class {
        NodeClass::Root => 0,
        NodeClass::Thread => 1,
        NodeClass::Derived => 2,
        NodeClass::Host(_) => 3,
    };
    for list in &mut kids {
        list.sort_by_key(|&i| {
            let n = &c.nodes[i as usize];
            (
                n.start,
                std::cmp::Reverse(n.end),
                rank(n.class),
                n.thread,
                n.file,
            )
        });
    }
    let mut order = Vec::with_capacity(c.nodes.len());
    let mut stack = vec![0u32];
    while let Some(i) = stack.pop() {
        order.push(i);
        for &k in kids[i as usize].iter().rev() {
            stack.push(k);
        }
    }
    order
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn autograd_node_names() {
        assert!(is_autograd_node("AddmmBackward0"));
        assert!(is_autograd_node("NativeLayerNormBackward12"));
        assert!(!is_autograd_node("Backward"));
        assert!(!is_autograd_node("aten::addmm"));
        assert!(!is_autograd_node("Backward0x"));
    }
}
