//! Turns between the modules of the `e2e` test binary. Each module was once a test binary of its
//! own, and the timing bounds of its tests (shutdown within its timeout, the longest record
//! call, samples per interval, examples that linger longer than the test takes) were set for
//! that load: its own tests side by side, never another module's peers and examples.
//! [`turn`] keeps it so: tests of one module may run together, tests of different modules
//! take turns.

use std::sync::{Condvar, Mutex, MutexGuard};

use super::peers::{peers_available, Peer};

/// Which module holds the turn, and how many of its tests are running.
struct Holder {
    module: Option<&'static str>,
    tests: usize,
}

static HOLDER: Mutex<Holder> = Mutex::new(Holder { module: None, tests: 0 });
static RELEASED: Condvar = Condvar::new();

fn holder() -> MutexGuard<'static, Holder> {
    // Only a panic inside this module could poison the lock; the state stays consistent.
    HOLDER.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's share of its module's turn; the turn passes on when the last one drops.
#[must_use = "the turn ends when this is dropped"]
pub struct Turn(());

/// Waits until no test of another module runs, then holds the turn for `module` (pass
/// `module_path!()`) until the returned value drops (a failing test drops it while unwinding).
pub fn turn(module: &'static str) -> Turn {
    let mut h = holder();
    while h.module.is_some_and(|m| m != module) {
        h = RELEASED.wait(h).unwrap_or_else(|e| e.into_inner());
    }
    h.module = Some(module);
    h.tests += 1;
    Turn(())
}

/// [`turn`] for a test that runs against real `peers`, checked first by the one rule of
/// [`super::peers`]: `None` (the test returns) after a loud line when one is missing, a failure
/// naming the variable to set under `PIPETEL_REQUIRE_PEERS=1`. A skipped test never waits.
pub fn turn_if_peers(module: &'static str, peers: &[Peer]) -> Option<Turn> {
    peers_available(peers).then(|| turn(module))
}

impl Drop for Turn {
    fn drop(&mut self) {
        let mut h = holder();
        h.tests -= 1;
        if h.tests == 0 {
            h.module = None;
            RELEASED.notify_all();
        }
    }
}
