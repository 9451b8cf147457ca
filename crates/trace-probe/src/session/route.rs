//! How a scheduled profiler's session reaches its capture sessions: the [`Router`] its state
//! carries (the schedule implements it), and [`InnerRef`], the state the capture path works on
//! ([`super::TraceSession::cur`]).

use std::sync::Arc;

use candle_core::{Tensor, Var};
use trace_wire::GradientContract;

use super::plugin::CapturePlugin;
use super::{Inner, StepGuard, TraceSummary};
use crate::error::ProbeError;

/// A scheduled profiler's route to its capture sessions (implemented by the schedule).
pub(crate) trait Router: Send + Sync + std::fmt::Debug {
    /// The open capture session's state, when one is open.
    fn current(&self) -> Option<Arc<Inner>>;
    /// Step `n` of the loop.
    fn step(&self, n: u64) -> StepGuard;
    /// Ends the run; the last capture's outcome.
    fn finish(&self) -> Result<TraceSummary, ProbeError>;
    /// The parameters a `ProbedOptimizer` announced.
    fn remember_parameters(&self, params: &[(String, Var)]);
    /// A gradient contract declared on the base session.
    fn remember_contract(&self, contract: &GradientContract);
    /// Weights declared on the base session.
    fn remember_declared(&self, named: &[(String, Tensor)]);
}

/// The state the capture path works on ([`TraceSession::cur`]): borrowed, or the open capture
/// session's, held.
pub(crate) enum InnerRef<'a> {
    Fixed(&'a Arc<Inner>),
    Routed(Arc<Inner>),
}

impl std::ops::Deref for InnerRef<'_> {
    type Target = Arc<Inner>;

    #[inline]
    fn deref(&self) -> &Arc<Inner> {
        match self {
            InnerRef::Fixed(a) => a,
            InnerRef::Routed(a) => a,
        }
    }
}

/// The plug-ins of [`TraceSession::cur`].
pub(crate) struct Plugins<'a>(pub(crate) InnerRef<'a>);

impl std::ops::Deref for Plugins<'_> {
    type Target = [Arc<dyn CapturePlugin>];

    fn deref(&self) -> &[Arc<dyn CapturePlugin>] {
        &self.0.plugins
    }
}
