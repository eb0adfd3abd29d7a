//! Running a command to completion with a deadline and bounded output.

use std::io::{Read, Write};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use crate::SandboxError;
use crate::raw::{ExitStatus, RawProcess};

/// Options for [`crate::Session::run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOptions {
    /// After this long the whole process tree is killed and the output says so.
    pub deadline: Duration,
    /// Bytes retained per stream; the rest is read and counted, never stored.
    pub max_output_bytes: usize,
    /// Bytes written to standard input, which is then closed (`None`: `/dev/null`).
    pub stdin: Option<Vec<u8>>,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            deadline: Duration::from_secs(60),
            max_output_bytes: 1 << 20,
            stdin: None,
        }
    }
}

/// One captured output stream.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StreamCapture {
    /// The retained prefix of the stream.
    pub bytes: Vec<u8>,
    /// Total bytes the stream produced (retained or not).
    pub total: u64,
    /// Whether bytes were dropped because of [`RunOptions::max_output_bytes`].
    pub truncated: bool,
}

/// The result of [`crate::Session::run`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunOutput {
    /// How the program ended (after a deadline kill: the kill's signal).
    pub status: ExitStatus,
    /// Whether the deadline ended it.
    pub timed_out: bool,
    /// Standard output.
    pub stdout: StreamCapture,
    /// Standard error.
    pub stderr: StreamCapture,
    /// Wall time from start to the end of the process tree.
    pub elapsed: Duration,
}

fn drain(mut reader: Box<dyn Read + Send>, limit: usize) -> StreamCapture {
    let mut cap = StreamCapture::default();
    let mut buf = [0u8; 16 * 1024];
    loop {
        match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => {
                cap.total += n as u64;
                let room = limit.saturating_sub(cap.bytes.len());
                let keep = room.min(n);
                cap.bytes.extend_from_slice(&buf[..keep]);
                if keep < n {
                    cap.truncated = true;
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    cap
}

/// Drives `process` to completion under `options`. Output readers run on their own threads
/// so a chatty program can never block on a full pipe; the deadline is measured from the
/// call.
pub(crate) fn drive(
    mut process: Box<dyn RawProcess>,
    options: &RunOptions,
) -> Result<RunOutput, SandboxError> {
    let started = Instant::now();
    let limit = options.max_output_bytes;
    let out = process
        .take_stdout()
        .map(|r| thread::spawn(move || drain(r, limit)));
    let err = process
        .take_stderr()
        .map(|r| thread::spawn(move || drain(r, limit)));
    if let (Some(input), Some(mut w)) = (options.stdin.clone(), process.take_stdin()) {
        // A program that does not read its input must not stall the deadline.
        thread::spawn(move || {
            let _ = w.write_all(&input);
        });
    }
    let (kill_tx, kill_rx) = mpsc::channel::<()>();
    let (done_tx, done_rx) = mpsc::channel();
    // The waiter owns the process and polls it; a message on `kill_rx` kills the tree.
    thread::spawn(move || {
        let result = loop {
            match process.try_wait() {
                Ok(Some(status)) => break Ok(status),
                Ok(None) => {}
                Err(e) => break Err(e),
            }
            match kill_rx.recv_timeout(Duration::from_millis(5)) {
                Ok(()) => break process.kill_tree().and_then(|()| process.wait()),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                // The caller is gone: nothing may outlive it.
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    break process.kill_tree().and_then(|()| process.wait());
                }
            }
        };
        let _ = done_tx.send(result);
    });
    let remaining = options.deadline.saturating_sub(started.elapsed());
    let (result, timed_out) = match done_rx.recv_timeout(remaining) {
        Ok(result) => (result, false),
        Err(_) => {
            let _ = kill_tx.send(());
            let result = done_rx.recv().map_err(|_| SandboxError::Backend {
                backend: "session".into(),
                message: "process waiter ended without a status".into(),
            })?;
            (result, true)
        }
    };
    let status = result?;
    let elapsed = started.elapsed();
    let join = |h: Option<thread::JoinHandle<StreamCapture>>| {
        h.map(|h| h.join().unwrap_or_default()).unwrap_or_default()
    };
    Ok(RunOutput {
        status,
        timed_out,
        stdout: join(out),
        stderr: join(err),
        elapsed,
    })
}
