//! # stockade — the command line (layer 5)
//!
//! `stockade probe` attests what this host enforces; `stockade exec` runs one program in a
//! fresh sandbox and refuses, naming every missing protection, unless everything the request
//! needs is attested. It never falls back to running a program unsandboxed.
#![forbid(unsafe_code)]

mod demo;
mod exec;
mod manifest;
mod probe_cmd;
mod run;
mod units;

use clap::{Parser, Subcommand};

/// Exit codes of Stockade's own outcomes (a program's own status passes through unchanged).
pub mod codes {
    /// Invalid command line.
    pub const USAGE: i32 = 123;
    /// The wall-time budget ended the run (the whole process tree was killed).
    pub const WALL_TIME: i32 = 124;
    /// Refused: a protection the request needs is not attested on this host.
    pub const REFUSED: i32 = 125;
    /// The sandbox could not be set up.
    pub const SETUP_FAILED: i32 = 126;
    /// The program was not found or is not executable inside the sandbox.
    pub const NOT_FOUND: i32 = 127;
}

const EXIT_CODES_HELP: &str = "\
Exit status:
  the program's own exit status, or 128+N when it was killed by signal N
  123  invalid command line
  124  wall-time budget exceeded (--wall); the whole process tree was killed
  125  refused: a protection the request needs is not attested on this host
  126  the sandbox could not be set up
  127  the program was not found or is not executable inside the sandbox";

/// Run untrusted programs inside a kernel-enforced boundary.
#[derive(Debug, Parser)]
#[command(name = "stockade", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Prove, on this host, which protections are enforced (a canary runs inside a real sandbox).
    ///
    /// Exits 0 only when all eight ADR-0017 protections are enforced, 1 otherwise.
    Probe {
        /// Print the attestation and every check as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Run one program in a fresh sandbox.
    #[command(after_long_help = EXIT_CODES_HELP)]
    Exec(exec::ExecArgs),
    /// Run one attempt: an agent preset on a work unit, in a fresh sandbox, captured from outside.
    #[command(after_long_help = run::RUN_EXIT_CODES_HELP)]
    Run(run::RunArgs),
    /// Run the whole path on a built-in demo (repository, scripted model, bundled agent).
    #[command(after_long_help = run::RUN_EXIT_CODES_HELP)]
    Demo(demo::DemoArgs),
    /// Work with result manifests.
    Manifest(manifest::ManifestArgs),
    /// Benchmark helper: one sandboxed `/bin/true` per stdin line, nanoseconds on stdout.
    #[command(name = "__bench-launch", hide = true)]
    BenchLaunch,
}

/// `stockade exec` parsed on its own: building only this subcommand's parser keeps the
/// start-up of the most frequent, latency-sensitive call short. Same flags, help and errors.
#[derive(Debug, Parser)]
#[command(
    name = "stockade exec",
    bin_name = "stockade exec",
    about = "Run one program in a fresh sandbox",
    after_long_help = EXIT_CODES_HELP
)]
struct ExecCli {
    #[command(flatten)]
    args: exec::ExecArgs,
}

/// Parses `argv`, or prints clap's message and exits: 123 for a usage error, 0 for `--help`.
fn parse_or_exit<P: Parser>(argv: impl IntoIterator<Item = std::ffi::OsString>) -> P {
    P::try_parse_from(argv).unwrap_or_else(|e| {
        let code = if e.use_stderr() { codes::USAGE } else { 0 };
        let _ = e.print();
        std::process::exit(code)
    })
}

fn main() {
    // A probe re-executes this binary inside a sandbox as its canary.
    stockade_sandbox_linux::canary::run_if_requested();
    if std::env::args_os().nth(1).is_some_and(|a| a == "exec") {
        let argv = std::iter::once(std::ffi::OsString::from("stockade exec"))
            .chain(std::env::args_os().skip(2));
        let exec: ExecCli = parse_or_exit(argv);
        std::process::exit(exec::run(exec.args));
    }
    let cli: Cli = parse_or_exit(std::env::args_os());
    let code = match cli.command {
        Command::Probe { json } => probe_cmd::run(json),
        Command::Exec(args) => exec::run(args),
        Command::BenchLaunch => exec::bench_launch(),
        Command::Run(args) => run::run(args),
        Command::Demo(args) => demo::run(args),
        Command::Manifest(args) => manifest::run(args),
    };
    std::process::exit(code);
}
