//! Reading allocation sites back from a trace's lines (the loader of this branch does not read
//! `site` events yet): frames, stacks, sites, the `alloc_sites` account, and every memory alloc
//! with its site classified by `trace_ops::classify_stack`.

use std::collections::HashMap;

use trace_ops::{classify_stack, OpKind, StackClass};
use trace_schema::{AllocSitesEvent, FrameEvent, MemoryAction, MemoryEvent, TraceEvent};

/// The site-related content of a trace.
pub struct Sites {
    pub frames: HashMap<u32, FrameEvent>,
    pub stacks: HashMap<u32, Vec<u32>>,
    /// site id → stack id
    pub sites: HashMap<u32, u32>,
    pub account: Option<AllocSitesEvent>,
    pub memory: Vec<MemoryEvent>,
    /// Kinds in wire order (to check frames/stacks precede sites, sites precede the account).
    pub order: Vec<&'static str>,
}

/// Parses every line of the trace at `path`.
pub fn read(path: &std::path::Path) -> Sites {
    let text = std::fs::read_to_string(path).expect("trace");
    let mut s = Sites {
        frames: HashMap::new(),
        stacks: HashMap::new(),
        sites: HashMap::new(),
        account: None,
        memory: Vec::new(),
        order: Vec::new(),
    };
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let ev: TraceEvent = serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}"));
        s.order.push(ev.kind_name());
        match ev {
            TraceEvent::Frame(f) => {
                s.frames.insert(f.id, f);
            }
            TraceEvent::Stack(st) => {
                s.stacks.insert(st.id, st.frames);
            }
            TraceEvent::Site(site) => {
                assert!(
                    s.stacks.contains_key(&site.stack_id),
                    "site {} refers to stack {} not written before it",
                    site.id,
                    site.stack_id
                );
                assert!(s.sites.insert(site.id, site.stack_id).is_none(), "dup site");
            }
            TraceEvent::AllocSites(a) => {
                assert!(s.account.is_none(), "one alloc_sites account");
                assert!(a.validate().is_empty(), "{:?}", a.validate());
                s.account = Some(a);
            }
            TraceEvent::Memory(m) => s.memory.push(m),
            _ => {}
        }
    }
    s
}

impl Sites {
    /// The frames of site `id`, innermost first.
    pub fn frames_of(&self, id: u32) -> Vec<&FrameEvent> {
        let stack = self.sites[&id];
        self.stacks[&stack]
            .iter()
            .map(|f| &self.frames[f])
            .collect()
    }

    /// The classification of site `id`.
    pub fn class(&self, id: u32) -> StackClass {
        classify_stack(&self.frames_of(id))
    }

    /// Whether some frame of site `id` has a function containing `needle`.
    pub fn has_function(&self, id: u32, needle: &str) -> bool {
        self.frames_of(id)
            .iter()
            .any(|f| f.function.as_deref().is_some_and(|n| n.contains(needle)))
    }

    /// Allocs written in the window (not pre-existing).
    pub fn window_allocs(&self) -> impl Iterator<Item = &MemoryEvent> {
        self.memory
            .iter()
            .filter(|m| m.action == MemoryAction::Alloc && !m.pre_existing)
    }

    /// The op of each window alloc with a site: (op, kind, bytes, label).
    pub fn ops(&self) -> Vec<(String, OpKind, u64, Option<String>)> {
        self.window_allocs()
            .filter_map(|m| {
                let site = m.site?;
                let c = self.class(site);
                Some((c.op, c.kind, m.bytes.unwrap_or(0), m.label.clone()))
            })
            .collect()
    }

    /// Count of window allocs per op, for storages of at least `min_bytes`.
    pub fn op_counts(&self, min_bytes: u64) -> std::collections::BTreeMap<String, usize> {
        let mut out = std::collections::BTreeMap::new();
        for (op, _, bytes, _) in self.ops() {
            if bytes >= min_bytes {
                *out.entry(op).or_insert(0) += 1;
            }
        }
        out
    }

    /// Wire position of the first event of `kind` (None: absent).
    pub fn first(&self, kind: &str) -> Option<usize> {
        self.order.iter().position(|k| *k == kind)
    }

    /// Wire position of the last event of `kind`.
    pub fn last(&self, kind: &str) -> Option<usize> {
        self.order.iter().rposition(|k| *k == kind)
    }
}
