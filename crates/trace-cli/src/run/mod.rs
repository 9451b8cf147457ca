//! One module per subcommand: what it reads, what it prints and its exit code. The dispatch
//! below only picks the module.

pub(crate) mod bundle;
mod check;
mod demo;
mod diff;
mod export;
mod memory;
mod ops;
mod query;
mod ranks;
mod report;
mod summary;

use anyhow::Result;

use crate::cli::{Cli, Command};
use crate::output::Output;

/// Runs the subcommand `cli` names.
///
/// # Errors
/// The subcommand's (bad input, I/O), with its cause chain.
pub fn run(cli: Cli) -> Result<Output> {
    match cli.command {
        Command::Demo(args) => demo::run(&args),
        Command::Import(args) => crate::commands::import::run(&args)
            .map(|(stdout, code)| Output::with_code(stdout, code)),
        Command::Summary(args) => summary::run(&args),
        Command::Memory(args) => memory::run(&args),
        Command::Ops(args) => ops::run(&args),
        Command::Check(args) => check::run(&args),
        Command::DeviceCheck(args) => check::device(&args),
        Command::Query(args) => query::run(args),
        Command::Report(args) => report::run(&args),
        Command::Export(args) => export::run(&args),
        Command::Diff(args) => diff::run(&args),
        Command::Bundle(args) => bundle::publish(&args),
        Command::Verify(args) => bundle::verify(&args),
        Command::Series(args) => bundle::series(&args),
    }
}
