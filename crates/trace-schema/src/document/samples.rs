//! The sampled call stacks of a loaded trace (trace/12): [`SampleTable`], filled by the
//! builder from `frame`, `stack`, `sample` and `sampler` events in file order.
//!
//! Ids are checked as they arrive: a stack naming a frame not yet defined, a sample naming a
//! stack not yet defined, a repeated id or a second `sampler` is a
//! [`super::SemanticCode::InvalidSamples`] issue and the offending record is dropped (the rest
//! stays usable), so every [`SampleRecord::stack`] and every frame index of a kept stack
//! resolves.

use rustc_hash::FxHashMap as HashMap;

use crate::intern::Sym;
use crate::sampling::{FrameEvent, SampleEvent, SamplerEvent, StackEvent};

/// One sample, compact: the stack is an index into [`SampleTable::stacks`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SampleRecord {
    /// When it was taken, ns since session start.
    pub timestamp_ns: u64,
    /// The sampled thread's key.
    pub thread: u64,
    /// Index into [`SampleTable::stacks`].
    pub stack: u32,
    /// Innermost open span on that thread then, if any.
    pub span: Option<Sym>,
}

/// One stack, compact: frame indices into [`SampleTable::frames`], innermost first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StackRecord {
    /// The stack's wire id.
    pub id: u32,
    /// Indices into [`SampleTable::frames`], innermost first.
    pub frames: Box<[u32]>,
}

/// The sampled stacks of a trace. Empty for traces before trace/12 and for traces without
/// samples.
#[derive(Debug, Clone, Default)]
pub struct SampleTable {
    /// The symbol table, in file order.
    pub frames: Vec<FrameEvent>,
    /// The distinct stacks, in file order.
    pub stacks: Vec<StackRecord>,
    /// The samples, in file order.
    pub samples: Vec<SampleRecord>,
    /// The sampler's account (the first one, if several).
    pub sampler: Option<SamplerEvent>,
    /// The 1-based lines of the `sample` events that were dropped (they named a stack no
    /// earlier `stack` defines, or one that was rejected), in file order: the estimates rest on
    /// the kept samples and say how many were dropped (issue 46).
    pub dropped_sample_lines: Vec<u64>,
    frame_index: HashMap<u32, u32>,
    stack_index: HashMap<u32, u32>,
}

impl SampleTable {
    /// True when the trace has no frame, stack, sample or sampler event.
    pub fn is_empty(&self) -> bool {
        self.frames.is_empty()
            && self.stacks.is_empty()
            && self.samples.is_empty()
            && self.sampler.is_none()
            && self.dropped_sample_lines.is_empty()
    }

    /// The frames of a stack, innermost first.
    pub fn stack_frames(&self, stack: u32) -> impl Iterator<Item = &FrameEvent> + '_ {
        self.stacks
            .get(stack as usize)
            .map_or(&[][..], |s| &s.frames[..])
            .iter()
            .map(move |&f| &self.frames[f as usize])
    }

    /// The index in [`Self::stacks`] of the stack with wire id `id`, if one was kept.
    pub fn stack_position(&self, id: u32) -> Option<u32> {
        self.stack_index.get(&id).copied()
    }

    /// Adds a frame; `Err` with the problem when its id repeats.
    pub(crate) fn push_frame(&mut self, frame: FrameEvent) -> Result<(), String> {
        if self.frame_index.contains_key(&frame.id) {
            return Err(format!("frame id {} repeats (the first is kept)", frame.id));
        }
        let index = u32::try_from(self.frames.len()).map_err(|_| "too many frames".to_string())?;
        self.frame_index.insert(frame.id, index);
        self.frames.push(frame);
        Ok(())
    }

    /// Adds a stack; `Err` when its id repeats or it names an undefined frame.
    pub(crate) fn push_stack(&mut self, stack: StackEvent) -> Result<(), String> {
        if self.stack_index.contains_key(&stack.id) {
            return Err(format!("stack id {} repeats (the first is kept)", stack.id));
        }
        let mut frames = Vec::with_capacity(stack.frames.len());
        for id in &stack.frames {
            match self.frame_index.get(id) {
                Some(&i) => frames.push(i),
                None => {
                    return Err(format!(
                        "stack {} names frame {id}, which no earlier `frame` defines",
                        stack.id
                    ))
                }
            }
        }
        let index = u32::try_from(self.stacks.len()).map_err(|_| "too many stacks".to_string())?;
        self.stack_index.insert(stack.id, index);
        self.stacks.push(StackRecord {
            id: stack.id,
            frames: frames.into_boxed_slice(),
        });
        Ok(())
    }

    /// Adds a sample (its span already interned); `Err` when it names an undefined stack.
    pub(crate) fn push_sample(
        &mut self,
        sample: &SampleEvent,
        span: Option<Sym>,
    ) -> Result<(), String> {
        let Some(&stack) = self.stack_index.get(&sample.stack_id) else {
            return Err(format!(
                "sample at {} ns names stack {}, which no earlier `stack` defines (or one that was rejected)",
                sample.timestamp_ns, sample.stack_id
            ));
        };
        self.samples.push(SampleRecord {
            timestamp_ns: sample.timestamp_ns,
            thread: sample.thread,
            stack,
            span,
        });
        Ok(())
    }

    /// Sets the sampler's account; `Err` when one was already read.
    pub(crate) fn set_sampler(&mut self, sampler: SamplerEvent) -> Result<(), String> {
        if self.sampler.is_some() {
            return Err("a second `sampler` event (the first is kept)".to_string());
        }
        self.sampler = Some(sampler);
        Ok(())
    }

    /// The cross-check of the samples against the sampler's account, once the trace is read:
    /// every sample's thread is listed and each listed thread has exactly the samples it
    /// claims. Returns the problems (empty when they agree, or when there is no account).
    pub(crate) fn check_against_sampler(&self) -> Vec<String> {
        let Some(sampler) = &self.sampler else {
            return Vec::new();
        };
        let mut counts: HashMap<u64, u64> = HashMap::default();
        for s in &self.samples {
            *counts.entry(s.thread).or_default() += 1;
        }
        let mut problems = Vec::new();
        for t in &sampler.threads {
            let found = counts.remove(&t.thread).unwrap_or(0);
            if found != t.samples {
                problems.push(format!(
                    "the sampler counts {} samples on thread {}, the trace holds {found}",
                    t.samples, t.thread
                ));
            }
        }
        let mut unlisted: Vec<_> = counts.into_iter().collect();
        unlisted.sort_unstable();
        for (thread, n) in unlisted {
            problems.push(format!(
                "{n} samples on thread {thread}, which the sampler does not list"
            ));
        }
        problems
    }

    /// Releases growth slack.
    pub(crate) fn shrink_to_fit(&mut self) {
        self.frames.shrink_to_fit();
        self.stacks.shrink_to_fit();
        self.samples.shrink_to_fit();
    }
}

/// A frame's `function`, `file`, `module` or `address` that is empty or only whitespace names
/// nothing: it is read as absent, so the frame falls back to what else names it (its address,
/// else `(unsymbolised)`) rather than showing a blank name (issue 46).
pub(crate) fn blank_is_unnamed(frame: &mut FrameEvent) {
    for field in [
        &mut frame.function,
        &mut frame.file,
        &mut frame.module,
        &mut frame.address,
    ] {
        if field.as_deref().is_some_and(|s| s.trim().is_empty()) {
            *field = None;
        }
    }
}
