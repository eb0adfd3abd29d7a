//! Shared helpers for `cargo xtask bench` areas: timing, alternating contenders, medians, p99,
//! ratios, and a plain-text report.
//!
//! ```text
//! let a = || stats::time_command("bwrap", &["--unshare-all", "--ro-bind", "/", "/", "true"]);
//! let b = || stats::time_command("target/release/stockade", &["exec", "--", "true"]);
//! let samples = stats::alternate(&[("bwrap", &a), ("stockade", &b)], 5, 200)?;
//! print!("{}", stats::report(&samples, "bwrap"));
//! ```
#![allow(dead_code)] // Used by the area files as they are written.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};

/// The measurements of one contender.
#[derive(Debug, Clone)]
pub struct Samples {
    /// The contender's name.
    pub name: String,
    /// One duration per round, in run order.
    pub durations: Vec<Duration>,
}

impl Samples {
    /// The durations, sorted ascending.
    fn sorted(&self) -> Vec<Duration> {
        let mut v = self.durations.clone();
        v.sort();
        v
    }

    /// The `p`-th percentile (0.0..=100.0), nearest-rank; zero when empty.
    pub fn percentile(&self, p: f64) -> Duration {
        let v = self.sorted();
        if v.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((p / 100.0) * v.len() as f64).ceil() as usize;
        v[rank.clamp(1, v.len()) - 1]
    }

    /// The median (for an even count, the mean of the two middle values).
    pub fn median(&self) -> Duration {
        let v = self.sorted();
        match v.len() {
            0 => Duration::ZERO,
            n if n % 2 == 1 => v[n / 2],
            n => (v[n / 2 - 1] + v[n / 2]) / 2,
        }
    }

    /// The 99th percentile.
    pub fn p99(&self) -> Duration {
        self.percentile(99.0)
    }

    /// The fastest run.
    pub fn min(&self) -> Duration {
        self.durations.iter().copied().min().unwrap_or_default()
    }

    /// The slowest run.
    pub fn max(&self) -> Duration {
        self.durations.iter().copied().max().unwrap_or_default()
    }
}

/// A contender: a name and a closure that performs one run and returns how long the measured part
/// took (so set-up and tear-down can be left out of the measurement).
pub type Contender<'a> = (&'a str, &'a dyn Fn() -> anyhow::Result<Duration>);

/// Runs `warmup` unmeasured rounds, then `rounds` measured rounds. Each round runs every contender
/// once, starting from a different contender each round (rotation), so drift on a noisy machine
/// hits all of them alike. The first error aborts and names the contender.
pub fn alternate(
    contenders: &[Contender<'_>],
    warmup: usize,
    rounds: usize,
) -> anyhow::Result<Vec<Samples>> {
    let mut out: Vec<Samples> = contenders
        .iter()
        .map(|(name, _)| Samples {
            name: (*name).to_owned(),
            durations: Vec::with_capacity(rounds),
        })
        .collect();
    let n = contenders.len();
    for round in 0..warmup + rounds {
        for k in 0..n {
            let i = (round + k) % n;
            let (name, f) = contenders[i];
            let d = f().with_context(|| format!("contender `{name}` failed in round {round}"))?;
            if round >= warmup {
                out[i].durations.push(d);
            }
        }
    }
    Ok(out)
}

/// Times one closure.
pub fn timed(f: impl FnOnce() -> anyhow::Result<()>) -> anyhow::Result<Duration> {
    let start = Instant::now();
    f()?;
    Ok(start.elapsed())
}

/// Runs a program to completion (stdin, stdout and stderr to /dev/null), fails unless it exits 0,
/// and returns the wall time from spawn to exit.
pub fn time_command(program: &str, args: &[&str]) -> anyhow::Result<Duration> {
    let mut cmd = Command::new(program);
    cmd.args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    time_prepared(&mut cmd)
}

/// Like [`time_command`] for a prepared [`Command`] (environment, working directory, ...).
pub fn time_prepared(cmd: &mut Command) -> anyhow::Result<Duration> {
    let start = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("starting {:?}", cmd.get_program()))?;
    let took = start.elapsed();
    if !status.success() {
        bail!("{:?} exited with {status}", cmd.get_program());
    }
    Ok(took)
}

/// Finds a program on `PATH`, for "peer not installed" messages.
pub fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| p.is_file())
}

/// Fails with an install hint unless `program` is on `PATH`.
pub fn require(program: &str, install_hint: &str) -> anyhow::Result<PathBuf> {
    which(program).with_context(|| format!("peer `{program}` is not installed: {install_hint}"))
}

/// A duration for humans: `812 µs`, `3.12 ms`, `1.50 s`.
pub fn fmt_duration(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

/// `a / b` as `1.23x`; `n/a` when `b` is zero.
pub fn ratio(a: Duration, b: Duration) -> String {
    if b.is_zero() {
        return "n/a".to_owned();
    }
    format!("{:.2}x", a.as_secs_f64() / b.as_secs_f64())
}

/// A table: one row per contender with runs, median, p99, min, max, and the median and p99 ratios
/// against the `baseline` contender (by name; the first one if absent).
pub fn report(samples: &[Samples], baseline: &str) -> String {
    let base = samples
        .iter()
        .find(|s| s.name == baseline)
        .or_else(|| samples.first());
    let width = samples
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(4)
        .max(9);
    let mut out = format!(
        "{:<width$}  {:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>12}  {:>9}\n",
        "contender", "runs", "median", "p99", "min", "max", "median ratio", "p99 ratio"
    );
    for s in samples {
        let (mr, pr) = base.map_or_else(
            || ("n/a".to_owned(), "n/a".to_owned()),
            |b| (ratio(s.median(), b.median()), ratio(s.p99(), b.p99())),
        );
        out.push_str(&format!(
            "{:<width$}  {:>5}  {:>10}  {:>10}  {:>10}  {:>10}  {:>12}  {:>9}\n",
            s.name,
            s.durations.len(),
            fmt_duration(s.median()),
            fmt_duration(s.p99()),
            fmt_duration(s.min()),
            fmt_duration(s.max()),
            mr,
            pr
        ));
    }
    if let Some(b) = base {
        out.push_str(&format!(
            "(ratios: contender / `{}`; lower is faster)\n",
            b.name
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Samples {
        Samples {
            name: "x".into(),
            durations: v.iter().map(|&m| Duration::from_millis(m)).collect(),
        }
    }

    #[test]
    fn median_and_percentiles() {
        assert_eq!(ms(&[5, 1, 3]).median(), Duration::from_millis(3));
        assert_eq!(ms(&[4, 1, 3, 2]).median(), Duration::from_micros(2500));
        let hundred: Vec<u64> = (1..=100).collect();
        assert_eq!(ms(&hundred).p99(), Duration::from_millis(99));
        assert_eq!(ms(&[7]).p99(), Duration::from_millis(7));
        assert_eq!(ms(&[]).median(), Duration::ZERO);
    }

    #[test]
    fn ratio_formatting() {
        assert_eq!(
            ratio(Duration::from_millis(3), Duration::from_millis(2)),
            "1.50x"
        );
        assert_eq!(ratio(Duration::from_millis(3), Duration::ZERO), "n/a");
        assert_eq!(fmt_duration(Duration::from_micros(812)), "812 µs");
        assert_eq!(fmt_duration(Duration::from_micros(3120)), "3.12 ms");
    }

    #[test]
    fn alternate_rotates_and_skips_warmup() {
        use std::cell::RefCell;
        let order = RefCell::new(Vec::new());
        let a = || {
            order.borrow_mut().push('a');
            Ok(Duration::from_millis(1))
        };
        let b = || {
            order.borrow_mut().push('b');
            Ok(Duration::from_millis(2))
        };
        let s = alternate(&[("a", &a), ("b", &b)], 1, 3).unwrap();
        assert_eq!(order.borrow().iter().collect::<String>(), "abbaabba");
        assert_eq!(s[0].durations.len(), 3);
        assert_eq!(s[1].median(), Duration::from_millis(2));
        let r = report(&s, "a");
        assert!(r.contains("2.00x"), "{r}");
    }

    #[test]
    fn alternate_names_the_failing_contender() {
        let bad = || -> anyhow::Result<Duration> { bail!("boom") };
        let err = alternate(&[("peer", &bad)], 0, 1).unwrap_err();
        assert!(format!("{err:#}").contains("contender `peer` failed"));
    }

    #[test]
    fn time_command_fails_on_nonzero_exit() {
        assert!(time_command("true", &[]).is_ok());
        assert!(time_command("false", &[]).is_err());
    }
}
