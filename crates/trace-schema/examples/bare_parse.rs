//! The baseline of `cargo xtask bench-scale`: the simplest program that reads a trace at all —
//! one thread, each line deserialized into a typed [`trace_schema::TraceEvent`] with serde_json,
//! nothing kept. Prints the number of events.
//!
//! Run: `cargo run --release -p trace-schema --example bare_parse -- TRACE`

use std::io::BufRead;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args_os()
        .nth(1)
        .ok_or("usage: bare_parse TRACE")?;
    let mut reader = std::io::BufReader::with_capacity(1 << 16, std::fs::File::open(path)?);
    let mut line = Vec::with_capacity(1024);
    let mut events = 0u64;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let event: trace_schema::TraceEvent = serde_json::from_slice(&line)?;
        std::hint::black_box(&event);
        events += 1;
    }
    println!("{events}");
    Ok(())
}
