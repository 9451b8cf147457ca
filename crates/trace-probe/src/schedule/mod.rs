//! Scheduled captures ([`crate::ProfileRun::every`]): the [`Route`] a scheduled profiler's
//! session carries. The profiler's own session (the *base*) never captures: its allocator hook
//! stays disarmed and every probed call costs one atomic load, as on any step that is not
//! captured. One step before each scheduled step the route opens a fresh capture session (its
//! trace in the run directory's `.captures/`), replays into it what the base was told (the
//! optimizer's parameters, the gradient contract, declared weights), and routes the base's
//! capture-path calls to it ([`crate::TraceSession`]'s `cur`); at the next step it finishes
//! that session (before any other opens: the storage capture is process-wide) and hands its
//! trace to the [`bundler`] thread.
//!
//! The base and every capture session share one `capturing` flag, so the hot checks
//! (`is_capturing`) read one atomic as before.

pub(crate) mod bundler;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use candle_core::{Tensor, Var};
use trace_wire::GradientContract;

use crate::error::ProbeError;
use crate::run::{ProfileRun, Schedule};
use crate::session::{Inner, Router, StepGuard, TraceSession, TraceSummary};
use crate::writer::lock;
use bundler::{Bundler, Job};

/// What the base session was told before a capture, replayed into each capture session.
#[derive(Default)]
struct Setup {
    parameters: Vec<Vec<(String, Var)>>,
    contract: Option<GradientContract>,
    declared: Vec<Vec<(String, Tensor)>>,
}

struct RouteState {
    /// The open capture session and its step.
    open: Option<(TraceSession, u64)>,
    setup: Setup,
    bundler: Option<Bundler>,
    /// Index of the next capture in the schedule.
    index: u64,
}

/// The route of a scheduled profiler (see the module docs).
pub(crate) struct Route {
    run: ProfileRun,
    schedule: Schedule,
    /// The capturing flag of the base and of every capture session.
    pub(crate) capturing: Arc<AtomicBool>,
    /// The next step to capture (`u64::MAX`: the schedule has ended).
    next: AtomicU64,
    /// A capture session is open (its session in `current`).
    has_current: AtomicBool,
    current: Mutex<Option<Arc<Inner>>>,
    state: Mutex<RouteState>,
}

impl std::fmt::Debug for Route {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Route")
            .field("schedule", &self.schedule)
            .field("next", &self.next.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl Route {
    /// The route of `run` (which has a schedule) writing into the run directory `bundler`
    /// owns.
    pub(crate) fn new(run: ProfileRun, schedule: Schedule, bundler: Bundler) -> Self {
        let first = schedule.nth_step(0).unwrap_or(u64::MAX);
        Self {
            run,
            schedule,
            capturing: Arc::new(AtomicBool::new(false)),
            next: AtomicU64::new(first),
            has_current: AtomicBool::new(false),
            current: Mutex::new(None),
            state: Mutex::new(RouteState {
                open: None,
                setup: Setup::default(),
                bundler: Some(bundler),
                index: 0,
            }),
        }
    }

    #[cold]
    fn step_near_capture(&self, n: u64) -> StepGuard {
        let mut st = lock(&self.state);
        // a capture that ended (or a step past it) goes to the bundler
        let ended = st
            .open
            .as_ref()
            .is_some_and(|(session, step)| n > *step || !session.inner.is_waiting());
        if ended {
            if let Some((session, step)) = st.open.take() {
                self.close_current();
                Self::hand_over(&mut st, session, step);
            }
        }
        if st.open.is_none() {
            self.open_next(&mut st, n);
        }
        match &st.open {
            Some((session, _)) => {
                let session = session.clone();
                drop(st);
                session.step(n)
            }
            None => StepGuard::inactive(),
        }
    }

    /// Opens the capture session of the next scheduled step when `n` is the step before it
    /// (or the step itself, or past it: a loop that skipped it captures `n`).
    fn open_next(&self, st: &mut RouteState, n: u64) {
        let next = self.next.load(Ordering::Relaxed);
        if next == u64::MAX || n.saturating_add(1) < next {
            return;
        }
        let step = if n < next { next } else { n };
        st.index += 1;
        let after = if self.schedule.repeat != 0 && st.index >= self.schedule.repeat {
            None
        } else {
            self.schedule
                .next_at_or_after(step.saturating_add(1))
                .map(|(_, s)| s)
        };
        self.next
            .store(after.unwrap_or(u64::MAX), Ordering::Relaxed);
        let Some(bundler) = &st.bundler else {
            return;
        };
        let path = bundler.staging_trace(step);
        let run = self.run.scheduled_capture(step);
        match TraceSession::create_routed(run, &path, Arc::clone(&self.capturing)) {
            Ok(session) => {
                replay(&st.setup, &session);
                *lock(&self.current) = Some(Arc::clone(&session.inner));
                self.has_current.store(true, Ordering::Release);
                st.open = Some((session, step));
            }
            Err(e) => bundler.send(Job::Failed {
                step,
                reason: format!("the capture session did not open: {e}"),
            }),
        }
    }

    fn close_current(&self) {
        self.has_current.store(false, Ordering::Release);
        *lock(&self.current) = None;
    }

    /// Finishes a capture session on this thread (before the next one opens: the storage
    /// capture is process-wide) and hands its trace to the bundler.
    fn hand_over(st: &mut RouteState, session: TraceSession, step: u64) {
        let outcome = session.finish();
        let finished = std::time::Instant::now();
        if let Some(bundler) = &st.bundler {
            bundler.send(Job::Bundle {
                step,
                outcome,
                finished,
            });
        }
    }
}

impl Router for Route {
    /// The open capture session's state, when one is open.
    #[inline]
    fn current(&self) -> Option<Arc<Inner>> {
        if !self.has_current.load(Ordering::Acquire) {
            return None;
        }
        lock(&self.current).clone()
    }

    /// Step `n` of the loop: an inactive guard far from a capture (two loads, one comparison);
    /// near one, the capture session's guard.
    #[inline]
    fn step(&self, n: u64) -> StepGuard {
        if !self.has_current.load(Ordering::Relaxed)
            && n.saturating_add(1) < self.next.load(Ordering::Relaxed)
        {
            return StepGuard::inactive();
        }
        self.step_near_capture(n)
    }

    /// Remembers the parameters a `ProbedOptimizer` announced (replayed into every capture).
    fn remember_parameters(&self, params: &[(String, Var)]) {
        lock(&self.state).setup.parameters.push(params.to_vec());
    }

    /// Remembers a gradient contract declared on the base.
    fn remember_contract(&self, contract: &GradientContract) {
        lock(&self.state).setup.contract = Some(contract.clone());
    }

    /// Remembers weights declared on the base.
    fn remember_declared(&self, named: &[(String, Tensor)]) {
        lock(&self.state).setup.declared.push(named.to_vec());
    }

    /// Ends the run: the open capture (finished as it stands) and the bundler, waited for.
    /// Returns the last capture's outcome.
    fn finish(&self) -> Result<TraceSummary, ProbeError> {
        let (bundler, open) = {
            let mut st = lock(&self.state);
            (st.bundler.take(), st.open.take())
        };
        self.close_current();
        self.next.store(u64::MAX, Ordering::Relaxed);
        let Some(bundler) = bundler else {
            return Err(ProbeError::AlreadyFinished);
        };
        if let Some((session, step)) = open {
            if session.inner.is_waiting() {
                // opened for a step the loop never reached: nothing to bundle
                let _ = session.finish();
                bundler.discard(step);
            } else {
                let outcome = session.finish();
                bundler.send(Job::Bundle {
                    step,
                    outcome,
                    finished: std::time::Instant::now(),
                });
            }
        }
        bundler.join().ok_or(ProbeError::CaptureStepNotReached {
            step: self.schedule.first_step,
        })?
    }
}

impl TraceSession {
    /// A scheduled profiler's base session: it never captures itself (its allocator hook stays
    /// disarmed); its route opens a capture session before each scheduled step, writing into
    /// the run directory `dir`.
    pub(crate) fn scheduled(run: ProfileRun, dir: &std::path::Path) -> Result<Self, ProbeError> {
        let problems = run.problems();
        if !problems.is_empty() {
            return Err(ProbeError::InvalidRun { problems });
        }
        let Some(schedule) = run.schedule else {
            return Err(ProbeError::InvalidRun {
                problems: vec!["no schedule (ProfileRun::every)".into()],
            });
        };
        let bundler = Bundler::start(dir, &run.entrypoint, schedule, run.bundle_outputs.clone())?;
        let route = Arc::new(Route::new(run.clone(), schedule, bundler));
        let capturing = Arc::clone(&route.capturing);
        let base = run.track_pre_existing(false);
        Self::new_with(base, std::io::sink(), capturing, Some(route))
    }
}

/// Replays the base's setup into a new capture session.
fn replay(setup: &Setup, session: &TraceSession) {
    for params in &setup.parameters {
        for plugin in session.plugins().iter() {
            plugin.on_parameters(params);
        }
    }
    if let Some(c) = &setup.contract {
        let _ = session.declare_gradient_contract(c.clone());
    }
    for named in &setup.declared {
        for plugin in session.plugins().iter() {
            plugin.on_declared_parameters(named);
        }
    }
}
