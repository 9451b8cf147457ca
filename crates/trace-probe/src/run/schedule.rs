//! Captures on a schedule ([`ProfileRun::every`]): one step in `n` over a whole run, each
//! capture written as a verified bundle into a run directory kept bounded on disk.

use super::ProfileRun;

/// Outputs derived from each capture's trace for its bundle, beside `figures.json` (e.g.
/// `candle-graph`'s `summary.json` and `memory.json`, so that `verify --semantic` re-derives
/// them): see [`ProfileRun::bundle_outputs`].
#[derive(Clone)]
pub struct BundleOutputs(pub std::sync::Arc<trace_bundle::run::DeriveFn>);

impl std::fmt::Debug for BundleOutputs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("BundleOutputs(..)")
    }
}

/// Default number of most recent captures a run directory keeps ([`ProfileRun::keep_last`]).
pub const DEFAULT_KEEP_LAST: usize = 8;

/// When a scheduled run captures (see [`ProfileRun::every`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// Steps between two captures.
    pub every: u64,
    /// The first captured step (default `every`).
    pub first_step: u64,
    /// Captures before the schedule stops (PyTorch's `repeat`: 0 = until the run ends).
    pub repeat: u64,
    /// Most recent bundles kept on disk, beside the ones that mattered.
    pub keep_last: usize,
}

impl Schedule {
    /// The `i`-th captured step (zero-based), or `None` past `repeat` or `u64::MAX`.
    pub fn nth_step(&self, i: u64) -> Option<u64> {
        if self.repeat != 0 && i >= self.repeat {
            return None;
        }
        self.every
            .checked_mul(i)
            .and_then(|d| self.first_step.checked_add(d))
    }

    /// The first captured step at or after `step`, with its index, or `None` when the schedule
    /// has ended there.
    pub fn next_at_or_after(&self, step: u64) -> Option<(u64, u64)> {
        let i = if step <= self.first_step {
            0
        } else {
            (step - self.first_step).div_ceil(self.every.max(1))
        };
        self.nth_step(i).map(|s| (i, s))
    }
}

impl ProfileRun {
    /// Captures one step in `n` for the whole run instead of one chosen step (the step given to
    /// [`ProfileRun::training`] is replaced): steps `n`, `2n`, … (from [`ProfileRun::first_step`] on, at most [`ProfileRun::repeat`] captures).
    /// [`ProfileRun::start`] then takes a **run directory**: each capture is written as a
    /// verified bundle `step-<NNNNNN>/` (the manifest of `candle-graph bundle`: the trace, its
    /// `figures.json`, `bundle.json`), bundled on a thread of its own after the step, and
    /// `run.json` (`candle-graph/run/1`) lists every capture with its figures, what was kept
    /// and what was dropped and why. The directory stays bounded: the last
    /// [`ProfileRun::keep_last`] bundles and the ones that mattered (the highest peak, the
    /// slowest step, the first capture of a growth of live memory).
    ///
    /// Between captures a step costs what a session that is not capturing costs (one
    /// comparison in `step`, one atomic load per probed call; the allocator hook disarmed). A
    /// capture's session opens one step before it (so storages that step makes and the
    /// captured step uses are tracked) and its trace declares logical memory `partial`:
    /// storages allocated before that (optimizer state, tensors a loop keeps) are absent unless
    /// declared — the heap samples (`used_bytes`, with [`crate::Tracking::system_counting`])
    /// count them. A capture that fails is recorded in `run.json`, never returned to the loop;
    /// a killed process leaves every bundle published before valid.
    ///
    /// ```
    /// use trace_probe::ProfileRun;
    /// let run = ProfileRun::training("mlp::train_step", 1).every(200).keep_last(4);
    /// let s = run.schedule().unwrap();
    /// assert_eq!((s.every, s.first_step, s.keep_last), (200, 200, 4));
    /// assert_eq!(s.nth_step(2), Some(600));
    /// ```
    pub fn every(mut self, n: u64) -> Self {
        self.schedule = Some(Schedule {
            every: n,
            first_step: n,
            repeat: 0,
            keep_last: DEFAULT_KEEP_LAST,
        });
        self.retarget(n);
        self
    }

    /// The run's own capture step follows the schedule's first (the step given to
    /// [`ProfileRun::training`] is replaced).
    fn retarget(&mut self, first: u64) {
        self.capture_step = first.max(1);
        self.last_capture_step = self.capture_step;
        self.warmup_steps = self.capture_step - 1;
    }

    /// The first captured step of a schedule ([`ProfileRun::every`]); default `n`.
    pub fn first_step(mut self, step: u64) -> Self {
        if let Some(s) = &mut self.schedule {
            s.first_step = step;
            self.retarget(step);
        }
        self
    }

    /// How many captures the schedule makes before it stops (PyTorch's `repeat`; 0, the
    /// default: until the run ends) — the cap on captures.
    pub fn repeat(mut self, captures: u64) -> Self {
        if let Some(s) = &mut self.schedule {
            s.repeat = captures;
        }
        self
    }

    /// How many of the most recent bundles a scheduled run keeps (default
    /// [`DEFAULT_KEEP_LAST`]; at least 1), beside the ones that mattered.
    pub fn keep_last(mut self, bundles: usize) -> Self {
        if let Some(s) = &mut self.schedule {
            s.keep_last = bundles;
        }
        self
    }

    /// Adds outputs derived from each scheduled capture's trace (and its analysis) to its bundle,
    /// beside `figures.json`: what `candle-graph bundle` adds (`summary.json`, `memory.json`),
    /// for a bundle `verify --semantic` can re-derive. Runs on the bundler thread; paths must be
    /// safe relative paths (a bundle with an unsafe one fails and is recorded as failed).
    pub fn bundle_outputs(
        mut self,
        derive: impl Fn(
                &trace_bundle::run::LoadedTrace,
                &trace_bundle::run::Analysis,
            ) -> Vec<trace_bundle::DerivedFile>
            + Send
            + Sync
            + 'static,
    ) -> Self {
        self.bundle_outputs = Some(BundleOutputs(std::sync::Arc::new(derive)));
        self
    }

    /// The schedule, when [`ProfileRun::every`] set one.
    pub fn schedule(&self) -> Option<Schedule> {
        self.schedule
    }

    /// The problems of the schedule (empty without one).
    pub(crate) fn schedule_problems(&self) -> Vec<String> {
        let Some(s) = self.schedule else {
            return Vec::new();
        };
        let mut problems = Vec::new();
        if s.every == 0 {
            problems.push("every(0): a schedule captures one step in n, n ≥ 1".to_string());
        }
        if s.first_step == 0 {
            problems.push("first_step(0): steps are one-based".to_string());
        }
        // what the run log's reader refuses as no real figure
        let max = trace_bundle::run::MAX_RUN_FIGURE;
        for (what, n) in [("every", s.every), ("first_step", s.first_step)] {
            if n > max {
                problems.push(format!(
                    "{what}({n}): past 2^63 − 1, a step no run reaches (its run.json would be refused)"
                ));
            }
        }
        if s.keep_last == 0 {
            problems.push("keep_last(0): a run directory keeps at least its last bundle".into());
        }
        if self.is_multi_step() {
            problems.push("capture_steps and every cannot be combined".to_string());
        }
        problems
    }

    /// The run of the capture of `step` in a scheduled run: this run capturing `step` alone,
    /// its session opened one step before, no schedule of its own.
    pub(crate) fn scheduled_capture(&self, step: u64) -> Self {
        let mut run = self.clone();
        run.schedule = None;
        run.capture_step = step;
        run.last_capture_step = step;
        run.warmup_steps = step.saturating_sub(1);
        run.late_session = true;
        run.tracing = super::TracingMode::Manual;
        if let Some(s) = self.schedule {
            run.tags.insert(
                "schedule".into(),
                format!("every {} from step {}", s.every, s.first_step),
            );
        }
        run
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_schedule_names_its_steps() {
        let s = ProfileRun::training("e", 1)
            .every(3)
            .first_step(2)
            .repeat(3);
        let s = s.schedule().unwrap();
        assert_eq!(
            (0..4).map(|i| s.nth_step(i)).collect::<Vec<_>>(),
            [Some(2), Some(5), Some(8), None]
        );
        assert_eq!(s.next_at_or_after(1), Some((0, 2)));
        assert_eq!(s.next_at_or_after(3), Some((1, 5)));
        assert_eq!(s.next_at_or_after(5), Some((1, 5)));
        assert_eq!(s.next_at_or_after(9), None);
        let forever = ProfileRun::training("e", 1).every(u64::MAX / 2);
        assert_eq!(forever.schedule().unwrap().nth_step(3), None);
    }

    #[test]
    fn schedule_rules_are_checked() {
        assert!(ProfileRun::training("e", 1).every(2).problems().is_empty());
        let zero = ProfileRun::training("e", 1).every(0).problems();
        assert!(zero.iter().any(|p| p.starts_with("every(0)")), "{zero:?}");
        assert_eq!(
            ProfileRun::training("e", 1)
                .every(2)
                .keep_last(0)
                .first_step(0)
                .problems()
                .len(),
            2
        );
        let never = ProfileRun::training("e", 1).every(u64::MAX).problems();
        assert!(never
            .iter()
            .any(|p| p.starts_with("every(18446744073709551615): past 2^63 − 1")));
        let run = ProfileRun::training("e", 1).every(5).scheduled_capture(10);
        assert_eq!((run.capture_step(), run.warmup_steps()), (10, 9));
        assert!(run.schedule().is_none() && run.problems().is_empty());
    }
}
