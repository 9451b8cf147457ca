//! The sampler through its public door (no Candle): a busy thread sampled at 1 kHz gets
//! records whose stacks name the busy function once symbolised; a stopped sampler writes no
//! more. Where the sampler cannot run, the door refuses with the reason.

use std::time::{Duration, Instant};

use trace_wire::TraceEvent;

#[inline(never)]
fn busy_for(d: Duration) -> u64 {
    let t = Instant::now();
    let mut x = 0u64;
    while t.elapsed() < d {
        for i in 0..1000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
    }
    x
}

#[test]
fn a_busy_thread_is_sampled_and_its_function_is_named() {
    if let Err(why) = trace_sampler::install() {
        assert_eq!(Some(why.as_str()), trace_sampler::UNSUPPORTED_REASON);
        assert!(trace_sampler::SampleBuffer::reserve(4096).is_err());
        return;
    }
    let buffer = trace_sampler::SampleBuffer::reserve(4 << 20).expect("a slot");
    let mut sampler = buffer
        .start(trace_sampler::current_tid(), 1_000_000)
        .expect("a timer");
    busy_for(Duration::from_millis(120));
    sampler.stop();
    let counts = sampler.counts();
    let records: Vec<_> = sampler.records().collect();
    assert!(
        records.len() >= 20,
        "{} samples in 120 ms at 1 kHz",
        records.len()
    );
    assert_eq!(records.len() as u64, counts.samples);
    assert!(counts.ticks >= counts.samples);
    assert!(records
        .windows(2)
        .all(|w| w[0].process_ns <= w[1].process_ns));
    assert!(records.iter().all(|r| !r.frames.is_empty()));
    busy_for(Duration::from_millis(20));
    assert_eq!(sampler.records().count(), records.len(), "stopped: no more");

    let stacks = trace_sampler::SessionStacks::default();
    for r in &records {
        stacks.add(r.frames, true);
    }
    let names = std::cell::RefCell::new(Vec::new());
    let figures = stacks
        .write(|e| {
            if let TraceEvent::Frame(f) = e {
                names.borrow_mut().extend(f.function);
            }
        })
        .expect("a table");
    let names = names.into_inner();
    assert!(figures.unique_addresses > 0);
    assert!(
        names.iter().any(|n| n.contains("busy_for")),
        "busy_for among {} names",
        names.len()
    );
}
