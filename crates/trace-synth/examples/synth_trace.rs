//! Writes a synthetic trace: `synth_trace EVENTS OUT` with [`trace_synth::SynthConfig::mix`]
//! (60% memory events, 30% ops, 10% span events, two devices).
//!
//! Run: `cargo run --release -p trace-synth --example synth_trace -- 1000000 /tmp/t.jsonl`

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let events: u64 = args
        .next()
        .ok_or("usage: synth_trace EVENTS OUT")?
        .parse()?;
    let out = args.next().ok_or("usage: synth_trace EVENTS OUT")?;
    let written = trace_synth::write_synth_trace(&out, &trace_synth::SynthConfig::mix(events))?;
    println!("{written}");
    Ok(())
}
