//! Child processes with collected output, and bounded waits.

use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Polls `check` every 200 ms until it returns `Some`, or panics with `what` after `timeout`.
pub fn wait_for<T>(what: &str, timeout: Duration, mut check: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(v) = check() {
            return v;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// A child process whose stdout and stderr are collected; killed on drop.
pub struct Process {
    name: String,
    child: Child,
    output: Arc<Mutex<String>>,
}

impl Process {
    /// Starts `command` with piped output.
    pub fn spawn(name: &str, mut command: Command) -> Self {
        command.stdout(Stdio::piped()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = command.spawn().unwrap_or_else(|e| panic!("cannot start {name} ({command:?}): {e}"));
        let output = Arc::new(Mutex::new(String::new()));
        for stream in [
            child.stdout.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
            child.stderr.take().map(|s| Box::new(s) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let output = output.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let mut out = output.lock().expect("output lock");
                    out.push_str(&line);
                    out.push('\n');
                }
            });
        }
        Self { name: name.to_string(), child, output }
    }

    /// The operating system's process id.
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Everything the process printed so far.
    pub fn output(&self) -> String {
        self.output.lock().expect("output lock").clone()
    }

    /// Waits until the output contains `needle`; panics (showing the output) after `timeout`.
    pub fn wait_for_output(&mut self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let out = self.output();
            if out.contains(needle) {
                return out;
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                // Give the reader threads a moment to drain the pipes.
                std::thread::sleep(Duration::from_millis(200));
                let out = self.output();
                if out.contains(needle) {
                    return out;
                }
                panic!("{} exited ({status}) before printing {needle:?}; output:\n{out}", self.name);
            }
            assert!(
                Instant::now() < deadline,
                "{} did not print {needle:?} within {timeout:?}; output:\n{out}",
                self.name
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits for the process to exit; panics after `timeout`. Returns the exit code and output.
    pub fn wait(&mut self, timeout: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                std::thread::sleep(Duration::from_millis(200));
                return (status.code(), self.output());
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!("{} did not exit within {timeout:?}; output:\n{}", self.name, self.output());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The exit status when the process has exited, `None` while it runs.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Stops the process (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::thread::sleep(Duration::from_millis(200));
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        self.kill();
    }
}
