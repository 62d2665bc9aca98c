//! Every function shape the macro supports, without a direct dependency on `tracing`, and with
//! user names that the generated code must neither shadow nor be shadowed by.

use std::fmt::Debug;

#[pipetel::measure]
fn unit() {}

#[pipetel::measure(name = "custom", target = "my_target", level = "trace", stage = "s")]
fn early_return(x: i64) -> i64 {
    if x < 0 {
        return 0;
    }
    x
}

#[pipetel::measure(input_size = data.len(), output_size = ret.len())]
fn question_mark(data: &[u8]) -> Result<Vec<u8>, std::str::Utf8Error> {
    let s = std::str::from_utf8(data)?;
    Ok(s.as_bytes().to_vec())
}

#[pipetel::measure(output_size = ret.len())]
fn io_result(path: &str) -> std::io::Result<String> {
    Ok(path.to_owned())
}

#[pipetel::measure(skip(items))]
fn generic<T: Debug + Clone>(items: &[T], n: usize) -> Vec<T> {
    items.iter().take(n).cloned().collect()
}

#[pipetel::measure]
fn returns_impl(n: u32) -> impl Iterator<Item = u32> {
    0..n
}

#[pipetel::measure(output_size = |v: &Vec<u32>| v.len())]
fn returns_impl_in_result(n: u32) -> Result<Vec<u32>, String> {
    Ok((0..n).collect())
}

#[pipetel::measure]
fn borrows<'a>(s: &'a str) -> &'a str {
    &s[..1]
}

/// Hygiene: the user's own names that the generated code also uses.
#[pipetel::measure(input_size = ret, fields(call = 1))]
fn user_names(ret: u64, __pipetel_call: u64, span: u64) -> u64 {
    let __pipetel_ret = ret + __pipetel_call + span;
    __pipetel_ret
}

/// A user field called `error` is left alone.
#[pipetel::measure(fields(error = "preset"))]
fn own_error_field() -> Result<(), ()> {
    Err(())
}

#[derive(Debug)]
struct Service {
    n: u32,
}

impl Service {
    #[pipetel::measure]
    fn by_ref(&self) -> u32 {
        self.n
    }

    #[pipetel::measure(skip(self), level = Level::DEBUG)]
    fn by_mut(&mut self, by: u32) {
        self.n += by;
    }

    #[pipetel::measure(skip_all)]
    fn by_value(self) -> u32 {
        self.n
    }

    #[pipetel::measure(skip(self))]
    async fn async_method(&self, wait: u32) -> Result<u32, String> {
        let n = std::future::ready(wait).await;
        if n == 0 {
            return Err("zero".into());
        }
        Ok(self.n + n)
    }
}

trait Store {
    fn get(&self, key: &str) -> Option<String>;
}

impl Store for Service {
    #[pipetel::measure(skip(self))]
    fn get(&self, key: &str) -> Option<String> {
        let first = key.chars().next()?;
        Some(first.to_string())
    }
}

#[pipetel::measure(input_size = batch.len())]
async fn async_free(batch: Vec<u8>) -> usize {
    std::future::ready(()).await;
    batch.len()
}

fn assert_send<T: Send>(_: &T) {}

fn main() {
    unit();
    let _ = early_return(3);
    let _ = question_mark(b"abc");
    let _ = io_result("p");
    let _ = generic(&[1, 2, 3], 2);
    let _ = returns_impl(3).count();
    let _ = returns_impl_in_result(2);
    let _ = borrows("xy");
    let _ = user_names(1, 2, 3);
    let _ = own_error_field();
    let mut service = Service { n: 1 };
    service.by_mut(2);
    let _ = service.by_ref();
    let _ = service.get("k");
    let fut = service.async_method(1);
    assert_send(&fut);
    drop(fut);
    let fut = async_free(vec![1]);
    assert_send(&fut);
    drop(fut);
    let _ = service.by_value();
}
