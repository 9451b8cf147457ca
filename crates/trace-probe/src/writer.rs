//! The writer thread: owns the output, formats and writes the events the session queues, so
//! the training thread does no I/O and no formatting.
//!
//! # Off the hot path
//! [`WriterHandle::send`] appends the event to a shared queue: one uncontended lock and a push,
//! no system call. The thread is not woken per event or per span end: while events arrive it
//! wakes every [`WRITE_INTERVAL`] (or as soon as [`BATCH_EVENTS`] are queued), writes what is
//! queued and flushes the output if a span ended meanwhile; after an interval with nothing
//! queued it sleeps until the next event wakes it. Waking it per event (an `mpsc` send to a
//! sleeping receiver: a futex call, a contended channel lock and a context switch on the
//! training thread) cost ≈ 9% of a captured MLP step (`benches/ab_overhead.rs`). Events keep
//! their order (one queue, one lock); [`WriterHandle::flush_sync`] and
//! [`WriterHandle::finish`] wake the thread at once.
//!
//! Work can be queued too ([`WriterHandle::send_deferred`], or [`DeferredSender`] from another
//! thread): a closure the thread runs when it reaches it, writing the events it returns at that
//! place in the order. The storage capture hands its joined memory events over this way, so their
//! attribution to spans and their strings are built here, not on the training thread.
//!
//! The first I/O error is sticky: it is kept, later writes are skipped (the file stays a valid
//! prefix), and [`WriterHandle::finish`] returns it. The queue is unbounded and the thread
//! takes from it until `finish`, so sends from the training thread never fail or block.

use std::io::{self, BufWriter, Write};
use std::sync::mpsc::{self, SyncSender};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use trace_wire::{TraceEvent, TraceWriter};

use crate::error::ProbeError;

/// How long queued events wait at most before the thread writes them (and flushes, when a span
/// ended meanwhile): a killed process loses at most this much of the trace before its last
/// span end.
pub(crate) const WRITE_INTERVAL: Duration = Duration::from_millis(10);

/// Queued events that wake the thread before [`WRITE_INTERVAL`] passed (bounds the queue).
pub(crate) const BATCH_EVENTS: usize = 4096;

/// Work whose events are built on the writer thread, at its place in the queue: e.g. memory
/// events attributed to spans there instead of on the training thread
/// ([`WriterHandle::send_deferred`]).
pub(crate) type Deferred = Box<dyn FnOnce() -> Vec<TraceEvent> + Send>;

/// One queued item.
// Boxing the event would cost an allocation per event on the training thread; the queue held
// unboxed `TraceEvent`s before, so an item is no larger than they were.
#[allow(clippy::large_enum_variant)]
enum Item {
    /// An event, ready.
    Event(TraceEvent),
    /// Events the thread builds when it reaches this item.
    Deferred(Deferred),
}

/// What the training side left for the thread.
#[derive(Default)]
struct Queue {
    /// Events to write (or to build, then write), in order.
    events: Vec<Item>,
    /// Flush the output after writing `events` (a span ended).
    flush: bool,
    /// Flush, then acknowledge each.
    acks: Vec<SyncSender<()>>,
    /// Write everything queued, flush and stop.
    finish: bool,
    /// The thread sleeps without a deadline: the next request must wake it.
    idle: bool,
}

impl Queue {
    fn is_empty(&self) -> bool {
        self.events.is_empty() && !self.flush && self.acks.is_empty() && !self.finish
    }
}

/// State shared with the writer thread.
#[derive(Default)]
pub(crate) struct WriterShared {
    queue: Mutex<Queue>,
    wake: Condvar,
    /// The first I/O error.
    error: Mutex<Option<io::Error>>,
}

impl WriterShared {
    /// Queues `change` and wakes the thread when `urgent` or when it sleeps without a deadline.
    fn request(&self, change: impl FnOnce(&mut Queue) -> bool) {
        let mut queue = lock(&self.queue);
        let urgent = change(&mut queue);
        if urgent || queue.idle {
            queue.idle = false;
            drop(queue);
            self.wake.notify_one();
        }
    }

    fn push_deferred(&self, build: Deferred) {
        self.request(|q| {
            if q.events.capacity() == 0 {
                q.events.reserve(256);
            }
            q.events.push(Item::Deferred(build));
            q.events.len() >= BATCH_EVENTS
        });
    }
}

/// Queues deferred work into a session's writer from any thread (see
/// [`WriterHandle::send_deferred`]).
#[derive(Clone)]
pub(crate) struct DeferredSender {
    shared: Arc<WriterShared>,
}

impl DeferredSender {
    /// [`WriterHandle::send_deferred`] from another thread.
    pub(crate) fn send_deferred(&self, build: Deferred) {
        self.shared.push_deferred(build);
    }
}

/// The training side of the writer thread.
pub(crate) struct WriterHandle {
    join: Mutex<Option<JoinHandle<u64>>>,
    shared: Arc<WriterShared>,
}

impl std::fmt::Debug for WriterHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriterHandle").finish_non_exhaustive()
    }
}

impl WriterHandle {
    /// Spawns the writer thread over `out` (buffered internally).
    pub(crate) fn spawn<W: Write + Send + 'static>(out: W) -> Result<Self, ProbeError> {
        let shared = Arc::new(WriterShared::default());
        let thread_shared = Arc::clone(&shared);
        let join = std::thread::Builder::new()
            .name("trace-probe-writer".into())
            .spawn(move || {
                // The writer's own allocations stay out of the allocator capture's log.
                let _quiet = trace_alloc::IgnoreAllocs::new();
                run(BufWriter::with_capacity(64 * 1024, out), &thread_shared)
            })
            .map_err(ProbeError::WriterSpawn)?;
        Ok(Self {
            join: Mutex::new(Some(join)),
            shared,
        })
    }

    /// Queues `change` and wakes the thread when `urgent` or when it sleeps without a deadline.
    fn request(&self, change: impl FnOnce(&mut Queue) -> bool) {
        self.shared.request(change);
    }

    /// A handle that queues deferred work from another thread (the storage capture's drainer);
    /// what it queues after the writer stopped is never written.
    pub(crate) fn sender(&self) -> DeferredSender {
        DeferredSender {
            shared: Arc::clone(&self.shared),
        }
    }

    /// Queues an event (never blocks; no system call unless the thread must be woken).
    pub(crate) fn send(&self, event: TraceEvent) {
        self.request(|q| {
            if q.events.capacity() == 0 {
                q.events.reserve(256);
            }
            q.events.push(Item::Event(event));
            q.events.len() >= BATCH_EVENTS
        });
    }

    /// Queues work that builds events on the writer thread, written where they were queued
    /// (after everything sent before, before everything sent after). The training thread only
    /// pays the push; `build` runs on the writer thread (never when an I/O error already
    /// stopped the writing, nor after the terminal).
    pub(crate) fn send_deferred(&self, build: Deferred) {
        self.shared.push_deferred(build);
    }

    /// Asks for a flush after the events queued so far, within [`WRITE_INTERVAL`] (never
    /// blocks).
    pub(crate) fn flush_async(&self) {
        self.request(|q| {
            q.flush = true;
            false
        });
    }

    /// Blocks until everything queued before was written and flushed, or `timeout` passed.
    /// Returns whether the writer acknowledged.
    pub(crate) fn flush_sync(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        self.request(|q| {
            q.acks.push(ack_tx);
            true
        });
        ack_rx.recv_timeout(timeout).is_ok()
    }

    /// Whether an I/O error happened.
    pub(crate) fn has_error(&self) -> bool {
        lock(&self.shared.error).is_some()
    }

    /// Stops the thread after it wrote everything queued; returns the number of events written
    /// or the first I/O error.
    pub(crate) fn finish(&self) -> Result<u64, ProbeError> {
        let join = lock(&self.join).take();
        let written = match join {
            Some(handle) => {
                self.request(|q| {
                    q.finish = true;
                    true
                });
                handle.join().map_err(|_| ProbeError::WriterPanicked)?
            }
            None => return Err(ProbeError::AlreadyFinished),
        };
        match lock(&self.shared.error).take() {
            Some(err) => Err(ProbeError::Io(err)),
            None => Ok(written),
        }
    }
}

impl Drop for WriterHandle {
    /// A session dropped without `finish()`: let the thread write and flush what was queued
    /// (the trace then has no terminal and loads as truncated).
    fn drop(&mut self) {
        if let Some(handle) = lock(&self.join).take() {
            self.request(|q| {
                q.finish = true;
                true
            });
            let _ = handle.join();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// The thread: takes what is queued, writes it, flushes when asked, sleeps.
fn run<W: Write>(out: W, shared: &WriterShared) -> u64 {
    let mut writer = TraceWriter::new(out);
    let mut failed = false;
    let mut terminal_written = false;
    let record = |result: io::Result<()>, failed: &mut bool| {
        if let Err(err) = result {
            *failed = true;
            let mut slot = lock(&shared.error);
            if slot.is_none() {
                *slot = Some(err);
            }
        }
    };
    let mut queue = lock(&shared.queue);
    loop {
        let work = std::mem::take(&mut *queue);
        // `take` reset `idle` too: the thread is awake.
        drop(queue);
        let worked = !work.events.is_empty() || work.flush;
        'items: for item in work.events {
            // Nothing may follow the terminal: a late event (a guard dropped while a panic
            // unwinds, say) is dropped rather than making the trace unreadable.
            if failed || terminal_written {
                break;
            }
            let (single, built): ([TraceEvent; 1], Vec<TraceEvent>);
            let events: &[TraceEvent] = match item {
                Item::Event(event) => {
                    single = [event];
                    &single
                }
                Item::Deferred(build) => {
                    built = build();
                    &built
                }
            };
            for event in events {
                if failed || terminal_written {
                    break 'items;
                }
                terminal_written = matches!(event, TraceEvent::Terminal(_));
                let result = writer.write_event(event);
                record(result, &mut failed);
            }
        }
        let flush = work.flush || !work.acks.is_empty() || work.finish;
        if flush && !failed {
            let result = writer.flush();
            record(result, &mut failed);
        }
        for ack in work.acks {
            let _ = ack.send(());
        }
        if work.finish {
            break;
        }
        queue = lock(&shared.queue);
        if queue.is_empty() {
            if worked {
                // Events are arriving: collect more for one interval.
                queue = shared
                    .wake
                    .wait_timeout(queue, WRITE_INTERVAL)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            } else {
                // Nothing came in a whole interval: sleep until a request wakes the thread.
                queue.idle = true;
                while queue.is_empty() {
                    queue = shared.wake.wait(queue).unwrap_or_else(|e| e.into_inner());
                }
            }
        }
    }
    writer.events_written()
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_wire::{TerminalEvent, TerminalOutcome};

    struct FailAfter(usize);
    impl Write for FailAfter {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::other("disk full"));
            }
            self.0 -= 1;
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn terminal() -> TraceEvent {
        TraceEvent::Terminal(TerminalEvent {
            coverage_lost: Default::default(),
            outcome: TerminalOutcome::Complete,
            timestamp_ns: 1,
            reason: None,
            dropped_events: None,
        })
    }

    #[test]
    fn first_io_error_is_sticky_and_returned() {
        // BufWriter only writes through on flush: the first flush fails.
        let handle = WriterHandle::spawn(FailAfter(0)).unwrap();
        handle.send(terminal());
        assert!(handle.flush_sync(Duration::from_secs(5)));
        assert!(handle.has_error());
        match handle.finish() {
            Err(ProbeError::Io(err)) => assert_eq!(err.to_string(), "disk full"),
            other => panic!("expected the sticky I/O error, got {other:?}"),
        }
    }

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);
    impl Write for Shared {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            lock(&self.0).extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn dropping_the_handle_writes_what_was_queued() {
        let out = Shared::default();
        let handle = WriterHandle::spawn(out.clone()).unwrap();
        handle.send(terminal());
        drop(handle);
        let text = String::from_utf8(lock(&out.0).clone()).unwrap();
        assert_eq!(text.lines().count(), 1);
    }

    #[test]
    fn a_flush_request_is_honoured_without_waking_the_thread() {
        let out = Shared::default();
        let handle = WriterHandle::spawn(out.clone()).unwrap();
        handle.send(terminal());
        handle.flush_async();
        // Written within the interval; polled with a generous deadline (a loaded machine).
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        while lock(&out.0).is_empty() && std::time::Instant::now() < deadline {
            std::thread::sleep(WRITE_INTERVAL);
        }
        assert_eq!(
            String::from_utf8(lock(&out.0).clone())
                .unwrap()
                .lines()
                .count(),
            1
        );
        assert_eq!(handle.finish().unwrap(), 1);
    }

    fn span_end(id: &str) -> TraceEvent {
        TraceEvent::SpanEnd(trace_wire::SpanEndEvent {
            id: id.into(),
            duration_ns: 1,
            inferred: false,
            inferred_reason: None,
        })
    }

    #[test]
    fn deferred_events_are_built_on_the_writer_thread_in_queue_order() {
        let out = Shared::default();
        let handle = WriterHandle::spawn(out.clone()).unwrap();
        let caller = std::thread::current().id();
        let built_on = Arc::new(Mutex::new(None));
        let seen = Arc::clone(&built_on);
        handle.send(span_end("s2"));
        handle.send_deferred(Box::new(move || {
            *lock(&seen) = Some(std::thread::current().id());
            vec![span_end("s3"), span_end("s4")]
        }));
        // From another thread, as the drainer does.
        let sender = handle.sender();
        std::thread::spawn(move || sender.send_deferred(Box::new(|| vec![span_end("s5")])))
            .join()
            .unwrap();
        handle.send(terminal());
        handle.send_deferred(Box::new(|| vec![span_end("s6")]));
        assert_eq!(handle.finish().unwrap(), 5);
        let text = String::from_utf8(lock(&out.0).clone()).unwrap();
        let ids: Vec<&str> = text
            .lines()
            .filter_map(|l| l.split("\"id\":\"").nth(1))
            .filter_map(|rest| rest.split('"').next())
            .collect();
        assert_eq!(ids, ["s2", "s3", "s4", "s5"], "{text}");
        assert!(text.lines().last().unwrap().contains("terminal"), "{text}");
        let built_on = lock(&built_on).expect("the deferred work ran");
        assert_ne!(built_on, caller, "built on the writer thread");
    }

    #[test]
    fn nothing_is_written_after_the_terminal() {
        let handle = WriterHandle::spawn(io::sink()).unwrap();
        handle.send(terminal());
        handle.send(terminal());
        assert_eq!(handle.finish().unwrap(), 1);
        assert!(matches!(handle.finish(), Err(ProbeError::AlreadyFinished)));
    }
}
