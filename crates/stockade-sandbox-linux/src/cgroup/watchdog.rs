//! The wall-time budget: a thread that kills the whole worker tree when the budget runs out.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use super::CgroupKiller;

/// Kills every process of a worker cgroup once `budget` has passed, unless disarmed first.
///
/// Arm it right after the worker is released; the launcher's wait then returns because the
/// worker was SIGKILLed, and [`Watchdog::disarm`] (or [`Watchdog::fired`]) tells the report
/// that the wall-time budget ended the run. Dropping the watchdog disarms it.
#[derive(Debug)]
pub struct Watchdog {
    fired: Arc<AtomicBool>,
    cancel: Option<mpsc::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    /// Starts the countdown.
    ///
    /// If the watchdog thread cannot be created the tree is killed at once and the watchdog
    /// counts as fired: a budget that cannot be enforced is not granted.
    pub fn arm(killer: CgroupKiller, budget: Duration) -> Self {
        let fired = Arc::new(AtomicBool::new(false));
        let (tx, rx) = mpsc::channel::<()>();
        let flag = Arc::clone(&fired);
        let k2 = killer.clone();
        let spawned = std::thread::Builder::new()
            .name("stockade-wall".into())
            .spawn(move || {
                if let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(budget) {
                    flag.store(true, Ordering::SeqCst);
                    // Keep killing until empty: the kill loop itself is bounded.
                    let _ = k2.kill_all();
                }
            });
        match spawned {
            Ok(t) => Self {
                fired,
                cancel: Some(tx),
                thread: Some(t),
            },
            Err(_) => {
                fired.store(true, Ordering::SeqCst);
                let _ = killer.kill_all();
                Self {
                    fired,
                    cancel: None,
                    thread: None,
                }
            }
        }
    }

    /// Has the budget run out (and the tree been killed)?
    pub fn fired(&self) -> bool {
        self.fired.load(Ordering::SeqCst)
    }

    /// Stops the countdown and returns whether it had already fired (the kill then finished).
    pub fn disarm(mut self) -> bool {
        self.stop();
        self.fired()
    }

    fn stop(&mut self) {
        if let Some(tx) = self.cancel.take() {
            let _ = tx.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}
