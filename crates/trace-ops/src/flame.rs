//! Flame trees of the sampled stacks: one [`FlameTree`] per sampled thread and pass, for a
//! flame graph or icicle (the HTML report) — node = a function on the call path (outermost at
//! the root), with its self and total samples and, on op frames, the op it stands for.
//!
//! ```
//! # let text = concat!(
//! #   r#"{"kind":"meta","schema":"candle-graph/trace/12","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#, "\n",
//! #   r#"{"kind":"span_start","id":"s1","name":"step","start_ns":0,"span_kind":"function","measured":true}"#, "\n",
//! #   r#"{"kind":"span_end","id":"s1","duration_ns":100}"#, "\n",
//! #   r#"{"kind":"frame","id":0,"function":"candle_core::tensor::Tensor::matmul"}"#, "\n",
//! #   r#"{"kind":"frame","id":1,"function":"my_model::step"}"#, "\n",
//! #   r#"{"kind":"stack","id":0,"frames":[0,1]}"#, "\n",
//! #   r#"{"kind":"sample","timestamp_ns":5,"thread":1,"stack_id":0,"span_id":"s1"}"#, "\n",
//! #   r#"{"kind":"terminal","outcome":"complete","timestamp_ns":100}"#, "\n",
//! # );
//! # let doc = trace_schema::load_str(text).unwrap();
//! let profile = trace_ops::OpProfile::from_document(&doc).unwrap();
//! let trees = trace_ops::flame_trees(&doc, &profile, &trace_ops::FlameOptions::default());
//! let tree = &trees[0];
//! // walk it without recursion: an explicit stack of node indices
//! let mut stack = vec![0u32];
//! while let Some(i) = stack.pop() {
//!     let node = &tree.nodes[i as usize];
//!     println!("{}{} {}", "  ".repeat(node.depth as usize), node.name, node.total_samples);
//!     stack.extend(node.children.iter().rev());
//! }
//! assert_eq!(tree.nodes[1].name, "my_model::step");
//! assert_eq!(tree.nodes[2].op.as_deref(), Some("matmul"));
//! ```
//!
//! # Shape
//! `nodes[0]` is the root (`name` = the pass, or `all`; its total is the tree's samples);
//! every node lists its children (indices into `nodes`, most samples first, then by name) and
//! its parent. Nodes are keyed by (parent, function, op label): the one backward frame splits
//! into one node per backward op (`backward [matmul.backward]`, `backward [grad_accumulate]`).
//! Only samples inside the measured region count (as in the [`OpProfile`]).
//!
//! # Rooted at the step
//! Stacks start at the process's entry (`_start`, `main`, `std::rt::lang_start`, the harness)
//! and unwinding stops at different depths, so the same function would appear under two or
//! three roots. Each thread's trees are cut at its **step frame**: the innermost function
//! that [`STEP_FRAME_SHARE`] of the thread's counted samples pass through above their op
//! frame (the user's step function, in a training loop). Every stack holding it starts at its
//! outermost occurrence, so stacks that differ only above it merge. A stack without it (a
//! sample in the loop between steps, or one whose unwinding went astray) is put under one
//! [`OUTSIDE_STEP`] node beside the step frame, from the innermost of its frames that is one
//! of the step's callers on the thread's heaviest stack (the loop, say; process start-up and
//! `main` above it are cut): the first row under a pass holds the step frame and at most that
//! node. [`FlameTree::rooted_at`] names
//! the frame.
//!
//! # Bounded
//! A node with fewer samples than [`FlameOptions::min_share`] of its tree, and every node
//! beyond [`FlameOptions::max_nodes`] (the smallest go first), is merged with its small
//! siblings into one [`OTHER`] child of their parent (no children): a tree has at most about
//! twice `max_nodes` nodes whatever the stacks. Built in O(frames of the distinct stacks +
//! nodes log nodes), iteratively.

use rustc_hash::{FxHashMap as HashMap, FxHashSet};
use serde::Serialize;
use trace_schema::{Pass, TraceDocument};

use crate::classify::{function_path, OpKind};
use crate::profile::{pass_rank, OpProfile};
use crate::rules::FrameRole;

/// The name of a merged node.
pub const OTHER: &str = "(other)";

/// The node, beside the step frame, of the samples whose stack does not pass through it (see
/// the module docs).
pub const OUTSIDE_STEP: &str = "(outside the step)";

/// The share of a thread's counted samples a frame must be on to root its trees (see the
/// module docs): 0.95, so a few samples whose unwinding stopped short do not move the root.
pub const STEP_FRAME_SHARE: f64 = 0.95;

/// Bounds of a flame tree.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlameOptions {
    /// Nodes below this share of the tree's samples are merged (default 0.002: 0.2%).
    pub min_share: f64,
    /// At most this many nodes are kept before merging (default 2,000).
    pub max_nodes: usize,
}

impl Default for FlameOptions {
    fn default() -> Self {
        Self {
            min_share: 0.002,
            max_nodes: 2_000,
        }
    }
}

/// One node of a flame tree.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlameNode {
    /// The function (its path without closures and generic arguments), [`OTHER`] for merged
    /// nodes, the pass name for the root.
    pub name: String,
    /// The op this frame stands for: on an op frame its op (`matmul`), on the backward frame
    /// the backward op of these samples (`matmul.backward`), on the frame naming a probe or
    /// non-op sample that name; `None` elsewhere.
    pub op: Option<String>,
    /// The kind of `op`.
    pub kind: Option<OpKind>,
    /// Samples whose innermost frame is this node.
    pub self_samples: u64,
    /// Samples through this node (self included).
    pub total_samples: u64,
    /// Depth (the root: 0).
    pub depth: u32,
    /// Parent index (`None` for the root).
    pub parent: Option<u32>,
    /// Child indices, most samples first, then by name.
    pub children: Vec<u32>,
}

/// The flame tree of one thread and pass.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FlameTree {
    /// The sampled thread.
    pub thread: u64,
    /// The pass (`None`: samples outside any pass).
    pub pass: Option<Pass>,
    /// Samples in the tree.
    pub samples: u64,
    /// Nodes; `nodes[0]` is the root.
    pub nodes: Vec<FlameNode>,
    /// Nodes merged into [`OTHER`] nodes by the bounds.
    pub merged_nodes: u64,
    /// The function the tree is rooted at (its frames above it cut: see the module docs);
    /// `None` when no function is on [`STEP_FRAME_SHARE`] of the thread's samples.
    pub rooted_at: Option<String>,
}

/// The flame trees of `doc`'s samples, one per thread and pass (forward, backward, optimizer,
/// then outside any pass), from the profile's classes.
pub fn flame_trees(
    doc: &TraceDocument,
    profile: &OpProfile,
    options: &FlameOptions,
) -> Vec<FlameTree> {
    let table = &doc.samples;
    // weight of each (thread, pass, stack)
    let mut weights: HashMap<(u64, Option<Pass>, u32), u64> = HashMap::default();
    for (i, s) in table.samples.iter().enumerate() {
        if profile.row_of_sample(i).is_none() {
            continue;
        }
        *weights
            .entry((s.thread, profile.pass_of_sample(i), s.stack))
            .or_insert(0) += 1;
    }
    let mut groups: Vec<(u64, Option<Pass>)> = weights.keys().map(|&(t, p, _)| (t, p)).collect();
    groups.sort_by_key(|&(t, p)| (t, pass_rank(p)));
    groups.dedup();
    let mut by_group: HashMap<Group, Vec<(u32, u64)>> = HashMap::default();
    for (&(t, p, stack), &w) in &weights {
        by_group.entry((t, p)).or_default().push((stack, w));
    }
    let roles: Vec<FrameRole> = table.frames.iter().map(FrameRole::of).collect();
    // nodes are keyed by the function's name, not the frame: the frames of one function at
    // different lines are one node
    let mut names: Vec<String> = Vec::new();
    let mut name_index: HashMap<String, u32> = HashMap::default();
    let name_of: Vec<u32> = table
        .frames
        .iter()
        .map(|f| {
            let n = function_path(f);
            *name_index.entry(n.clone()).or_insert_with(|| {
                names.push(n);
                (names.len() - 1) as u32
            })
        })
        .collect();
    let anchors = step_frames(doc, profile, &name_of, &weights);
    names.push(OUTSIDE_STEP.to_string());
    let outside = (names.len() - 1) as u32;
    groups
        .into_iter()
        .map(|g| {
            let mut stacks = by_group.remove(&g).unwrap_or_default();
            stacks.sort_unstable();
            let anchor = anchors.get(&g.0);
            let mut tree = build(
                doc,
                profile,
                &roles,
                (&names, &name_of, outside),
                (g, anchor),
                &stacks,
                options,
            );
            tree.rooted_at = anchor.map(|a| names[a.frame as usize].clone());
            tree
        })
        .collect()
}

/// Positions (innermost first) of `stack`'s frames that may root a tree: those outer than its
/// op frame (the op frame itself too for a non-op sample, whose frame is user code).
fn rootable(profile: &OpProfile, stack: u32, len: usize) -> std::ops::Range<usize> {
    let class = &profile.stack_classes[stack as usize];
    match class.op_frame {
        Some(p) if class.kind == OpKind::NonOp => p..len,
        Some(p) => (p + 1).min(len)..len,
        None => 0..len,
    }
}

/// A thread's step frame and its callers.
struct StepRoot {
    /// The step frame's function name id.
    frame: u32,
    /// The name ids of the frames outer to it on the thread's heaviest stack.
    callers: FxHashSet<u32>,
}

/// Each thread's step frame: the innermost function on [`STEP_FRAME_SHARE`] of the thread's
/// counted samples, read along its heaviest stack, with the frames above it there.
/// O(frames of the distinct stacks).
fn step_frames(
    doc: &TraceDocument,
    profile: &OpProfile,
    name_of: &[u32],
    weights: &HashMap<(u64, Option<Pass>, u32), u64>,
) -> HashMap<u64, StepRoot> {
    let stacks = &doc.samples.stacks;
    let mut on: HashMap<(u64, u32), u64> = HashMap::default();
    let mut total: HashMap<u64, u64> = HashMap::default();
    let mut heaviest: HashMap<u64, (u64, u32)> = HashMap::default();
    // the stack (its 1-based turn) that last counted each name: a name is counted once per
    // stack, in O(1), however deep a recursion repeats it
    let names = name_of.iter().map(|&n| n as usize + 1).max().unwrap_or(0);
    let mut seen: Vec<u32> = vec![0; names];
    for (turn, (&(thread, _, stack), &w)) in weights.iter().enumerate() {
        let turn = turn as u32 + 1;
        *total.entry(thread).or_insert(0) += w;
        let h = heaviest.entry(thread).or_insert((0, stack));
        if (w, std::cmp::Reverse(stack)) > (h.0, std::cmp::Reverse(h.1)) {
            *h = (w, stack);
        }
        let frames = &stacks[stack as usize].frames;
        for pos in rootable(profile, stack, frames.len()) {
            let name = name_of[frames[pos] as usize];
            if seen[name as usize] != turn {
                seen[name as usize] = turn;
                *on.entry((thread, name)).or_insert(0) += w;
            }
        }
    }
    let mut out = HashMap::default();
    for (thread, (_, stack)) in heaviest {
        let need = STEP_FRAME_SHARE * total[&thread] as f64;
        let frames = &stacks[stack as usize].frames;
        // innermost first: the first frame on enough samples, never the heaviest stack's
        // innermost frame (that is where the time is, not the step holding it)
        let anchor = rootable(profile, stack, frames.len())
            .filter(|&pos| pos > 0)
            .find(|&pos| {
                on.get(&(thread, name_of[frames[pos] as usize]))
                    .is_some_and(|&n| n as f64 >= need)
            });
        if let Some(pos) = anchor {
            let frame = name_of[frames[pos] as usize];
            let callers = frames[pos + 1..]
                .iter()
                .map(|&f| name_of[f as usize])
                .filter(|&n| n != frame)
                .collect();
            out.insert(thread, StepRoot { frame, callers });
        }
    }
    out
}

/// A tree's thread and pass.
type Group = (u64, Option<Pass>);

/// A node's key: parent, function name id, op label.
type NodeKey = (u32, u32, Option<(String, OpKind)>);

/// A node while building: keyed children.
struct Raw {
    name: u32,
    label: Option<(String, OpKind)>,
    self_samples: u64,
    total: u64,
    children: Vec<u32>,
}

/// One group's tree: the stacks grown into keyed nodes, then bounded by
/// [`FlameOptions`] (small siblings merged into one [`OTHER`] child).
fn build(
    doc: &TraceDocument,
    profile: &OpProfile,
    roles: &[FrameRole],
    (names, name_of, outside): (&[String], &[u32], u32),
    ((thread, pass), anchor): (Group, Option<&StepRoot>),
    stacks: &[(u32, u64)],
    options: &FlameOptions,
) -> FlameTree {
    let (raw, samples) = grow(doc, profile, roles, (name_of, outside), anchor, stacks);
    let threshold = keep_threshold(&raw, samples, options);
    let root_name = pass.map_or("all", |p| p.as_str()).to_string();
    let (nodes, merged) = keep(&raw, names, threshold, root_name);
    FlameTree {
        thread,
        pass,
        samples,
        nodes,
        merged_nodes: merged,
        rooted_at: None,
    }
}

/// The stacks (id, weight) of one group as a tree of keyed nodes (node 0 the root), each
/// from the step frame `anchor`'s outermost occurrence when it has one, else under the
/// `outside` node less the step's callers; and their samples.
fn grow(
    doc: &TraceDocument,
    profile: &OpProfile,
    roles: &[FrameRole],
    (name_of, outside): (&[u32], u32),
    anchor: Option<&StepRoot>,
    stacks: &[(u32, u64)],
) -> (Vec<Raw>, u64) {
    let table = &doc.samples;
    let mut raw = vec![Raw {
        name: u32::MAX,
        label: None,
        self_samples: 0,
        total: 0,
        children: Vec::new(),
    }];
    let mut index: HashMap<NodeKey, u32> = HashMap::default();
    let mut samples = 0u64;
    for &(stack, w) in stacks {
        samples += w;
        raw[0].total += w;
        let class = &profile.stack_classes[stack as usize];
        let frames = &table.stacks[stack as usize].frames;
        let mut node = 0u32;
        // from the step frame's outermost occurrence; without it, under the outside node from
        // the innermost frame that is one of the step's callers (the frames above it cut)
        let anchor_pos = anchor.and_then(|a| {
            rootable(profile, stack, frames.len())
                .rev()
                .find(|&pos| name_of[frames[pos] as usize] == a.frame)
        });
        let top = match (anchor_pos, anchor) {
            (Some(pos), _) => pos + 1,
            (None, Some(a)) => {
                let key = (0, outside, None);
                node = match index.get(&key) {
                    Some(&n) => n,
                    None => {
                        let n = raw.len() as u32;
                        raw.push(Raw {
                            name: outside,
                            label: None,
                            self_samples: 0,
                            total: 0,
                            children: Vec::new(),
                        });
                        raw[0].children.push(n);
                        index.insert(key, n);
                        n
                    }
                };
                raw[node as usize].total += w;
                // from the innermost of the step's callers on it (the loop, where it is)
                frames
                    .iter()
                    .position(|&f| a.callers.contains(&name_of[f as usize]))
                    .map_or(frames.len(), |pos| pos + 1)
            }
            (None, None) => frames.len(),
        };
        for pos in (0..top.min(frames.len())).rev() {
            let f = frames[pos] as usize;
            // the step frame is one node: a sample in its own code (a non-op sample whose
            // frame it is) counts as its self time, without a label of its own
            let step_self = anchor_pos == Some(pos) && class.kind == OpKind::NonOp;
            let label = if class.op_frame == Some(pos) && !step_self {
                Some((class.op.clone(), class.kind))
            } else if let FrameRole::Op(op) = &roles[f] {
                Some((op.clone(), OpKind::Op))
            } else {
                None
            };
            let key = (node, name_of[f], label);
            let next = match index.get(&key) {
                Some(&n) => n,
                None => {
                    let n = raw.len() as u32;
                    raw.push(Raw {
                        name: name_of[f],
                        label: key.2.clone(),
                        self_samples: 0,
                        total: 0,
                        children: Vec::new(),
                    });
                    raw[node as usize].children.push(n);
                    index.insert(key, n);
                    n
                }
            };
            raw[next as usize].total += w;
            node = next;
        }
        raw[node as usize].self_samples += w;
    }
    (raw, samples)
}

/// The bound: a threshold on a node's total samples from the share, raised until at most
/// `max_nodes` nodes pass it (`u64::MAX`, none, when `max_nodes` is 0).
fn keep_threshold(raw: &[Raw], samples: u64, options: &FlameOptions) -> u64 {
    let mut threshold = ((options.min_share * samples as f64).ceil() as u64).max(1);
    let n_nodes = raw.len() - 1;
    if n_nodes > options.max_nodes && options.max_nodes > 0 {
        let mut totals: Vec<u64> = raw[1..].iter().map(|r| r.total).collect();
        let k = options.max_nodes - 1;
        totals.select_nth_unstable_by(k, |a, b| b.cmp(a));
        let v = totals[k];
        let at_least_v = raw[1..].iter().filter(|r| r.total >= v).count();
        let t = if at_least_v <= options.max_nodes {
            v
        } else {
            v + 1
        };
        threshold = threshold.max(t);
    }
    if options.max_nodes == 0 {
        threshold = u64::MAX;
    }
    threshold
}

/// The nodes at or over `threshold`, copied breadth first with small siblings merged into one
/// [`OTHER`] child; and how many nodes were merged away.
fn keep(raw: &[Raw], names: &[String], threshold: u64, root_name: String) -> (Vec<FlameNode>, u64) {
    // copy the kept nodes breadth first, small siblings merged into one OTHER child
    let mut nodes = vec![FlameNode {
        name: root_name,
        op: None,
        kind: None,
        self_samples: raw[0].self_samples,
        total_samples: raw[0].total,
        depth: 0,
        parent: None,
        children: Vec::new(),
    }];
    let mut merged = 0u64;
    let mut queue: std::collections::VecDeque<(u32, u32)> =
        std::collections::VecDeque::from([(0u32, 0u32)]);
    while let Some((r, out)) = queue.pop_front() {
        let mut kids: Vec<u32> = raw[r as usize].children.clone();
        kids.sort_by(|&a, &b| {
            let (a, b) = (&raw[a as usize], &raw[b as usize]);
            b.total
                .cmp(&a.total)
                .then_with(|| names[a.name as usize].cmp(&names[b.name as usize]))
                .then_with(|| a.label.cmp(&b.label))
        });
        let mut other = 0u64;
        let depth = nodes[out as usize].depth + 1;
        for k in kids {
            let kr = &raw[k as usize];
            if kr.total < threshold {
                other += kr.total;
                merged += 1 + subtree_size(raw, k);
                continue;
            }
            let i = nodes.len() as u32;
            nodes.push(FlameNode {
                name: names[kr.name as usize].clone(),
                op: kr.label.as_ref().map(|l| l.0.clone()),
                kind: kr.label.as_ref().map(|l| l.1),
                self_samples: kr.self_samples,
                total_samples: kr.total,
                depth,
                parent: Some(out),
                children: Vec::new(),
            });
            nodes[out as usize].children.push(i);
            queue.push_back((k, i));
        }
        if other > 0 {
            let i = nodes.len() as u32;
            nodes.push(FlameNode {
                name: OTHER.to_string(),
                op: None,
                kind: None,
                self_samples: other,
                total_samples: other,
                depth,
                parent: Some(out),
                children: Vec::new(),
            });
            nodes[out as usize].children.push(i);
        }
    }
    (nodes, merged)
}

/// Nodes below `r` (not counting it), by an explicit stack.
fn subtree_size(raw: &[Raw], r: u32) -> u64 {
    let mut n = 0u64;
    let mut stack: Vec<u32> = raw[r as usize].children.clone();
    while let Some(x) = stack.pop() {
        n += 1;
        stack.extend_from_slice(&raw[x as usize].children);
    }
    n
}
