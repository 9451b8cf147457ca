//! From raw address stacks to the trace's symbol table: each unique address resolved once (by
//! the resolver it is given), equal frames and equal stacks deduplicated, ids in order of first
//! sight, and the symbol quality judged from the frames.

use std::collections::HashMap;

use trace_schema::{FrameEvent, SampleEvent, StackEvent, SymbolQuality};

/// One frame an address resolved to (see `symbols`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub(crate) struct Resolved {
    /// Demangled name without the hash.
    pub(crate) function: Option<String>,
    /// Source file, as the line tables name it.
    pub(crate) file: Option<String>,
    /// 1-based line.
    pub(crate) line: Option<u32>,
    /// File name of the object (executable or shared library) holding the address.
    pub(crate) module: Option<String>,
}

/// What identifies a frame: its resolution, plus the address when nothing names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FrameKey {
    resolved: Resolved,
    address: Option<u64>,
}

/// The events of the symbol table and the samples, with the sampler's figures.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// Every frame, ids 0.. in order.
    pub(crate) frames: Vec<FrameEvent>,
    /// Every distinct stack, ids 0.. in order.
    pub(crate) stacks: Vec<StackEvent>,
    /// Every sample, by time (then thread).
    pub(crate) samples: Vec<SampleEvent>,
    /// How well addresses were named.
    pub(crate) symbols: Option<SymbolQuality>,
    /// Frames without a function name.
    pub(crate) unresolved_frames: u64,
    /// Samples whose stack was cut.
    pub(crate) truncated_stacks: u64,
    /// Unique addresses resolved.
    pub(crate) unique_addresses: u64,
}

/// Builds [`Built`] sample by sample.
pub(crate) struct Builder<R> {
    resolve: R,
    built: Built,
    frame_ids: HashMap<FrameKey, u32>,
    /// (address, exact) → its frames, innermost first.
    by_address: HashMap<(u64, bool), Box<[u32]>>,
    stack_ids: HashMap<Box<[u32]>, u32>,
    /// Raw address stack → stack id (equal raw stacks skip the expansion).
    by_addresses: HashMap<Box<[u64]>, u32>,
    named: u64,
    with_lines: u64,
}

impl<R: FnMut(u64, bool) -> Vec<Resolved>> Builder<R> {
    /// A builder resolving addresses with `resolve(address, exact)` (`exact`: an interrupted
    /// program counter; otherwise a return address).
    pub(crate) fn new(resolve: R) -> Self {
        Self {
            resolve,
            built: Built::default(),
            frame_ids: HashMap::new(),
            by_address: HashMap::new(),
            stack_ids: HashMap::new(),
            by_addresses: HashMap::new(),
            named: 0,
            with_lines: 0,
        }
    }

    fn frame_id(&mut self, key: FrameKey) -> u32 {
        if let Some(&id) = self.frame_ids.get(&key) {
            return id;
        }
        let id = u32::try_from(self.built.frames.len()).unwrap_or(u32::MAX);
        match (&key.resolved.function, key.resolved.line) {
            (Some(_), Some(_)) => {
                self.named += 1;
                self.with_lines += 1;
            }
            (Some(_), None) => self.named += 1,
            (None, _) => self.built.unresolved_frames += 1,
        }
        self.built.frames.push(FrameEvent {
            id,
            function: key.resolved.function.clone(),
            file: key.resolved.file.clone(),
            line: key.resolved.line,
            module: key.resolved.module.clone(),
            address: key.address.map(|a| format!("{a:#x}")),
        });
        self.frame_ids.insert(key, id);
        id
    }

    fn address_frames(&mut self, address: u64, exact: bool) -> Box<[u32]> {
        if let Some(ids) = self.by_address.get(&(address, exact)) {
            return ids.clone();
        }
        self.built.unique_addresses += 1;
        let resolved = (self.resolve)(address, exact);
        let ids: Box<[u32]> = resolved
            .into_iter()
            .map(|r| {
                let address = r.function.is_none().then_some(address);
                self.frame_id(FrameKey {
                    resolved: r,
                    address,
                })
            })
            .collect();
        self.by_address.insert((address, exact), ids.clone());
        ids
    }

    fn stack_id(&mut self, addresses: &[u64]) -> u32 {
        if let Some(&id) = self.by_addresses.get(addresses) {
            return id;
        }
        let mut frames = Vec::new();
        for (i, &a) in addresses.iter().enumerate() {
            frames.extend_from_slice(&self.address_frames(a, i == 0));
        }
        let frames = frames.into_boxed_slice();
        let id = match self.stack_ids.get(&frames) {
            Some(&id) => id,
            None => {
                let id = u32::try_from(self.built.stacks.len()).unwrap_or(u32::MAX);
                self.built.stacks.push(StackEvent {
                    id,
                    frames: frames.to_vec(),
                });
                self.stack_ids.insert(frames, id);
                id
            }
        };
        self.by_addresses.insert(addresses.into(), id);
        id
    }

    /// Adds one sample of `thread` at session time `timestamp_ns`: its raw stack (the
    /// interrupted program counter first, then return addresses), whether it was cut, and the
    /// wire id of the innermost span open then.
    pub(crate) fn add(
        &mut self,
        thread: u64,
        timestamp_ns: u64,
        addresses: &[u64],
        truncated: bool,
        span_id: Option<String>,
    ) {
        let stack_id = self.stack_id(addresses);
        if truncated {
            self.built.truncated_stacks += 1;
        }
        self.built.samples.push(SampleEvent {
            timestamp_ns,
            thread,
            stack_id,
            span_id,
        });
    }

    /// The events, samples in time order, and the symbol quality (`None` without frames).
    pub(crate) fn finish(mut self) -> Built {
        self.built
            .samples
            .sort_by_key(|s| (s.timestamp_ns, s.thread));
        self.built.symbols = match (self.named, self.with_lines) {
            (0, _) if self.built.frames.is_empty() => None,
            (0, _) => Some(SymbolQuality::None),
            // Most named frames carry lines: the build has line tables (frames of libraries
            // without them, such as libc's, do not change that).
            (named, lines) if lines.saturating_mul(2) >= named => Some(SymbolQuality::LineTables),
            _ => Some(SymbolQuality::NamesOnly),
        };
        self.built
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn named(f: &str, line: Option<u32>) -> Resolved {
        Resolved {
            function: Some(f.to_string()),
            file: line.map(|_| "src/x.rs".to_string()),
            line,
            module: Some("bin".to_string()),
        }
    }

    #[test]
    fn addresses_resolve_once_frames_and_stacks_dedupe_and_inlines_expand() {
        let mut calls = Vec::new();
        let mut b = Builder::new(|a: u64, exact: bool| {
            calls.push((a, exact));
            match a {
                // An inlined callee inside its caller, innermost first.
                10 => vec![named("inner", Some(3)), named("outer", Some(9))],
                20 => vec![named("main", Some(1))],
                _ => vec![Resolved::default()],
            }
        });
        b.add(1, 50, &[10, 20], false, Some("s2".into()));
        b.add(1, 40, &[10, 20], true, Some("s2".into()));
        b.add(2, 45, &[99, 20], false, None);
        let built = b.finish();
        b_calls_check(&calls);
        assert_eq!(built.unique_addresses, 3);
        let names: Vec<_> = built.frames.iter().map(|f| f.function.clone()).collect();
        assert_eq!(
            names,
            [
                Some("inner".into()),
                Some("outer".into()),
                Some("main".into()),
                None
            ]
        );
        assert_eq!(built.frames[3].address.as_deref(), Some("0x63"));
        assert_eq!(built.frames[0].address, None);
        assert_eq!(built.stacks.len(), 2);
        assert_eq!(built.stacks[0].frames, [0, 1, 2]);
        assert_eq!(built.stacks[1].frames, [3, 2]);
        let order: Vec<_> = built.samples.iter().map(|s| s.timestamp_ns).collect();
        assert_eq!(order, [40, 45, 50]);
        assert_eq!(built.truncated_stacks, 1);
        assert_eq!(built.unresolved_frames, 1);
        assert_eq!(built.symbols, Some(SymbolQuality::LineTables));
    }

    fn b_calls_check(calls: &[(u64, bool)]) {
        // The first address of a stack is the exact program counter; each key resolves once.
        assert_eq!(calls, [(10, true), (20, false), (99, true)]);
    }

    #[test]
    fn quality_follows_the_named_frames() {
        let mut b = Builder::new(|a: u64, _| vec![named(&format!("f{a}"), None)]);
        b.add(1, 1, &[1, 2, 3], false, None);
        assert_eq!(b.finish().symbols, Some(SymbolQuality::NamesOnly));
        let mut b = Builder::new(|_, _| vec![Resolved::default()]);
        b.add(1, 1, &[1], false, None);
        assert_eq!(b.finish().symbols, Some(SymbolQuality::None));
        let b = Builder::new(|_, _| vec![Resolved::default()]);
        assert_eq!(b.finish().symbols, None);
    }
}
