//! The backward-span state machine, free of Candle and of the session: fed the order in which
//! Candle's backprop reaches the module markers, it says which backward module span opens and
//! closes when, and records for each module call why its span is not exact.
//!
//! # Rules
//! - `Enter(c)` (c's output marker: the gradient of c's output is complete): close open spans
//!   until the innermost one is a forward ancestor of `c` (or none is open), then open `c`. If
//!   the innermost open span is not `c`'s nearest ancestor that has a span, `c` is misparented.
//! - `InputDone(c)` (one of c's input markers: that input's gradient is complete): when it was
//!   the last of c's marked inputs, close the spans opened inside `c`, then `c`.
//! - `End`: close every open span (the backward call returned, or the next pass began).
//!
//! A span closed while some of its marked inputs are still pending was closed early (another
//! module's backward began inside it: interleaved branches); a span closed before the backward
//! of one of its submodules began left that work outside it (a submodule whose input does not
//! come through the module's input, e.g. a learned offset added inside a block: Candle reaches
//! it after the block's input); a span that opened under a span other than its enclosing
//! module's is misparented; a span of a call without marked inputs (its input has no gradient, e.g. token
//! ids or the batch) has no closing marker: it ends with the next unrelated module's backward or
//! with `End`, and its end is unknown when `End` is not the backward call's return. Such spans
//! are written as inferred, with the reason. Backward ops between two markers that belong to no
//! marked module (e.g. an activation between two layers, a residual add) are charged to the span
//! open at the time: the innermost open module span, or the `backward` pass itself.

/// Facts about one module call that the rules need.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CallFacts {
    /// The enclosing module call in the forward pass (any, with or without a span).
    pub(crate) parent: Option<usize>,
    /// Whether the call gets a backward span (its output marker is reached).
    pub(crate) has_span: bool,
    /// Marked inputs whose gradient the backward reaches.
    pub(crate) inputs: u32,
}

/// What the machine asks the caller to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Open the backward span of this call (under the innermost open one).
    Open(usize),
    /// Close the backward span of this call (always the innermost open one).
    Close(usize),
}

/// An event of Candle's backward pass, in processing order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Event {
    /// The output marker of a call was reached.
    Enter(usize),
    /// An input marker of a call was reached.
    InputDone(usize),
    /// The backward pass ended.
    End,
}

/// Why a call's backward span is not exact (all zero / false: exact).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Faithfulness {
    /// Its span opened under a span other than its nearest forward ancestor's.
    pub(crate) misparented: bool,
    /// Its span closed before all of its marked inputs' gradients were complete.
    pub(crate) closed_early: bool,
    /// Its span closed before the backward span of one of its submodules opened.
    pub(crate) closed_before_submodule: bool,
    /// No marker ends its span (no marked input) and the end of the backward call was not seen.
    pub(crate) end_unknown: bool,
}

impl Faithfulness {
    /// Whether anything makes the span inexact.
    pub(crate) fn is_inferred(&self) -> bool {
        self.misparented || self.closed_early || self.closed_before_submodule || self.end_unknown
    }

    /// A sentence for the trace's `inferred_reason`, or `None` when exact.
    pub(crate) fn reason(&self) -> Option<String> {
        if !self.is_inferred() {
            return None;
        }
        let mut parts = Vec::new();
        if self.closed_early {
            parts.push(
                "it closed before its input gradients were complete (interleaved with another module's backward)"
                    .to_string(),
            );
        }
        if self.closed_before_submodule {
            parts.push(
                "it closed before the backward of one of its submodules began (Candle reached that submodule after this module's input)"
                    .to_string(),
            );
        }
        if self.misparented {
            parts.push("its enclosing module's backward span was not the open one".to_string());
        }
        if self.end_unknown {
            parts.push(
                "no marker ends it (its input has no gradient) and the backward call's end was not seen: it closes when the next pass begins"
                    .to_string(),
            );
        }
        Some(parts.join("; "))
    }
}

/// The state machine over one backward pass.
#[derive(Debug, Clone)]
pub(crate) struct Tracker {
    facts: Vec<CallFacts>,
    pending: Vec<u32>,
    stack: Vec<usize>,
    faith: Vec<Faithfulness>,
    /// Per call: descendants with a span whose backward has not begun yet.
    waiting_submodules: Vec<u32>,
    /// `End` means the backward call returned (exact end) rather than "the next pass began".
    end_is_exact: bool,
}

impl Tracker {
    /// A machine over calls `facts` (indexed by call number).
    pub(crate) fn new(facts: Vec<CallFacts>, end_is_exact: bool) -> Self {
        let n = facts.len();
        let mut t = Self {
            pending: facts.iter().map(|f| f.inputs).collect(),
            faith: vec![Faithfulness::default(); n],
            stack: Vec::new(),
            waiting_submodules: vec![0; n],
            facts,
            end_is_exact,
        };
        for c in 0..n {
            if t.facts[c].has_span {
                t.for_each_ancestor(c, |w, a| w[a] = w[a].saturating_add(1));
            }
        }
        t
    }

    /// Calls `f(waiting_submodules, a)` for every forward ancestor `a` of `c` (bounded: a
    /// parent chain from the forward pass has no cycle, and never loops on one).
    fn for_each_ancestor(&mut self, c: usize, mut f: impl FnMut(&mut [u32], usize)) {
        let mut cur = self.facts.get(c).and_then(|x| x.parent);
        let mut steps = 0;
        while let Some(p) = cur.filter(|&p| p < self.facts.len()) {
            f(&mut self.waiting_submodules, p);
            steps += 1;
            if steps > self.facts.len() {
                return;
            }
            cur = self.facts[p].parent;
        }
    }

    /// Says whether `End` is the backward call's return (exact) or a later point.
    pub(crate) fn set_end_exact(&mut self, exact: bool) {
        self.end_is_exact = exact;
    }

    /// What was found about call `c`.
    pub(crate) fn faithfulness(&self, c: usize) -> Faithfulness {
        self.faith.get(c).copied().unwrap_or_default()
    }

    fn is_ancestor(&self, a: usize, c: usize) -> bool {
        let mut cur = self.facts.get(c).and_then(|f| f.parent);
        let mut steps = 0;
        while let Some(p) = cur {
            if p == a {
                return true;
            }
            steps += 1;
            if steps > self.facts.len() {
                return false; // a cycle cannot come from the forward pass; never loop on one
            }
            cur = self.facts.get(p).and_then(|f| f.parent);
        }
        false
    }

    fn spanned_parent(&self, c: usize) -> Option<usize> {
        let mut cur = self.facts.get(c).and_then(|f| f.parent);
        let mut steps = 0;
        while let Some(p) = cur {
            if self.facts.get(p).is_some_and(|f| f.has_span) {
                return Some(p);
            }
            steps += 1;
            if steps > self.facts.len() {
                return None;
            }
            cur = self.facts.get(p).and_then(|f| f.parent);
        }
        None
    }

    fn close_top(&mut self, act: &mut dyn FnMut(Action)) {
        if let Some(top) = self.stack.pop() {
            if self.pending[top] > 0 {
                self.faith[top].closed_early = true;
            }
            if self.waiting_submodules[top] > 0 {
                self.faith[top].closed_before_submodule = true;
            }
            act(Action::Close(top));
        }
    }

    /// Feeds one event; `act` receives the span actions in order.
    pub(crate) fn feed(&mut self, event: Event, act: &mut dyn FnMut(Action)) {
        match event {
            Event::Enter(c) if c < self.facts.len() => {
                self.for_each_ancestor(c, |w, a| w[a] = w[a].saturating_sub(1));
                while let Some(&top) = self.stack.last() {
                    if self.is_ancestor(top, c) {
                        break;
                    }
                    self.close_top(act);
                }
                if self.stack.last().copied() != self.spanned_parent(c) {
                    self.faith[c].misparented = true;
                }
                self.stack.push(c);
                act(Action::Open(c));
            }
            Event::InputDone(c) if c < self.facts.len() => {
                self.pending[c] = self.pending[c].saturating_sub(1);
                if self.pending[c] == 0 && self.stack.contains(&c) {
                    while let Some(&top) = self.stack.last() {
                        self.close_top(act);
                        if top == c {
                            break;
                        }
                    }
                }
            }
            Event::End => {
                while let Some(&top) = self.stack.last() {
                    if !self.end_is_exact && self.facts[top].inputs == 0 {
                        self.faith[top].end_unknown = true;
                    }
                    self.close_top(act);
                }
            }
            Event::Enter(_) | Event::InputDone(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(facts: Vec<CallFacts>, events: &[Event]) -> (Vec<Action>, Tracker) {
        let mut t = Tracker::new(facts, true);
        let mut actions = Vec::new();
        for &e in events {
            t.feed(e, &mut |a| actions.push(a));
        }
        (actions, t)
    }

    fn call(parent: Option<usize>, inputs: u32) -> CallFacts {
        CallFacts {
            parent,
            has_span: true,
            inputs,
        }
    }

    #[test]
    fn a_sequential_chain_nests_exactly() {
        use Action::*;
        use Event::*;
        // mlp(0) ⊃ fc2(1), fc1(2): backward reaches fc2 first.
        let facts = vec![call(None, 1), call(Some(0), 1), call(Some(0), 1)];
        let (actions, t) = run(
            facts,
            &[
                Enter(0),
                Enter(1),
                InputDone(1),
                Enter(2),
                InputDone(2),
                InputDone(0),
                End,
            ],
        );
        assert_eq!(
            actions,
            vec![Open(0), Open(1), Close(1), Open(2), Close(2), Close(0)]
        );
        for c in 0..3 {
            assert!(!t.faithfulness(c).is_inferred(), "call {c}");
        }
    }

    #[test]
    fn interleaved_siblings_are_closed_early_and_counted() {
        use Action::*;
        use Event::*;
        // Siblings a(0) and b(1): b's backward begins before a's input is done.
        let facts = vec![call(None, 1), call(None, 1)];
        let (actions, t) = run(
            facts,
            &[Enter(0), Enter(1), InputDone(0), InputDone(1), End],
        );
        assert_eq!(actions, vec![Open(0), Close(0), Open(1), Close(1)]);
        let a = t.faithfulness(0);
        assert!(a.closed_early);
        assert!(a
            .reason()
            .unwrap()
            .contains("closed before its input gradients"));
        assert!(!t.faithfulness(1).is_inferred());
    }

    #[test]
    fn a_call_without_marked_input_ends_with_the_next_unrelated_module() {
        use Action::*;
        use Event::*;
        // embed(0) has no marked input; then an unrelated call(1) enters.
        let facts = vec![call(None, 0), call(None, 1)];
        let (actions, t) = run(facts.clone(), &[Enter(0), Enter(1), End]);
        assert_eq!(actions, vec![Open(0), Close(0), Open(1), Close(1)]);
        assert!(!t.faithfulness(0).is_inferred());
        // The backward call's end not seen: the last such span's end is unknown.
        let mut t = Tracker::new(facts, false);
        let mut actions = Vec::new();
        for e in [Enter(0), End] {
            t.feed(e, &mut |a| actions.push(a));
        }
        assert!(t.faithfulness(0).end_unknown);
        assert!(t
            .faithfulness(0)
            .reason()
            .unwrap()
            .contains("no marker ends it"));
    }

    #[test]
    fn an_enclosing_module_without_a_span_is_skipped_and_a_wrong_parent_is_flagged() {
        use Action::*;
        use Event::*;
        // block(0) has no span; its children attn(1), mlp(2); x(3) is unrelated and opened
        // before attn's span while still open.
        let facts = vec![
            CallFacts {
                parent: None,
                has_span: false,
                inputs: 0,
            },
            call(Some(0), 1),
            call(Some(0), 1),
            call(Some(1), 1),
        ];
        let (actions, t) = run(
            facts,
            &[
                Enter(2),
                InputDone(2),
                Enter(1),
                Enter(3),
                InputDone(3),
                InputDone(1),
                End,
            ],
        );
        assert_eq!(
            actions,
            vec![Open(2), Close(2), Open(1), Open(3), Close(3), Close(1)]
        );
        assert!(!t.faithfulness(1).is_inferred());
        assert!(!t.faithfulness(2).is_inferred());
        assert!(!t.faithfulness(3).is_inferred());
    }

    #[test]
    fn a_submodule_reached_after_its_module_closed_flags_both() {
        use Action::*;
        use Event::*;
        // offset(0) ⊃ proj(1), whose input is not offset's input (a learned term); fc1(2) comes
        // before offset in the forward pass and has no marked input. Candle reaches offset's
        // input before proj: offset closes with proj's backward still to come.
        let facts = vec![call(None, 1), call(Some(0), 1), call(None, 0)];
        let (actions, t) = run(
            facts,
            &[
                Enter(0),
                InputDone(0),
                Enter(2),
                Enter(1),
                InputDone(1),
                End,
            ],
        );
        assert_eq!(
            actions,
            vec![Open(0), Close(0), Open(2), Close(2), Open(1), Close(1)]
        );
        let offset = t.faithfulness(0);
        assert!(offset.closed_before_submodule && !offset.closed_early);
        assert!(offset.reason().unwrap().contains("submodules began"));
        assert!(t.faithfulness(1).misparented);
        assert!(!t.faithfulness(2).is_inferred());
    }

    #[test]
    fn unknown_calls_are_ignored() {
        let (actions, _) = run(vec![], &[Event::Enter(4), Event::InputDone(2), Event::End]);
        assert!(actions.is_empty());
    }
}
