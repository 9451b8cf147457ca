//! Span alignment across runs: a span's key is its path of names from the root, each name with
//! its occurrence among same-named siblings (the second `linear` under `mlp` is `linear#2`),
//! siblings taken in the canonical order of [`SpanIndex`] (start time, then id). Span ids differ
//! from run to run and never take part.
//!
//! A measured root span is keyed by its role, not its name, so two runs whose entrypoints are
//! named differently still align below their measured regions (the key's display name lists
//! both names). Spans on a parent cycle get no key.
//!
//! Keys are shared by every run of both sides (one [`KeyTable`]), so "the same span" is one
//! integer. O(S) per run for S spans (hash lookups).

use std::sync::Arc;

use rustc_hash::FxHashMap;
use trace_memory::SpanIndex;
use trace_schema::TraceDocument;

/// Name under which measured root spans are keyed (cannot occur in a trace: it holds a NUL).
const MEASURED_ROLE: &str = "\u{0}measured";

/// One aligned span position.
#[derive(Debug, Clone)]
pub(crate) struct SpanKey {
    /// Parent key (`None` for roots).
    pub parent: Option<u32>,
    /// The name keyed on (the measured role for measured roots).
    pub name: Arc<str>,
    /// 1-based occurrence among same-named siblings.
    pub occurrence: u32,
    /// Names seen at this position, in first-seen order (several only for measured roots).
    pub display_names: Vec<Arc<str>>,
    /// Depth (roots: 0).
    pub depth: u32,
}

/// Every key of every run.
#[derive(Debug, Default)]
pub(crate) struct KeyTable {
    index: FxHashMap<(u32, Arc<str>, u32), u32>,
    /// Highest occurrence per (parent key, name).
    max_occurrence: FxHashMap<(u32, Arc<str>), u32>,
    /// One `Arc` per distinct name.
    names: rustc_hash::FxHashSet<Arc<str>>,
    /// Keys by id; a parent's id is below its children's.
    pub keys: Vec<SpanKey>,
}

const ROOT: u32 = u32::MAX;

impl KeyTable {
    /// Number of keys.
    pub fn len(&self) -> usize {
        self.keys.len()
    }

    /// Keys every span of `doc` (index like `doc.spans`; `None` for spans on a cycle).
    pub fn key_run(&mut self, doc: &TraceDocument, spans: &SpanIndex) -> Vec<Option<u32>> {
        let mut out: Vec<Option<u32>> = vec![None; doc.spans.len()];
        // occurrence counters per (parent span or ROOT, name)
        let mut seen: FxHashMap<(u32, &str), u32> = FxHashMap::default();
        for &s in &spans.preorder {
            let s = s as usize;
            let span = &doc.spans[s];
            let name = doc.str(span.name);
            let parent_span = spans.parent[s];
            let parent_key = match parent_span {
                Some(p) => match out[p as usize] {
                    Some(k) => k,
                    None => continue,
                },
                None => ROOT,
            };
            let measured_root = parent_span.is_none() && spans.measured == Some(s);
            let keyed: &str = if measured_root { MEASURED_ROLE } else { name };
            let counter = seen
                .entry((parent_span.unwrap_or(ROOT), keyed))
                .or_insert(0);
            *counter += 1;
            let occurrence = *counter;
            let key_name: Arc<str> = match self.names.get(keyed) {
                Some(n) => n.clone(),
                None => {
                    let n: Arc<str> = Arc::from(keyed);
                    self.names.insert(n.clone());
                    n
                }
            };
            let id = match self.index.get(&(parent_key, key_name.clone(), occurrence)) {
                Some(&id) => id,
                None => {
                    let id = self.keys.len() as u32;
                    self.index
                        .insert((parent_key, key_name.clone(), occurrence), id);
                    let depth = if parent_key == ROOT {
                        0
                    } else {
                        self.keys[parent_key as usize].depth + 1
                    };
                    self.keys.push(SpanKey {
                        parent: (parent_key != ROOT).then_some(parent_key),
                        name: key_name.clone(),
                        occurrence,
                        display_names: Vec::new(),
                        depth,
                    });
                    id
                }
            };
            let key = &mut self.keys[id as usize];
            if !key.display_names.iter().any(|n| &**n == name) {
                key.display_names.push(if measured_root {
                    Arc::from(name)
                } else {
                    key_name.clone()
                });
            }
            let max = self
                .max_occurrence
                .entry((parent_key, key_name))
                .or_insert(0);
            *max = (*max).max(occurrence);
            out[s] = Some(id);
        }
        out
    }

    /// The display path of every key: names joined by `/`, a repeated name with `#n` (its
    /// occurrence), a position named differently by the runs as `a|b`; deeper than 32 levels
    /// capped as [`SpanIndex::path`] (first 8 names, `…(N of M levels left out)…`, last 24), so
    /// the paths of all keys are linear in the keys. Raw trace text: escape before display.
    pub fn paths(&self) -> Vec<String> {
        use trace_memory::spans::{join_capped_path, PATH_HEAD_NAMES, PATH_TAIL_NAMES};
        let segments: Vec<String> = self
            .keys
            .iter()
            .map(|key| {
                let mut segment = key
                    .display_names
                    .iter()
                    .map(|n| &**n)
                    .collect::<Vec<_>>()
                    .join("|");
                let parent = key.parent.unwrap_or(ROOT);
                let repeated = self
                    .max_occurrence
                    .get(&(parent, key.name.clone()))
                    .is_some_and(|&m| m > 1);
                if repeated {
                    segment.push_str(&format!("#{}", key.occurrence));
                }
                segment
            })
            .collect();
        // Each key's ancestor at depth PATH_HEAD_NAMES - 1 (parents come before children).
        let mut anchor: Vec<u32> = (0..self.keys.len() as u32).collect();
        for (k, key) in self.keys.iter().enumerate() {
            if key.depth as usize >= PATH_HEAD_NAMES {
                if let Some(p) = key.parent {
                    anchor[k] = anchor[p as usize];
                }
            }
        }
        let cap = PATH_HEAD_NAMES + PATH_TAIL_NAMES;
        (0..self.keys.len())
            .map(|k| {
                let levels = self.keys[k].depth as usize + 1;
                let tail_len = if levels <= cap {
                    levels
                } else {
                    PATH_TAIL_NAMES
                };
                let mut tail: Vec<&str> = Vec::with_capacity(tail_len);
                let mut cur = Some(k as u32);
                while tail.len() < tail_len {
                    let Some(c) = cur else { break };
                    tail.push(&segments[c as usize]);
                    cur = self.keys[c as usize].parent;
                }
                tail.reverse();
                let mut head: Vec<&str> = Vec::new();
                if levels > cap {
                    let mut cur = Some(anchor[k]);
                    while let Some(c) = cur {
                        head.push(&segments[c as usize]);
                        cur = self.keys[c as usize].parent;
                    }
                    head.reverse();
                }
                join_capped_path(&head, &tail, levels)
            })
            .collect()
    }

    /// Depth of a key (roots: 0).
    pub fn depth(&self, key: u32) -> u32 {
        self.keys[key as usize].depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(lines: &[&str]) -> TraceDocument {
        let mut text = String::from(
            r#"{"kind":"meta","schema":"candle-graph/trace/11","run_id":"r","entrypoint":"e","phase":"train","timestamp":"t"}"#,
        );
        text.push('\n');
        for l in lines {
            text.push_str(l);
            text.push('\n');
        }
        trace_schema::load_str(&text).unwrap()
    }

    fn span(id: &str, parent: Option<&str>, name: &str, start: u64) -> String {
        let parent = parent.map_or(String::new(), |p| format!(r#","parent_id":"{p}""#));
        format!(
            r#"{{"kind":"span_start","id":"{id}"{parent},"name":"{name}","start_ns":{start},"span_kind":"function"{}}}"#,
            if parent.is_empty() {
                r#","measured":true"#
            } else {
                ""
            }
        )
    }

    #[test]
    fn repeated_siblings_align_by_occurrence_and_ids_do_not_matter() {
        let a = doc(&[
            &span("s1", None, "step", 0),
            &span("s2", Some("s1"), "linear", 1),
            &span("s3", Some("s1"), "linear", 2),
            &span("s4", Some("s3"), "matmul", 3),
        ]);
        let b = doc(&[
            &span("x9", None, "train", 0),
            &span("x2", Some("x9"), "linear", 5),
            &span("x1", Some("x9"), "linear", 1),
            &span("x3", Some("x9"), "linear", 7),
            &span("x4", Some("x2"), "matmul", 6),
        ]);
        let mut t = KeyTable::default();
        let ka = t.key_run(&a, &SpanIndex::build(&a));
        let kb = t.key_run(&b, &SpanIndex::build(&b));
        // b's x1 starts first: it is the first linear; x2 (with the matmul) the second
        assert_eq!(ka[0], kb[0]);
        assert_eq!(ka[1], kb[2]);
        assert_eq!(ka[2], kb[1]);
        assert_eq!(ka[3], kb[4]);
        assert_eq!(t.len(), 5);
        let paths = t.paths();
        assert_eq!(paths[ka[0].unwrap() as usize], "step|train");
        assert_eq!(paths[ka[3].unwrap() as usize], "step|train/linear#2/matmul");
        assert_eq!(paths[kb[3].unwrap() as usize], "step|train/linear#3");
        assert_eq!(t.depth(ka[3].unwrap()), 2);
    }
}
