//! A memory log read on a second thread: one thread reads and decodes the log (varints, UTF-8
//! of the ids, the merge of sorted runs) into batches, the caller's thread applies its pass to
//! them. On a 10^7-event trace decoding is a fifth of the memory replay, which is the longest
//! serial step of an analysis; with a core to spare it comes off that path.
//!
//! Batches travel over a bounded channel (at most [`IN_FLIGHT`] decoded ahead) and come back
//! to be refilled, so what is resident is a few batches, never the events.

use std::io;
use std::ops::Range;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

use super::spill::{MemoryItem, MemoryLog, MemoryOrder};

/// Logs shorter than this are read on the pass's own thread (a thread costs more than it
/// saves).
pub const PIPELINE_MIN_EVENTS: usize = 1 << 16;
/// Events per batch.
const BATCH: usize = 1024;
/// Batches decoded ahead of the pass.
const IN_FLIGHT: usize = 4;

/// One decoded event, its ids as ranges of the batch's text.
#[derive(Debug, Clone)]
struct Rec {
    item: MemoryItem<'static>,
    storage: Option<Range<u32>>,
    tensor: Option<Range<u32>>,
}

/// Decoded events and the text of their ids.
#[derive(Debug, Default)]
struct Batch {
    recs: Vec<Rec>,
    text: String,
}

impl Batch {
    fn push(&mut self, m: &MemoryItem<'_>) {
        let mut keep = |s: Option<&str>| {
            s.map(|s| {
                let start = self.text.len() as u32;
                self.text.push_str(s);
                start..self.text.len() as u32
            })
        };
        let storage = keep(m.storage);
        let tensor = keep(m.tensor);
        self.recs.push(Rec {
            item: MemoryItem {
                storage: None,
                tensor: None,
                ..*m
            },
            storage,
            tensor,
        });
    }

    fn clear(&mut self) {
        self.recs.clear();
        self.text.clear();
    }
}

/// Runs `log.for_each(order, f)` with the log decoded on a second thread (see the module docs):
/// `f` sees the same events in the same order.
///
/// # Errors
/// I/O errors reading the log back, as [`MemoryLog::for_each`].
pub(crate) fn for_each_pipelined(
    log: &MemoryLog,
    order: MemoryOrder,
    mut f: impl FnMut(&MemoryItem<'_>),
) -> io::Result<()> {
    let (full_tx, full_rx) = sync_channel::<Batch>(IN_FLIGHT);
    let (empty_tx, empty_rx) = sync_channel::<Batch>(IN_FLIGHT + 2);
    std::thread::scope(|scope| {
        let producer = scope.spawn(move || produce(log, order, full_tx, empty_rx));
        // by value: a panicking pass drops the receiver, which stops the producer
        for batch in full_rx {
            for r in &batch.recs {
                let text = |range: &Option<Range<u32>>| {
                    range
                        .as_ref()
                        .map(|r| &batch.text[r.start as usize..r.end as usize])
                };
                f(&MemoryItem {
                    storage: text(&r.storage),
                    tensor: text(&r.tensor),
                    ..r.item
                });
            }
            // the producer may have finished: a batch it no longer wants is dropped
            let _ = empty_tx.try_send(batch);
        }
        producer
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The second thread: decodes the log into batches until it ends or the pass stops listening.
fn produce(
    log: &MemoryLog,
    order: MemoryOrder,
    full: SyncSender<Batch>,
    empty: Receiver<Batch>,
) -> io::Result<()> {
    let mut batch = Batch::default();
    let mut listening = true;
    log.for_each(order, |m| {
        if !listening {
            return;
        }
        batch.push(m);
        if batch.recs.len() >= BATCH {
            let next = match empty.try_recv() {
                Ok(mut b) => {
                    b.clear();
                    b
                }
                Err(_) => Batch {
                    recs: Vec::with_capacity(BATCH),
                    text: String::with_capacity(batch.text.capacity()),
                },
            };
            let done = std::mem::replace(&mut batch, next);
            listening = full.send(done).is_ok();
        }
    })?;
    if listening && !batch.recs.is_empty() {
        let _ = full.send(batch);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::spill::MemoryLogWriter;
    use crate::event::{MemoryAction, MemoryCategory};
    use crate::intern::Sym;

    /// A log of `n` events whose timestamps step back every 97 events (several sorted runs),
    /// in a file past 4 KiB; ids of varying length, some absent.
    fn log_of(n: u32) -> MemoryLog {
        let mut w = MemoryLogWriter::with_file_threshold(4096);
        let ids: Vec<String> = (0..n).map(|i| format!("s{}", i * 7919 % 1000)).collect();
        for i in 0..n {
            w.push(&MemoryItem {
                index: i,
                timestamp_ns: (i % 97) as u64 * 10 + (i / 97) as u64,
                bytes: (i % 3 != 0).then_some(i as u64),
                device: Sym::from_index(i as usize % 2),
                storage: (i % 5 != 0).then_some(ids[i as usize].as_str()),
                tensor: (i % 2 == 0).then_some("t1"),
                span: None,
                op_name: None,
                shape: None,
                dtype: None,
                label: None,
                action: if i % 2 == 0 {
                    MemoryAction::Alloc
                } else {
                    MemoryAction::Free
                },
                category: MemoryCategory::Activation,
                category_source: None,
                source: None,
                pre_existing: false,
            })
            .unwrap();
        }
        w.finish().unwrap()
    }

    fn owned(m: &MemoryItem<'_>) -> (u32, u64, Option<String>, Option<String>, String) {
        (
            m.index,
            m.timestamp_ns,
            m.storage.map(str::to_string),
            m.tensor.map(str::to_string),
            format!("{m:?}"),
        )
    }

    /// The pipelined pass sees exactly the plain pass' events, in its order, for both orders
    /// and at every batch boundary.
    #[test]
    fn same_events_same_order() {
        for n in [
            0,
            1,
            BATCH as u32 - 1,
            BATCH as u32,
            BATCH as u32 + 1,
            3 * BATCH as u32 + 7,
        ] {
            let log = log_of(n);
            for order in [MemoryOrder::File, MemoryOrder::Replay] {
                let mut plain = Vec::new();
                log.for_each(order, |m| plain.push(owned(m))).unwrap();
                let mut piped = Vec::new();
                for_each_pipelined(&log, order, |m| piped.push(owned(m))).unwrap();
                assert_eq!(plain.len(), n as usize);
                assert!(plain == piped, "{n} events, {order:?}: the passes differ");
            }
        }
    }

    /// A pass that panics stops the reading thread instead of leaving it blocked.
    #[test]
    fn a_panicking_pass_does_not_hang() {
        let log = log_of(20 * BATCH as u32);
        let mut seen = 0usize;
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            for_each_pipelined(&log, MemoryOrder::Replay, |_| {
                seen += 1;
                if seen == BATCH + 3 {
                    panic!("the pass failed");
                }
            })
        }));
        assert!(r.is_err());
        assert_eq!(seen, BATCH + 3);
    }
}
