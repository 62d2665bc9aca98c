//! A stand-in OTLP/HTTP collector for tests that call `init` in-process: it accepts every
//! protobuf export, answers 200, and keeps the bodies so a test can look for the strings (span
//! names, log bodies) that reached it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The bodies received, with their request path (`/v1/traces`, `/v1/logs`, `/v1/metrics`).
type Received = Mutex<Vec<(String, Vec<u8>)>>;

/// A running stand-in collector.
#[derive(Clone, Default)]
pub(crate) struct OtlpSink {
    received: Arc<Received>,
    /// `http://127.0.0.1:PORT`.
    pub(crate) endpoint: String,
}

impl OtlpSink {
    /// Listens on a free loopback port, serving each connection on its own thread.
    pub(crate) fn start() -> OtlpSink {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind a loopback port");
        let endpoint = format!("http://{}", listener.local_addr().expect("address"));
        let sink = OtlpSink { received: Arc::default(), endpoint };
        let received = sink.received.clone();
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let received = received.clone();
                std::thread::spawn(move || serve(stream, &received));
            }
        });
        sink
    }

    /// Whether some body sent to `path` contains `needle`, waiting up to five seconds.
    pub(crate) fn wait_for(&self, path: &str, needle: &str) -> bool {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let found = self
                .received
                .lock()
                .expect("sink lock")
                .iter()
                .any(|(p, body)| p == path && body.windows(needle.len()).any(|w| w == needle.as_bytes()));
            if found || Instant::now() > deadline {
                return found;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// Reads requests until the client closes: request line, headers, a `content-length` body.
fn serve(stream: TcpStream, received: &Received) {
    let mut writer = stream.try_clone().expect("clone the stream");
    let mut reader = BufReader::new(stream);
    loop {
        let mut request_line = String::new();
        if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
            return;
        }
        let path = request_line.split_whitespace().nth(1).unwrap_or_default().to_string();
        let mut length = 0usize;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            if header.trim().is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.trim().eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap_or(0);
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() {
            return;
        }
        received.lock().expect("sink lock").push((path, body));
        let response = "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
        if writer.write_all(response.as_bytes()).is_err() {
            return;
        }
    }
}
