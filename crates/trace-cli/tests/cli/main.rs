//! Integration tests of the `candle-graph` binary: exit codes, bad inputs, the JSON envelope
//! (hand-written traces), and insta snapshots of every command on the golden fixtures.

mod bad_input;
mod budget;
mod bundle;
mod check;
mod demo;
mod detail;
mod device_check;
mod diff;
mod every;
mod exact;
mod export;
mod fuzz;
mod hostile;
mod hostile46;
mod import;
mod long_names;
mod ops;
mod query;
mod ranks;
mod report;
mod run_dir;
mod run_log;
mod sites;
mod snapshots;
mod steps;
mod util;
