//! The writer thread: owns the output, formats and writes events it receives over a channel, so
//! the training thread does no I/O.
//!
//! The first I/O error is sticky: it is kept, later writes are skipped (the file stays a valid
//! prefix), and [`WriterHandle::finish`] returns it. The thread never stops receiving before
//! `Finish`, so sends from the training thread never fail or block (the channel is unbounded).

use std::io::{self, BufWriter, Write};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use trace_schema::{TraceEvent, TraceWriter};

use crate::error::ProbeError;

/// A message to the writer thread.
pub(crate) enum Msg {
    /// Write one event.
    Event(Box<TraceEvent>),
    /// Flush the output (sent after every span end).
    Flush,
    /// Flush, then acknowledge.
    FlushAck(SyncSender<()>),
    /// Flush and stop.
    Finish,
}

/// Counters shared with the writer thread.
#[derive(Debug, Default)]
pub(crate) struct WriterShared {
    /// The first I/O error.
    error: Mutex<Option<io::Error>>,
}

/// The training side of the writer thread.
pub(crate) struct WriterHandle {
    tx: Sender<Msg>,
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
        let (tx, rx) = mpsc::channel();
        let shared = Arc::new(WriterShared::default());
        let thread_shared = Arc::clone(&shared);
        let join = std::thread::Builder::new()
            .name("trace-probe-writer".into())
            .spawn(move || {
                // The writer's own allocations stay out of the allocator capture's log.
                let _quiet = crate::alloc::IgnoreAllocs::new();
                run(rx, BufWriter::with_capacity(64 * 1024, out), &thread_shared)
            })
            .map_err(ProbeError::WriterSpawn)?;
        Ok(Self {
            tx,
            join: Mutex::new(Some(join)),
            shared,
        })
    }

    /// Queues an event (never blocks).
    pub(crate) fn send(&self, event: TraceEvent) {
        // A send fails only after the thread stopped (after `finish`): nothing to write then.
        let _ = self.tx.send(Msg::Event(Box::new(event)));
    }

    /// Queues a flush (never blocks).
    pub(crate) fn flush_async(&self) {
        let _ = self.tx.send(Msg::Flush);
    }

    /// Blocks until everything queued before was written and flushed, or `timeout` passed.
    /// Returns whether the writer acknowledged.
    pub(crate) fn flush_sync(&self, timeout: Duration) -> bool {
        let (ack_tx, ack_rx) = mpsc::sync_channel(1);
        if self.tx.send(Msg::FlushAck(ack_tx)).is_err() {
            return false;
        }
        ack_rx.recv_timeout(timeout).is_ok()
    }

    /// Whether an I/O error happened.
    pub(crate) fn has_error(&self) -> bool {
        lock(&self.shared.error).is_some()
    }

    /// Stops the thread after it wrote everything queued; returns the number of events written
    /// or the first I/O error.
    pub(crate) fn finish(&self) -> Result<u64, ProbeError> {
        let _ = self.tx.send(Msg::Finish);
        let join = lock(&self.join).take();
        let written = match join {
            Some(handle) => handle.join().map_err(|_| ProbeError::WriterPanicked)?,
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
            let _ = self.tx.send(Msg::Finish);
            let _ = handle.join();
        }
    }
}

pub(crate) fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn run<W: Write>(rx: Receiver<Msg>, out: W, shared: &WriterShared) -> u64 {
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
    while let Ok(msg) = rx.recv() {
        match msg {
            Msg::Event(event) => {
                // Nothing may follow the terminal: a late event (a guard dropped while a panic
                // unwinds, say) is dropped rather than making the trace unreadable.
                if failed || terminal_written {
                    continue;
                }
                terminal_written = matches!(*event, TraceEvent::Terminal(_));
                let result = writer.write_event(&event);
                record(result, &mut failed);
            }
            Msg::Flush => {
                if !failed {
                    let result = writer.flush();
                    record(result, &mut failed);
                }
            }
            Msg::FlushAck(ack) => {
                if !failed {
                    let result = writer.flush();
                    record(result, &mut failed);
                }
                let _ = ack.send(());
            }
            Msg::Finish => break,
        }
    }
    if !failed {
        let result = writer.flush();
        record(result, &mut failed);
    }
    writer.events_written()
}

#[cfg(test)]
mod tests {
    use super::*;
    use trace_schema::{TerminalEvent, TerminalOutcome};

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
    fn nothing_is_written_after_the_terminal() {
        let handle = WriterHandle::spawn(io::sink()).unwrap();
        handle.send(terminal());
        handle.send(terminal());
        assert_eq!(handle.finish().unwrap(), 1);
        assert!(matches!(handle.finish(), Err(ProbeError::AlreadyFinished)));
    }
}
