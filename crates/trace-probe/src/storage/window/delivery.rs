//! Moving the hook's events along while the window is open: [`CaptureState::pump`] joins the
//! ring's records (the session's span ends, the background drainer), `spill` only moves them
//! out, and the drainer hands what waits for attribution to the session's sink.

use std::sync::atomic::Ordering;

use trace_alloc::ring;
use trace_alloc::IgnoreAllocs;

use super::drainer::{BACKLOG_WAITING, UNDELIVERED};
use super::state::{CaptureState, Sink};

impl CaptureState {
    /// Drains the ring and keeps the resulting events queued (deterministic mode writes them
    /// all at [`Self::end`], sorted by hook time, so no later registration can land before an
    /// event already written).
    pub fn pump_queued(&mut self) {
        let _quiet = IgnoreAllocs::new();
        self.pump();
    }

    /// Moves the ring's events into the backlog without joining them (the background
    /// drainer's fast path: it keeps up with the hook; the join runs at the next pump).
    pub(crate) fn spill(&mut self) {
        if self.window_start.is_some() {
            ring::drain_into(&mut self.backlog);
            if !self.backlog.is_empty() {
                BACKLOG_WAITING.store(true, Ordering::Relaxed);
            }
        }
    }

    /// Host-clock windows: from now on the drainer hands what it joined to `sink` (cleared when
    /// the window ends).
    pub(crate) fn set_sink(&mut self, sink: Sink) {
        self.sink = Some(sink);
    }

    /// Hands the pending events to the sink, if one is set (the drainer's path).
    pub(crate) fn deliver(&mut self) {
        UNDELIVERED.store(false, Ordering::Relaxed);
        if self.pending.is_empty() {
            return;
        }
        if let Some(sink) = self.sink.as_mut() {
            (sink.0)(std::mem::take(&mut self.pending));
        }
    }

    /// Marks events queued outside a pump (a registration) for the drainer's next delivery.
    pub(crate) fn mark_undelivered(&self) {
        if self.sink.is_some() && !self.pending.is_empty() {
            UNDELIVERED.store(true, Ordering::Relaxed);
        }
    }

    /// The background drainer's join: drains the ring into the join unless a backlog waits (a
    /// backlog means allocation outran the join; the session's next pump joins it, in order,
    /// so the drainer only keeps spilling meanwhile and the ring does not overflow).
    pub(crate) fn pump_unless_backlog(&mut self) {
        if self.backlog.is_empty() {
            self.pump();
            self.deliver();
        }
    }

    /// Drains the ring into the join (no attribution yet).
    pub(crate) fn pump(&mut self) {
        if self.window_start.is_none() {
            return;
        }
        let block_size = trace_alloc::layout::block_size();
        self.raw.clear();
        std::mem::swap(&mut self.raw, &mut self.backlog);
        BACKLOG_WAITING.store(false, Ordering::Relaxed);
        ring::drain_into(&mut self.raw);
        self.summary.raw_events += self.raw.len() as u64;
        let raw = std::mem::take(&mut self.raw);
        for ev in &raw {
            if let Some(freed) = self.joiner.feed(ev, block_size) {
                self.on_freed(freed, ev);
            }
        }
        self.raw = raw;
    }
}
