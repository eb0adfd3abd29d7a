//! `cargo xtask bench exec [--rounds N]`: `stockade exec -- /bin/true` (release build) against
//! `bwrap --unshare-all` with a comparable read-only root and `unshare -Urnpf --mount-proc`,
//! alternating in one run; prints medians, p99 and ratios against bwrap.
//!
//! Note what each contender does: `stockade exec` reuses the attestation a recent process of
//! this boot proved live on the same host key and seals each worker before exec (ADR-0015);
//! `stockade exec --live-probe` proves its protections with a canary sandbox first (ADR-0013).
//! Both enforce Landlock, seccomp and capability drop, which bwrap as invoked here does not.

use std::cell::RefCell;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use super::stats;

fn build_stockade() -> anyhow::Result<PathBuf> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let status = Command::new(env!("CARGO"))
        .current_dir(&root)
        .args([
            "build",
            "--release",
            "--quiet",
            "-p",
            "stockade-cli",
            "--bin",
            "stockade",
        ])
        .status()
        .context("cargo build --release -p stockade-cli")?;
    if !status.success() {
        bail!("building the release stockade binary failed");
    }
    let target =
        std::env::var_os("CARGO_TARGET_DIR").map_or_else(|| root.join("target"), PathBuf::from);
    let bin = target.join("release").join("stockade");
    if !bin.exists() {
        bail!("{} not found after the build", bin.display());
    }
    Ok(bin)
}

/// Runs the benchmark.
pub fn run(args: &[String]) -> anyhow::Result<()> {
    let mut rounds = 100usize;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match a.as_str() {
            "--rounds" => {
                rounds = it
                    .next()
                    .context("--rounds needs a number")?
                    .parse()
                    .context("--rounds needs a number")?;
            }
            other => {
                bail!("unknown argument `{other}`; usage: cargo xtask bench exec [--rounds N]")
            }
        }
    }
    let stockade = build_stockade()?;
    let bwrap = stats::require("bwrap", "apt-get install bubblewrap")?;
    let unshare = stats::require("unshare", "apt-get install util-linux")?;
    let ws = tempfile::tempdir().context("workspace tempdir")?;
    let ws_s = ws.path().display().to_string();
    let st = stockade.display().to_string();
    let bw = bwrap.display().to_string();
    let un = unshare.display().to_string();

    // bwrap with a root comparable to stockade's: read-only system dirs, private /proc, /dev,
    // /tmp, the workspace read-write, every namespace.
    let mut bwrap_args: Vec<String> = vec![
        "--unshare-all".into(),
        "--die-with-parent".into(),
        "--new-session".into(),
    ];
    for d in ["/usr", "/etc"] {
        bwrap_args.extend(["--ro-bind".into(), d.into(), d.into()]);
    }
    for d in ["/bin", "/sbin", "/lib", "/lib64"] {
        let p = std::path::Path::new(d);
        if let Ok(target) = std::fs::read_link(p) {
            bwrap_args.extend(["--symlink".into(), target.display().to_string(), d.into()]);
        } else if p.is_dir() {
            bwrap_args.extend(["--ro-bind".into(), d.into(), d.into()]);
        }
    }
    bwrap_args.extend(
        [
            "--proc",
            "/proc",
            "--dev",
            "/dev",
            "--tmpfs",
            "/tmp",
            "--bind",
            &ws_s,
            &ws_s,
            "--chdir",
            &ws_s,
            "/bin/true",
        ]
        .map(String::from),
    );
    let bwrap_refs: Vec<&str> = bwrap_args.iter().map(String::as_str).collect();

    let stockade_run =
        || stats::time_command(&st, &["exec", "--workspace", &ws_s, "--", "/bin/true"]);
    // Issue 4: the same with every ceiling on (worker cgroup, writable area, wall-time watchdog).
    let stockade_limits_run = || {
        stats::time_command(
            &st,
            &[
                "exec",
                "--workspace",
                &ws_s,
                "--memory",
                "512M",
                "--cpus",
                "1",
                "--pids",
                "256",
                "--disk",
                "256M",
                "--wall",
                "60s",
                "--",
                "/bin/true",
            ],
        )
    };
    // The same call proving its protections live instead of reusing this boot's attestation.
    let stockade_live_run = || {
        stats::time_command(
            &st,
            &[
                "exec",
                "--live-probe",
                "--workspace",
                &ws_s,
                "--",
                "/bin/true",
            ],
        )
    };
    let bwrap_run = || stats::time_command(&bw, &bwrap_refs);
    let unshare_run = || stats::time_command(&un, &["-Urnpf", "--mount-proc", "/bin/true"]);
    let plain_run = || stats::time_command("/bin/true", &[]);
    // The launcher alone: one long-lived `stockade __bench-launch` (probed once) launches
    // `/bin/true` per request and reports its in-process launch-to-exit time.
    let launcher = RefCell::new(LaunchServer::start(&st)?);
    let launcher_run = || launcher.borrow_mut().once();

    println!("bench exec: {rounds} rounds, contenders alternate (rotation), /bin/true in each");
    let samples = stats::alternate(
        &[
            ("stockade exec", &stockade_run),
            ("stockade exec + all limits", &stockade_limits_run),
            ("stockade exec --live-probe", &stockade_live_run),
            ("bwrap --unshare-all", &bwrap_run),
            ("unshare -Urnpf --mount-proc", &unshare_run),
            ("stockade launch() in-process", &launcher_run),
            ("plain spawn", &plain_run),
        ],
        10,
        rounds,
    )?;
    print!("{}", stats::report(&samples, "bwrap --unshare-all"));
    println!(
        "note: `stockade exec` reuses the live probe a recent process of this boot made on the same host key and seals each worker before exec (ADR-0015); `--live-probe` proves isolation with a canary sandbox first (ADR-0013), paying two sandbox launches"
    );
    launcher.borrow_mut().stop();
    Ok(())
}

struct LaunchServer {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl LaunchServer {
    fn start(stockade: &str) -> anyhow::Result<Self> {
        let mut child = Command::new(stockade)
            .arg("__bench-launch")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("start stockade __bench-launch")?;
        let stdin = child.stdin.take().context("stdin")?;
        let stdout = BufReader::new(child.stdout.take().context("stdout")?);
        Ok(LaunchServer {
            child,
            stdin: Some(stdin),
            stdout,
        })
    }

    fn once(&mut self) -> anyhow::Result<Duration> {
        let stdin = self.stdin.as_mut().context("launcher stopped")?;
        stdin.write_all(b"go\n")?;
        stdin.flush()?;
        let mut line = String::new();
        self.stdout.read_line(&mut line)?;
        let ns: u64 = line
            .trim()
            .parse()
            .with_context(|| format!("bad launcher reply `{}`", line.trim()))?;
        Ok(Duration::from_nanos(ns))
    }

    fn stop(&mut self) {
        self.stdin = None;
        let _ = self.child.wait();
    }
}
