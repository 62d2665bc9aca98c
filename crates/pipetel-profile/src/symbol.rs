//! Addresses to function names, outside the signal handler: demangled, without the hash,
//! inlined functions as frames of their own, each address resolved once.
//!
//! The program and its own libraries are resolved through their symbol tables and, where they
//! have it, their debug information. The system's shared libraries (`/lib`, `/usr/lib`: libc,
//! the interpreter) are named by their exported symbols alone: their separate debug files,
//! when installed, are large and compressed, and reading them cost more than a whole run's
//! sampling. So is the Python interpreter wherever it is installed (its frames stand for Python
//! code, which the Python sampler names).

use std::collections::HashMap;
use std::ffi::CStr;

/// One address resolved.
#[derive(Debug, Clone)]
struct Resolved {
    /// Outermost first (an address inside inlined code gives several).
    names: Vec<String>,
    /// The address lies in the Python interpreter (libpython or the `python` executable).
    interpreter: bool,
}

/// The symboliser's cache.
#[derive(Debug, Default)]
pub(crate) struct Symbols {
    cache: HashMap<(usize, bool), Resolved>,
    /// The base address of the object holding the Python interpreter, in a Python process.
    interpreter: Option<Option<usize>>,
}

impl Symbols {
    /// Names for one address, outermost first. `caller`: a return address (the call is the
    /// instruction before it), rather than the interrupted instruction itself.
    fn resolve(&mut self, ip: usize, caller: bool) -> &Resolved {
        let interpreter = *self.interpreter.get_or_insert_with(interpreter_base);
        self.cache.entry((ip, caller)).or_insert_with(|| {
            let lookup = if caller { ip.saturating_sub(1) } else { ip };
            let object = object_of(lookup);
            let mut names = Vec::new();
            match &object {
                // The interpreter's own frames stand for Python code, whose frames the Python
                // sampler gives: never worth reading its debug information.
                Some(o) if is_system(&o.path) || Some(o.base) == interpreter => names.extend(o.symbol.clone()),
                _ => backtrace::resolve(lookup as *mut std::ffi::c_void, |symbol| {
                    if let Some(name) = symbol.name() {
                        names.push(format!("{name:#}"));
                    }
                }),
            }
            if names.is_empty() {
                names.push(match &object {
                    Some(o) => format!("[{}]", short(&o.path)),
                    None => "[unknown]".to_string(),
                });
            }
            // The resolver gives the innermost inlined function first.
            names.reverse();
            let interpreter = interpreter.is_some() && object.as_ref().map(|o| Some(o.base)) == Some(interpreter);
            Resolved { names, interpreter }
        })
    }

    /// The frames of one sample, root first. `ips` are innermost first, starting at the
    /// interrupted instruction. With `python_only_native_leaf`, only the native frames inside
    /// the innermost interpreter frame are kept (the Python frames above them come from the
    /// Python sampler).
    pub(crate) fn frames(&mut self, ips: &[usize], python_only_native_leaf: bool) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        for (i, &ip) in ips.iter().enumerate() {
            let resolved = self.resolve(ip, i > 0);
            if python_only_native_leaf && resolved.interpreter {
                break;
            }
            // Innermost first here; reversed below.
            out.extend(resolved.names.iter().rev().cloned());
        }
        out.reverse();
        out
    }
}

fn short(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// A system library, or the kernel's vDSO: named by its exported symbols (see the module).
fn is_system(path: &str) -> bool {
    let system = ["/lib/", "/lib64/", "/usr/lib/", "/usr/lib64/"].iter().any(|dir| path.starts_with(dir))
        && !path.contains("/site-packages/")
        && !path.contains("/dist-packages/");
    system || path.starts_with("linux-vdso") || path.starts_with("linux-gate")
}

/// The object holding an address, and its nearest exported symbol.
#[derive(Debug)]
struct Object {
    base: usize,
    path: String,
    symbol: Option<String>,
}

/// The object holding `addr`.
fn object_of(addr: usize) -> Option<Object> {
    // SAFETY: dladdr only reads the loader's tables; `info` is written on success.
    let mut info: libc::Dl_info = unsafe { std::mem::zeroed() };
    #[allow(unsafe_code)]
    let found = unsafe { libc::dladdr(addr as *const libc::c_void, &mut info) } != 0;
    if !found {
        return None;
    }
    let path = if info.dli_fname.is_null() {
        String::new()
    } else {
        // SAFETY: dladdr gives a NUL-terminated path that lives as long as the object.
        unsafe { CStr::from_ptr(info.dli_fname) }.to_string_lossy().into_owned()
    };
    let symbol = (!info.dli_sname.is_null()).then(|| {
        // SAFETY: as above, for the symbol's name.
        unsafe { CStr::from_ptr(info.dli_sname) }.to_string_lossy().into_owned()
    });
    Some(Object { base: info.dli_fbase as usize, path, symbol })
}

/// The base address of the object that holds the Python interpreter, when this process runs one.
fn interpreter_base() -> Option<usize> {
    // SAFETY: dlsym on the default scope with a NUL-terminated name.
    let symbol = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"PyEval_EvalCode".as_ptr()) };
    if symbol.is_null() {
        return None;
    }
    object_of(symbol as usize).map(|o| o.base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[inline(never)]
    fn a_known_function() -> Vec<usize> {
        let mut ips = Vec::new();
        backtrace::trace(|frame| {
            ips.push(frame.ip() as usize);
            true
        });
        ips
    }

    #[test]
    fn addresses_resolve_to_their_functions_root_first_without_the_hash() {
        let ips = a_known_function();
        let mut symbols = Symbols::default();
        let frames = symbols.frames(&ips, false);
        let known = frames.iter().position(|f| f.ends_with("a_known_function")).expect("the function is named");
        let test =
            frames.iter().position(|f| f.ends_with("addresses_resolve_to_their_functions_root_first_without_the_hash"));
        assert!(test.is_some_and(|t| t < known), "the caller comes before the callee: {frames:?}");
        let hashed = |f: &String| f.rsplit("::").next().is_some_and(|l| l.len() == 17 && l.starts_with('h'));
        assert!(!frames.iter().any(hashed), "hashes are dropped: {frames:?}");
    }

    #[test]
    fn an_unknown_address_is_named_as_such() {
        let mut symbols = Symbols::default();
        assert_eq!(symbols.frames(&[8], false), ["[unknown]"]);
    }
}
