//! What acting on a memory finding's advice would leave, computed by replaying the lifetimes
//! with the storages the advice frees released where the advice says
//! ([`trace_memory::replay_plans`]): the run's new peak, each pass's peak and where
//! the run's peak moves. `exact` says whether the trace shows that the advice frees exactly
//! those storages there; otherwise the figures are a bound (the best the advice can do).

use serde::Serialize;
use trace_format::bytes as human_bytes;
use trace_memory::{replay_plans, ReleasePlan, Replayed, ReplayedPassPeak};
use trace_schema::{Pass, TraceDocument};

/// The drop-the-loss snippet the `activations_retained_into_optimizer` advice prints, exactly as
/// a `ProbedOptimizer` / `Profiler` user writes it: `profiler.backward` keeps the backward pass
/// in the trace (a plain `loss.backward()` is invisible to the probe), and `logits` goes with
/// the loss (it holds most of the graph too). `examples/tests/snippet.rs` compiles and runs it
/// as printed and checks the what-if against that run.
pub const DROP_LOSS_SNIPPET: &str =
    "let grads = profiler.backward(&loss)?; drop((loss, logits)); opt.step(&grads)?;";

/// A saving on the run's peak below this share of it is small: the finding says so and ranks
/// lower.
pub const SMALL_SAVING_SHARE: f64 = 0.05;

/// The replayed outcome of one piece of advice.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WhatIf {
    /// What is replayed, in the advice's words (`drop the loss before the step`).
    pub action: String,
    /// The run's peak with the advice applied, bytes (all devices).
    pub run_peak_bytes: u64,
    /// When it is first reached, ns since session start.
    pub run_peak_ns: u64,
    /// The pass holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub run_peak_pass: Option<Pass>,
    /// Each pass's peak with the advice applied.
    pub pass_peaks: Vec<ReplayedPassPeak>,
    /// The trace shows that the advice frees exactly these storages at that point: the figures
    /// are what a run with the advice applied measures (to the byte, when nothing else
    /// changes). `false`: a bound — the advice frees at most these (the peak it leaves is at
    /// least `run_peak_bytes`).
    pub exact: bool,
    /// The run's peak as captured, bytes (the same replay without releases).
    pub baseline_run_peak_bytes: u64,
    /// The pass holding it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_run_peak_pass: Option<Pass>,
    /// Each pass's peak as captured.
    pub baseline_pass_peaks: Vec<ReplayedPassPeak>,
    /// Bytes the advice releases (live when released).
    pub released_bytes: u64,
}

impl WhatIf {
    /// The what-if of `r` (a plan's replay) against `baseline` (the replay with an empty plan).
    pub fn of(baseline: &Replayed, r: Replayed, action: impl Into<String>, exact: bool) -> Self {
        Self {
            action: action.into(),
            run_peak_bytes: r.run_peak_bytes,
            run_peak_ns: r.run_peak_ns,
            run_peak_pass: r.run_peak_pass,
            pass_peaks: r.pass_peaks,
            exact,
            baseline_run_peak_bytes: baseline.run_peak_bytes,
            baseline_run_peak_pass: baseline.run_peak_pass,
            baseline_pass_peaks: baseline.pass_peaks.clone(),
            released_bytes: r.released_bytes,
        }
    }

    /// How much lower the run's peak is, bytes.
    pub fn saving_bytes(&self) -> u64 {
        self.baseline_run_peak_bytes
            .saturating_sub(self.run_peak_bytes)
    }

    /// The saving as a share of the captured run peak, in [0, 1].
    pub fn saving_share(&self) -> f64 {
        if self.baseline_run_peak_bytes == 0 {
            0.0
        } else {
            self.saving_bytes() as f64 / self.baseline_run_peak_bytes as f64
        }
    }

    /// The saving on the run's peak is below [`SMALL_SAVING_SHARE`].
    pub fn is_small(&self) -> bool {
        self.saving_share() < SMALL_SAVING_SHARE
    }

    /// The pass whose peak the advice lowers most, with its captured and replayed peak.
    pub fn most_lowered_pass(&self) -> Option<(Pass, u64, u64)> {
        self.baseline_pass_peaks
            .iter()
            .filter_map(|b| {
                let after = self.pass_peaks.iter().find(|p| p.pass == b.pass)?;
                (after.live_bytes < b.live_bytes).then_some((
                    b.pass,
                    b.live_bytes,
                    after.live_bytes,
                ))
            })
            .max_by(|a, b| (a.1 - a.2).cmp(&(b.1 - b.2)).then(b.0.cmp(&a.0)))
    }

    /// `drop the loss before the step: the optimizer pass's peak 5.72 → 4.52 MiB; the run's
    /// peak 5.72 → 5.64 MiB (−1.4%), now in the backward pass` — with `at best` for a bound
    /// and `a small saving` below [`SMALL_SAVING_SHARE`]; `the run's peak stays 5.72 MiB` when the
    /// replay leaves it where it was.
    pub fn sentence(&self) -> String {
        let bound = if self.exact { "" } else { "at best " };
        let mut s = format!("{}: ", self.action);
        if let Some((pass, before, after)) = self.most_lowered_pass() {
            s.push_str(&format!(
                "the {} pass's peak {} → {bound}{}; ",
                pass.as_str(),
                human_bytes(before),
                human_bytes(after)
            ));
        }
        let pct = self.saving_share() * 100.0;
        if self.run_peak_bytes == self.baseline_run_peak_bytes {
            // no "(−0.0%)": the replay left the run's peak where it was
            s.push_str(&format!(
                "the run's peak stays {}",
                human_bytes(self.baseline_run_peak_bytes)
            ));
        } else {
            s.push_str(&format!(
                "the run's peak {} → {bound}{} (−{pct:.1}%)",
                human_bytes(self.baseline_run_peak_bytes),
                human_bytes(self.run_peak_bytes),
            ));
        }
        if self.run_peak_pass != self.baseline_run_peak_pass {
            if let Some(p) = self.run_peak_pass {
                s.push_str(&format!(", now in the {} pass", p.as_str()));
            }
        }
        if self.saving_bytes() == 0 {
            s.push_str(": it does not lower the run's peak");
        } else if self.is_small() {
            s.push_str(": a small saving on the run's peak");
        }
        if !self.exact {
            s.push_str(" (a bound: the trace does not show that the advice frees all of them)");
        }
        s
    }
}

/// The what-ifs the findings ask for, replayed once every finding is made: every plan and the
/// baseline (the replay without releases) in one pass over the memory events
/// ([`trace_memory::replay_plans`]), and only when a finding asks.
#[derive(Debug, Default)]
pub(crate) struct WhatIfs(Vec<Pending>);

/// One requested what-if.
#[derive(Debug)]
struct Pending {
    /// The finding it belongs to (index into the findings).
    finding: usize,
    plan: ReleasePlan,
    action: String,
    exact: bool,
    /// Its sentence ends the finding's summary (`. What-if, replayed: …`).
    in_summary: bool,
}

impl WhatIfs {
    /// Asks for the what-if of `plan` for finding `finding` (an index into the findings it
    /// will be applied to); with `in_summary` its sentence ends the finding's summary.
    pub fn request(
        &mut self,
        finding: usize,
        plan: ReleasePlan,
        action: impl Into<String>,
        exact: bool,
        in_summary: bool,
    ) {
        self.0.push(Pending {
            finding,
            plan,
            action: action.into(),
            exact,
            in_summary,
        });
    }

    /// Adds the requests of `other`, made for findings that now start at index `offset`.
    pub fn append(&mut self, other: WhatIfs, offset: usize) {
        self.0.extend(other.0.into_iter().map(|p| Pending {
            finding: p.finding + offset,
            ..p
        }));
    }

    /// Replays every requested plan with the baseline in one pass: each finding's index, its
    /// what-if, and whether the sentence ends its summary (`. What-if, replayed: …`).
    pub fn replay(self, doc: &TraceDocument) -> Vec<(usize, WhatIf, bool)> {
        if self.0.is_empty() {
            return Vec::new();
        }
        let baseline = ReleasePlan::new();
        let plans: Vec<&ReleasePlan> = std::iter::once(&baseline)
            .chain(self.0.iter().map(|p| &p.plan))
            .collect();
        let mut replayed = replay_plans(doc, &plans).into_iter();
        let Some(baseline) = replayed.next() else {
            return Vec::new();
        };
        self.0
            .into_iter()
            .zip(replayed)
            .map(|(p, r)| {
                let w = WhatIf::of(&baseline, r, p.action, p.exact);
                (p.finding, w, p.in_summary)
            })
            .collect()
    }
}

/// The what-if of the `activations_retained_into_optimizer` advice, from who holds the
/// retained activations ([`crate::retention`]), released at the optimizer's start
/// (`optimizer_start_ns`), where the advice frees them:
/// - the loss is live and freed apart from the gradients: dropping it before the step frees
///   the graph nodes freed with it — exact (those freed with the gradients stay: the gradient
///   store holds them);
/// - the loss is freed in one run of frees with the gradients, or the probe did not see it:
///   every retained storage freed in the trace — a bound (the gradient store may hold some);
/// - the loss was dropped and the gradient store holds them (advice: keep only the
///   parameters' gradients, detached, and drop the store before the step): the storages freed
///   with the gradients — a bound (the store's other gradients are not counted).
///
/// Returns the plan, the action and whether it is exact (replayed by [`WhatIfs`]); `None`
/// when nothing would be released.
pub(crate) fn retention_plan(
    r: &crate::retention::Retention,
    optimizer_start_ns: u64,
) -> Option<(ReleasePlan, &'static str, bool)> {
    use crate::retention::LossState;
    let with = r.with_gradients.members.iter();
    let apart = r.apart.members.iter();
    let (members, action, exact): (Vec<&crate::retention::Member>, &str, bool) = match r.loss {
        LossState::Live { .. } if !r.loss_freed_with_gradients => (
            apart.filter(|m| m.graph_node() && m.freed()).collect(),
            "drop the loss before the step",
            true,
        ),
        LossState::Live { .. } => (
            with.chain(apart).filter(|m| m.freed()).collect(),
            "drop the loss before the step",
            false,
        ),
        LossState::Unknown => (
            with.chain(apart).filter(|m| m.freed()).collect(),
            "drop the loss before the step",
            false,
        ),
        LossState::Dropped { .. } => (
            with.collect(),
            "keep only the parameters' gradients and drop the store before the step",
            false,
        ),
    };
    if members.is_empty() {
        return None;
    }
    let mut plan = ReleasePlan::new();
    for m in members {
        plan.release_at(m.index, optimizer_start_ns);
    }
    Some((plan, action, exact))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn peak(pass: Pass, live_bytes: u64) -> ReplayedPassPeak {
        ReplayedPassPeak {
            pass,
            live_bytes,
            timestamp_ns: 0,
        }
    }

    fn what_if(exact: bool, after: u64) -> WhatIf {
        WhatIf {
            action: "drop the loss before the step".into(),
            run_peak_bytes: after,
            run_peak_ns: 0,
            run_peak_pass: Some(Pass::Backward),
            pass_peaks: vec![peak(Pass::Backward, after), peak(Pass::Optimizer, 4 << 20)],
            exact,
            baseline_run_peak_bytes: 6 << 20,
            baseline_run_peak_pass: Some(Pass::Optimizer),
            baseline_pass_peaks: vec![peak(Pass::Backward, after), peak(Pass::Optimizer, 6 << 20)],
            released_bytes: 2 << 20,
        }
    }

    #[test]
    fn the_sentence_names_the_pass_the_run_and_the_move() {
        let w = what_if(true, 5 << 20);
        assert_eq!(
            w.sentence(),
            "drop the loss before the step: the optimizer pass's peak 6.00 MiB → 4.00 MiB; the run's peak 6.00 MiB → 5.00 MiB (−16.7%), now in the backward pass"
        );
        assert!(!w.is_small());
        assert_eq!(w.saving_bytes(), 1 << 20);
    }

    #[test]
    fn a_small_bound_says_so() {
        let w = what_if(false, (6 << 20) - (100 << 10));
        let s = w.sentence();
        assert!(w.is_small());
        assert!(s.contains("→ at best 5.90 MiB (−1.6%)"), "{s}");
        assert!(s.contains("a small saving"), "{s}");
        assert!(s.contains("(a bound:"), "{s}");
    }

    #[test]
    fn a_what_if_that_leaves_the_run_peak_says_it_stays_without_a_zero_percentage() {
        let mut w = what_if(false, 6 << 20);
        w.run_peak_pass = Some(Pass::Optimizer);
        let s = w.sentence();
        assert!(
            s.contains("the run's peak stays 6.00 MiB: it does not lower the run's peak"),
            "{s}"
        );
        assert!(!s.contains("0.0%"), "{s}");
    }
}
