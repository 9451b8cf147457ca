//! From raw address stacks to the trace's symbol table: each unique address resolved once (by
//! the resolver it is given), equal frames and equal stacks deduplicated, ids in order of first
//! sight, and the symbol quality judged from the frames.

use std::collections::HashMap;

use trace_wire::{FrameEvent, StackEvent, SymbolQuality};

use crate::resolved::Resolved;

/// What identifies a frame: its resolution, plus the address when nothing names it.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct FrameKey {
    resolved: Resolved,
    address: Option<u64>,
}

/// The events of the symbol table, with its figures.
#[derive(Debug, Default)]
pub(crate) struct Built {
    /// Every frame, ids 0.. in order.
    pub(crate) frames: Vec<FrameEvent>,
    /// Every distinct stack, ids 0.. in order.
    pub(crate) stacks: Vec<StackEvent>,
    /// How well addresses were named (`None` without frames).
    pub(crate) symbols: Option<SymbolQuality>,
    /// Frames without a function name.
    pub(crate) unresolved_frames: u64,
    /// Unique addresses resolved.
    pub(crate) unique_addresses: u64,
}

/// The symbol table of a trace, built stack by stack from raw address stacks (the sampler's
/// samples and the allocation sites share it).
pub(crate) struct SymbolTable<R> {
    resolve: R,
    built: Built,
    frame_ids: HashMap<FrameKey, u32>,
    /// (address, exact) → its frames, innermost first.
    by_address: HashMap<(u64, bool), Box<[u32]>>,
    stack_ids: HashMap<Box<[u32]>, u32>,
    /// Raw address stack → stack id (equal raw stacks skip the expansion), for stacks whose
    /// first address is exact (`[0]`) or a return address (`[1]`).
    by_addresses: [HashMap<Box<[u64]>, u32>; 2],
    named: u64,
    with_lines: u64,
}

impl<R: FnMut(u64, bool) -> Vec<Resolved>> SymbolTable<R> {
    /// A table resolving addresses with `resolve(address, exact)` (`exact`: an interrupted
    /// program counter; otherwise a return address).
    pub(crate) fn new(resolve: R) -> Self {
        Self {
            resolve,
            built: Built::default(),
            frame_ids: HashMap::new(),
            by_address: HashMap::new(),
            stack_ids: HashMap::new(),
            by_addresses: [HashMap::new(), HashMap::new()],
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

    /// The stack id of a raw address stack, innermost first; `first_exact`: its first address
    /// is an interrupted program counter (a sample), otherwise every address is a return
    /// address (an allocation site). Equal frame sequences are one stack.
    pub(crate) fn stack_id(&mut self, addresses: &[u64], first_exact: bool) -> u32 {
        let which = usize::from(!first_exact);
        if let Some(&id) = self.by_addresses[which].get(addresses) {
            return id;
        }
        let mut frames = Vec::new();
        for (i, &a) in addresses.iter().enumerate() {
            frames.extend_from_slice(&self.address_frames(a, first_exact && i == 0));
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
        self.by_addresses[which].insert(addresses.into(), id);
        id
    }

    /// Unique addresses resolved so far.
    #[cfg_attr(not(stack_sampler), allow(dead_code))] // the sampler's figure
    pub(crate) fn unique_addresses(&self) -> u64 {
        self.built.unique_addresses
    }

    /// Whether no stack was added.
    pub(crate) fn is_empty(&self) -> bool {
        self.built.stacks.is_empty()
    }

    /// The frames and stacks, and the symbol quality (`None` without frames).
    pub(crate) fn finish(mut self) -> Built {
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
        let mut b = SymbolTable::new(|a: u64, exact: bool| {
            calls.push((a, exact));
            match a {
                // An inlined callee inside its caller, innermost first.
                10 => vec![named("inner", Some(3)), named("outer", Some(9))],
                20 => vec![named("main", Some(1))],
                _ => vec![Resolved::default()],
            }
        });
        assert_eq!(b.stack_id(&[10, 20], true), 0);
        assert_eq!(b.stack_id(&[10, 20], true), 0);
        assert_eq!(b.stack_id(&[99, 20], true), 1);
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
        assert_eq!(built.unresolved_frames, 1);
        assert_eq!(built.symbols, Some(SymbolQuality::LineTables));
    }

    fn b_calls_check(calls: &[(u64, bool)]) {
        // The first address of a stack is the exact program counter; each key resolves once.
        assert_eq!(calls, [(10, true), (20, false), (99, true)]);
    }

    #[test]
    fn quality_follows_the_named_frames() {
        let mut b = SymbolTable::new(|a: u64, _| vec![named(&format!("f{a}"), None)]);
        b.stack_id(&[1, 2, 3], true);
        assert_eq!(b.finish().symbols, Some(SymbolQuality::NamesOnly));
        let mut b = SymbolTable::new(|_, _| vec![Resolved::default()]);
        b.stack_id(&[1], true);
        assert_eq!(b.finish().symbols, Some(SymbolQuality::None));
        let b = SymbolTable::new(|_, _| vec![Resolved::default()]);
        assert_eq!(b.finish().symbols, None);
    }

    #[test]
    fn return_address_stacks_share_frames_with_samples_but_resolve_apart() {
        let mut calls = Vec::new();
        let mut b = SymbolTable::new(|a: u64, exact: bool| {
            calls.push((a, exact));
            vec![named(&format!("f{a}"), Some(1))]
        });
        let sample = b.stack_id(&[10, 20], true);
        let site = b.stack_id(&[10, 20], false);
        // Same names here, so the same frames and stack; but 10 was looked up both ways.
        assert_eq!(sample, site);
        let built = b.finish();
        assert_eq!(calls, [(10, true), (20, false), (10, false)]);
        assert_eq!(built.stacks.len(), 1);
        assert_eq!(built.unique_addresses, 3);
    }
}
