//! The flame graph data of the report: the sampled call stacks of a trace as one tree per pass
//! (forward, backward, optimizer, and the samples outside any pass), merged by function name,
//! root = the outermost frame.
//!
//! Bounded whatever the trace's size: a node holding less than
//! [`FlameOptions::min_share`] of its tree's samples is merged into one `… N smaller` node per
//! parent, and at most [`FlameOptions::max_nodes`] nodes are kept per tree (the largest; a
//! node's parent holds at least its samples, so the kept nodes stay a tree). Built with
//! explicit loops over the stacks (no recursion on stack depth); the page's script draws it the
//! same way.
//!
//! Names are the frames' function names (else the address, else `?`), escaped with
//! [`trace_format::escape`] and elided to [`NAME_CHARS`] characters.

use std::collections::HashMap;

use serde_json::{json, Value};
use trace_graph::Analysis;
use trace_schema::{Pass, SampleTable, TraceDocument};

/// Characters kept of a function name (elided in the middle beyond).
pub const NAME_CHARS: usize = 160;

/// Sizes of the flame graph data.
#[derive(Debug, Clone, Copy)]
pub struct FlameOptions {
    /// Nodes holding less than this share of their tree's samples are merged.
    pub min_share: f64,
    /// Nodes kept per tree (the largest).
    pub max_nodes: usize,
}

impl Default for FlameOptions {
    /// 0.1 %, 4000 nodes.
    fn default() -> Self {
        Self {
            min_share: 0.001,
            max_nodes: 4000,
        }
    }
}

/// One node of a [`FlameTree`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlameNode {
    /// Function name (escaped, elided), or `… N smaller` for merged nodes.
    pub name: String,
    /// Index of the parent in [`FlameTree::nodes`]; `None` for the root.
    pub parent: Option<u32>,
    /// Samples whose stack passes through this node (its subtree's samples).
    pub samples: u64,
    /// Samples whose innermost frame is this node.
    pub self_samples: u64,
    /// True for a node that stands for merged smaller siblings.
    pub merged: bool,
}

/// The sampled stacks of one pass as a tree, in pre-order (a parent before its children,
/// children by samples, largest first). Node 0 is the root (`all`), holding every sample.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlameTree {
    /// The pass, or `None` for samples outside any pass span.
    pub pass: Option<Pass>,
    /// The nodes, root first.
    pub nodes: Vec<FlameNode>,
    /// Nodes merged into `… N smaller` nodes or cut by [`FlameOptions::max_nodes`].
    pub merged_nodes: u64,
}

/// Label of a pass's tree.
pub fn pass_label(pass: Option<Pass>) -> &'static str {
    pass.map_or("outside passes", Pass::as_str)
}

fn frame_name(samples: &SampleTable, frame: u32) -> String {
    let f = &samples.frames[frame as usize];
    let raw = f
        .function
        .as_deref()
        .or(f.address.as_deref())
        .unwrap_or("?");
    trace_format::elide_middle(&trace_format::escape(raw), NAME_CHARS).into_owned()
}

/// The pass of each sample (from its span's ancestors), `None` outside passes.
pub fn sample_passes(doc: &TraceDocument, analysis: &Analysis) -> Vec<Option<Pass>> {
    doc.samples
        .samples
        .iter()
        .map(|s| {
            s.span
                .and_then(|sp| doc.span_index(sp))
                .and_then(|i| analysis.spans.pass.get(i).copied().flatten())
        })
        .collect()
}

/// One tree per pass that has samples, in the order forward, backward, optimizer, outside.
pub fn flame_trees(doc: &TraceDocument, analysis: &Analysis, opts: FlameOptions) -> Vec<FlameTree> {
    let passes = sample_passes(doc, analysis);
    let order = [
        Some(Pass::Forward),
        Some(Pass::Backward),
        Some(Pass::Optimizer),
        None,
    ];
    order
        .iter()
        .filter_map(|&p| {
            let picked: Vec<u32> = doc
                .samples
                .samples
                .iter()
                .zip(&passes)
                .filter(|(_, &q)| q == p)
                .map(|(s, _)| s.stack)
                .collect();
            (!picked.is_empty()).then(|| build_tree(&doc.samples, p, &picked, opts))
        })
        .collect()
}

/// The tree of the samples whose stacks are `stacks` (indices into `samples.stacks`).
pub fn build_tree(
    samples: &SampleTable,
    pass: Option<Pass>,
    stacks: &[u32],
    opts: FlameOptions,
) -> FlameTree {
    // Full tree keyed by (parent, name); names interned so each frame is named once.
    let mut names: Vec<String> = Vec::new();
    let mut name_of_frame: HashMap<u32, u32> = HashMap::new();
    let mut name_index: HashMap<String, u32> = HashMap::new();
    let mut intern = |frame: u32| -> u32 {
        if let Some(&n) = name_of_frame.get(&frame) {
            return n;
        }
        let name = frame_name(samples, frame);
        let n = *name_index.entry(name.clone()).or_insert_with(|| {
            names.push(name);
            (names.len() - 1) as u32
        });
        name_of_frame.insert(frame, n);
        n
    };
    // node: (name, parent, samples, self)
    let mut name: Vec<u32> = vec![u32::MAX];
    let mut parent: Vec<u32> = vec![u32::MAX];
    let mut total: Vec<u64> = vec![0];
    let mut own: Vec<u64> = vec![0];
    let mut depth: Vec<u32> = vec![0];
    let mut child: HashMap<(u32, u32), u32> = HashMap::new();
    for &st in stacks {
        let frames = samples
            .stacks
            .get(st as usize)
            .map_or(&[][..], |s| &s.frames[..]);
        let mut at = 0u32;
        total[0] += 1;
        for &f in frames.iter().rev() {
            let n = intern(f);
            let next = *child.entry((at, n)).or_insert_with(|| {
                name.push(n);
                parent.push(at);
                total.push(0);
                own.push(0);
                depth.push(depth[at as usize] + 1);
                (name.len() - 1) as u32
            });
            total[next as usize] += 1;
            at = next;
        }
        own[at as usize] += 1;
    }
    let all = total[0];
    let count = name.len();
    let mut children: Vec<Vec<u32>> = vec![Vec::new(); count];
    for i in 1..count {
        children[parent[i] as usize].push(i as u32);
    }
    // Which nodes are kept: large enough, and among the largest `max_nodes`. A parent holds at
    // least its children's samples and is less deep, so it comes first in this order and the
    // kept nodes stay a tree.
    let threshold = ((all as f64 * opts.min_share).ceil() as u64).max(1);
    let mut keep = vec![false; count];
    keep[0] = true;
    let mut candidates: Vec<u32> = (1..count as u32)
        .filter(|&i| total[i as usize] >= threshold)
        .collect();
    candidates.sort_by_key(|&i| (std::cmp::Reverse(total[i as usize]), depth[i as usize], i));
    for &i in candidates.iter().take(opts.max_nodes.saturating_sub(1)) {
        if keep[parent[i as usize] as usize] {
            keep[i as usize] = true;
        }
    }
    // Emit in pre-order (explicit stack), children largest first; per kept parent, its dropped
    // children become one merged node after its kept ones.
    enum Entry {
        Node(u32),
        Merged {
            parent: u32,
            count: usize,
            samples: u64,
        },
    }
    let mut nodes: Vec<FlameNode> = Vec::new();
    let mut new_index = vec![u32::MAX; count];
    let mut stack = vec![Entry::Node(0)];
    while let Some(e) = stack.pop() {
        let i = match e {
            Entry::Merged {
                parent,
                count,
                samples,
            } => {
                nodes.push(FlameNode {
                    name: format!("… {count} smaller"),
                    parent: Some(parent),
                    samples,
                    self_samples: 0,
                    merged: true,
                });
                continue;
            }
            Entry::Node(i) => i as usize,
        };
        let idx = nodes.len() as u32;
        new_index[i] = idx;
        nodes.push(FlameNode {
            name: if i == 0 {
                "all".to_string()
            } else {
                names[name[i] as usize].clone()
            },
            parent: (i != 0).then(|| new_index[parent[i] as usize]),
            samples: total[i],
            self_samples: own[i],
            merged: false,
        });
        let c = &mut children[i];
        c.sort_by(|&a, &b| {
            total[b as usize]
                .cmp(&total[a as usize])
                .then(names[name[a as usize] as usize].cmp(&names[name[b as usize] as usize]))
        });
        let (dropped_count, dropped_samples) = c
            .iter()
            .filter(|&&x| !keep[x as usize])
            .fold((0usize, 0u64), |(n, s), &x| (n + 1, s + total[x as usize]));
        if dropped_count > 0 {
            stack.push(Entry::Merged {
                parent: idx,
                count: dropped_count,
                samples: dropped_samples,
            });
        }
        stack.extend(
            c.iter()
                .rev()
                .filter(|&&x| keep[x as usize])
                .map(|&x| Entry::Node(x)),
        );
    }
    let merged_nodes = (count - keep.iter().filter(|&&k| k).count()) as u64;
    FlameTree {
        pass,
        nodes,
        merged_nodes,
    }
}

/// The flame graph data as JSON for the page: per tree its pass label, sample count and the
/// nodes as columns (`name` indices into `strings`, `parent` (-1 for the root), `value`
/// samples, `self` samples, `merged` flags).
pub fn flame_data(trees: &[FlameTree]) -> Value {
    let mut strings: Vec<&str> = Vec::new();
    let mut index: HashMap<&str, usize> = HashMap::new();
    let trees: Vec<Value> = trees
        .iter()
        .map(|t| {
            let name: Vec<usize> = t
                .nodes
                .iter()
                .map(|n| {
                    *index.entry(n.name.as_str()).or_insert_with(|| {
                        strings.push(n.name.as_str());
                        strings.len() - 1
                    })
                })
                .collect();
            json!({
                "pass": pass_label(t.pass),
                "samples": t.nodes.first().map_or(0, |n| n.samples),
                "merged_nodes": t.merged_nodes,
                "name": name,
                "parent": t.nodes.iter().map(|n| n.parent.map_or(-1, i64::from)).collect::<Vec<_>>(),
                "value": t.nodes.iter().map(|n| n.samples).collect::<Vec<_>>(),
                "self": t.nodes.iter().map(|n| n.self_samples).collect::<Vec<_>>(),
                "merged": t.nodes.iter().map(|n| u8::from(n.merged)).collect::<Vec<_>>(),
            })
        })
        .collect();
    json!({ "strings": strings, "trees": trees })
}
