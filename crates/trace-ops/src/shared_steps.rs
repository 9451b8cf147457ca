//! The steps [`OpProfile`](crate::OpProfile) and [`SiteProfile`](crate::SiteProfile) share
//! when they read a trace: a stack's frames and roles side by side, the closed measured
//! region, each stack's model module, a row's module and its source, op ids by name and kind,
//! and sorting rows while remembering where each went.

use std::cmp::Ordering;

use rustc_hash::FxHashMap as HashMap;
use trace_memory::SpanIndex;
use trace_schema::{FrameEvent, SampleTable, TraceDocument};

use crate::classify::{classify_with_io, OpKind, StackClass};
use crate::modules::ModuleSource;
use crate::modules::Modules;
use crate::rules::{self, FrameRole};

/// Reusable buffers for one stack's frames and their roles (innermost first), so classifying
/// many stacks allocates once; whether a frame reads or opens files is asked once per frame
/// id, however many stacks hold it.
#[derive(Default)]
pub(crate) struct StackFrames<'d> {
    frames: Vec<&'d FrameEvent>,
    roles: Vec<FrameRole>,
    io: Vec<bool>,
    /// Per frame id: 0 not asked yet, 1 no file I/O, 2 file I/O ([`rules::is_file_io`]).
    io_memo: Vec<u8>,
}

impl<'d> StackFrames<'d> {
    /// The frames of `stack` (frame ids into `table.frames`) and each one's role from
    /// `role_of(frame id, frame)`, innermost first.
    pub(crate) fn fill(
        &mut self,
        table: &'d SampleTable,
        stack: &[u32],
        mut role_of: impl FnMut(u32, &FrameEvent) -> FrameRole,
    ) -> (&[&'d FrameEvent], &[FrameRole]) {
        self.frames.clear();
        self.roles.clear();
        self.io.clear();
        if self.io_memo.len() < table.frames.len() {
            self.io_memo.resize(table.frames.len(), 0);
        }
        for &f in stack {
            let frame = &table.frames[f as usize];
            self.frames.push(frame);
            self.roles.push(role_of(f, frame));
            let memo = &mut self.io_memo[f as usize];
            if *memo == 0 {
                *memo = 1 + u8::from(rules::is_file_io(frame));
            }
            self.io.push(*memo == 2);
        }
        (&self.frames, &self.roles)
    }

    /// The class of the stack last filled, from its frame `start` on (0: the whole stack).
    pub(crate) fn classify_from(&self, start: usize) -> StackClass {
        classify_with_io(
            &self.frames[start..],
            &self.roles[start..],
            Some(&self.io[start..]),
        )
    }
}

/// The measured region (start, end) in ns, when its span is closed.
pub(crate) fn closed_region(doc: &TraceDocument, spans: &SpanIndex) -> Option<(u64, u64)> {
    spans
        .measured_region(doc)
        .and_then(|(s, e)| e.map(|e| (s, e)))
}

/// Each class's stack module (the model `forward` frames), interned in `modules`.
pub(crate) fn stack_modules(modules: &mut Modules, classes: &[StackClass]) -> Vec<Option<u32>> {
    classes
        .iter()
        .map(|c| c.stack_module.as_deref().map(|m| modules.intern(m)))
        .collect()
}

/// A row's module and where it comes from: the span's module when there is one, else the
/// stack's, else none.
pub(crate) fn module_of(
    span_module: Option<u32>,
    stack_module: Option<u32>,
) -> (Option<u32>, Option<ModuleSource>) {
    match (span_module, stack_module) {
        (Some(m), _) => (Some(m), Some(ModuleSource::Span)),
        (None, Some(m)) => (Some(m), Some(ModuleSource::Stack)),
        (None, None) => (None, None),
    }
}

/// Each class's op id (its op's name and kind, numbered in order of first appearance), and
/// the (name, kind) of each id. Every probe class (the probe's own frames: `trace_probe`,
/// `trace_alloc`, `trace_sampler`) has the one name [`crate::PROBE_OP`]: the probe's cost is
/// one row per pass, not one per probe function.
pub(crate) fn op_ids(classes: &[StackClass]) -> (Vec<u32>, Vec<(String, OpKind)>) {
    let mut names: Vec<(String, OpKind)> = Vec::new();
    let mut index: HashMap<(&str, OpKind), u32> = HashMap::default();
    let ids = classes
        .iter()
        .map(|c| {
            let name = match c.kind {
                OpKind::Probe => crate::PROBE_OP,
                _ => c.op.as_str(),
            };
            *index.entry((name, c.kind)).or_insert_with(|| {
                names.push((name.to_string(), c.kind));
                (names.len() - 1) as u32
            })
        })
        .collect();
    (ids, names)
}

/// `rows` sorted by `cmp` (stable), and for each old index its new one.
pub(crate) fn sort_remembering<T>(
    rows: Vec<T>,
    mut cmp: impl FnMut(&T, &T) -> Ordering,
) -> (Vec<T>, Vec<u32>) {
    let mut order: Vec<u32> = (0..rows.len() as u32).collect();
    order.sort_by(|&a, &b| cmp(&rows[a as usize], &rows[b as usize]));
    let mut new_index = vec![0u32; rows.len()];
    for (new, &old) in order.iter().enumerate() {
        new_index[old as usize] = new as u32;
    }
    let mut slots: Vec<Option<T>> = rows.into_iter().map(Some).collect();
    let rows = order
        .iter()
        .map(|&o| slots[o as usize].take().expect("each row once"))
        .collect();
    (rows, new_index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class(op: &str, kind: OpKind) -> StackClass {
        StackClass {
            op: op.to_string(),
            kind,
            inner_op: None,
            stack_module: None,
            op_frame: Some(0),
            backward_line_unknown: false,
            file_io_frames: Vec::new(),
        }
    }

    #[test]
    fn the_probes_functions_share_one_op_id_named_probe() {
        let classes = [
            class("trace_probe::alloc::watch::insert", OpKind::Probe),
            class("matmul", OpKind::Op),
            class("trace_alloc::clock::process_ns", OpKind::Probe),
            class("trace_sampler::stacks::add", OpKind::Probe),
        ];
        let (ids, names) = op_ids(&classes);
        assert_eq!(ids, vec![0, 1, 0, 0]);
        assert_eq!(
            names,
            vec![
                (crate::PROBE_OP.to_string(), OpKind::Probe),
                ("matmul".to_string(), OpKind::Op)
            ]
        );
    }
}
