//! `#[pipetel::measure]` on async functions and methods: counts, errors on `Err` and on panic
//! across an await point, and in-flight back to zero when a pending future is dropped.

mod measure_support;

use std::future::Future;
use std::task::{Context, Waker};
use std::time::Duration;

use measure_support::{f, global_metrics as metrics};

#[pipetel::measure(stage = "fetch", input_size = url.len(), output_size = ret.len())]
async fn fetch(url: &str) -> Result<String, String> {
    tokio::time::sleep(Duration::from_millis(5)).await;
    if url.is_empty() {
        return Err("no url".to_string());
    }
    let body = format!("<{url}>");
    Ok(body)
}

#[pipetel::measure]
async fn slow() -> u32 {
    tokio::time::sleep(Duration::from_secs(3600)).await;
    1
}

#[pipetel::measure]
async fn explode_later(n: u32) -> u32 {
    tokio::task::yield_now().await;
    if n > 0 {
        panic!("async boom");
    }
    n
}

#[pipetel::measure]
async fn explode_by_hand() {
    tokio::task::yield_now().await;
    panic!("by hand");
}

struct Client {
    base: String,
}

impl Client {
    #[pipetel::measure(skip(self), fields(base = %self.base))]
    async fn get(&self, path: &str) -> String {
        tokio::task::yield_now().await;
        format!("{}{path}", self.base)
    }
}

#[tokio::test]
async fn counts_async_calls_and_errors() {
    let m = metrics();
    assert_eq!(fetch("a").await, Ok("<a>".to_string()));
    assert!(fetch("").await.is_err());
    let client = Client { base: "http://x".into() };
    assert_eq!(client.get("/y").await, "http://x/y");
    let s = m.collect();
    let at = [("function", "fetch"), ("stage", "fetch")];
    assert_eq!(s.counter("function.calls", &at), 2);
    assert_eq!(s.counter("function.errors", &[("function", "fetch"), ("error.type", "err")]), 1);
    assert_eq!(s.up_down("function.in_flight", &at), 0);
    let (count, sum) = s.histogram("function.duration", &at);
    assert_eq!(count, 2);
    assert!(sum >= 0.010, "two calls sleeping 5 ms each took {sum} s");
    assert_eq!(s.size_histogram("function.input.size", &at), (2, 1));
    assert_eq!(s.size_histogram("function.output.size", &at), (1, 3));
    assert_eq!(s.counter("function.calls", &f("get")), 1);
}

#[tokio::test]
async fn dropped_future_leaves_no_call_in_flight() {
    let m = metrics();
    let mut fut = Box::pin(slow());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    let s = m.collect();
    assert_eq!(s.up_down("function.in_flight", &f("slow")), 1);
    drop(fut);
    let s = m.collect();
    assert_eq!(s.counter("function.calls", &f("slow")), 1);
    assert_eq!(s.up_down("function.in_flight", &f("slow")), 0);
    // Cancelled: neither an error nor a duration.
    assert_eq!(s.counter("function.errors", &f("slow")), 0);
    assert_eq!(s.histogram("function.duration", &f("slow")).0, 0);

    // A future never polled never started.
    drop(slow());
    assert_eq!(m.collect().counter("function.calls", &f("slow")), 1);
}

#[tokio::test]
async fn panic_across_await_is_an_error_and_propagates() {
    let m = metrics();
    let joined = tokio::spawn(explode_later(1)).await;
    let error = joined.expect_err("the task panics");
    assert!(error.is_panic());
    let payload = error.into_panic();
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"async boom"));
    assert_eq!(tokio::spawn(explode_later(0)).await.ok(), Some(0));
    m.collect().assert_one_panic("explode_later", 2);
}

#[test]
fn panic_in_a_future_polled_by_hand_is_counted_once() {
    let m = metrics();
    let mut fut = Box::pin(explode_by_hand());
    let mut cx = Context::from_waker(Waker::noop());
    assert!(fut.as_mut().poll(&mut cx).is_pending()); // yield_now
    let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
    assert!(caught.is_err());
    // In flight drops at the panic, not when the poisoned future is finally dropped.
    let s = m.collect();
    assert_eq!(s.up_down("function.in_flight", &f("explode_by_hand")), 0);
    assert_eq!(s.counter("function.errors", &f("explode_by_hand")), 1);
    drop(fut);
    let s = m.collect();
    assert_eq!(s.up_down("function.in_flight", &f("explode_by_hand")), 0);
    assert_eq!(s.counter("function.errors", &f("explode_by_hand")), 1);
}
