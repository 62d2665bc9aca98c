//! Values published through an atomic pointer: read with one load on a hot path, replaced
//! rarely, never freed while a reader may hold them.

use std::marker::PhantomData;
use std::ptr;
use std::sync::atomic::{AtomicPtr, Ordering};
use std::sync::Mutex;

/// One current value of `T` (or none), read without a lock; every value ever published stays
/// alive, at its address, until the `Published` drops, so a reader may keep using one it read
/// after another replaced it. For values replaced a bounded number of times (once per `init`).
pub(crate) struct Published<T> {
    /// Null, or a pointer into a box of `owned`.
    current: AtomicPtr<T>,
    // Boxed so published pointers stay valid when the vector grows.
    #[allow(clippy::vec_box)]
    owned: Mutex<Vec<Box<T>>>,
    /// Readers on other threads get `&T`: sharing needs `T: Sync` as well as `T: Send`.
    _shared: PhantomData<T>,
}

impl<T> Default for Published<T> {
    fn default() -> Self {
        Published { current: AtomicPtr::new(ptr::null_mut()), owned: Mutex::new(Vec::new()), _shared: PhantomData }
    }
}

impl<T> Published<T> {
    /// The current value, if one is published.
    #[inline]
    pub(crate) fn get(&self) -> Option<&T> {
        // SAFETY: `current` is null or points into a box `owned` keeps until `self` drops
        // (boxes are never removed or moved out), and the result borrows `self`. The box was
        // written before the Release store that published it, which this Acquire load sees.
        unsafe { self.current.load(Ordering::Acquire).as_ref() }
    }

    /// Publishes `value`; earlier values stay alive.
    pub(crate) fn publish(&self, value: T) -> &T {
        self.publish_matching(|_| false, || value)
    }

    /// Publishes the kept value `matches` picks or, when none does, the one `make` builds.
    pub(crate) fn publish_matching(&self, matches: impl Fn(&T) -> bool, make: impl FnOnce() -> T) -> &T {
        let mut owned = super::lock(&self.owned);
        let p = match owned.iter().find(|b| matches(b)) {
            Some(b) => ptr::from_ref::<T>(b).cast_mut(),
            None => {
                let boxed = Box::new(make());
                let p = ptr::from_ref::<T>(&boxed).cast_mut();
                owned.push(boxed);
                p
            }
        };
        self.current.store(p, Ordering::Release);
        drop(owned);
        // SAFETY: `p` points into a box `owned` keeps until `self` drops, and the result
        // borrows `self`.
        unsafe { &*p }
    }

    /// Publishes nothing: [`Published::get`] returns `None` until the next publication.
    pub(crate) fn unpublish(&self) {
        self.current.store(ptr::null_mut(), Ordering::Release);
    }
}

/// An atomic `Option<&'static T>`: values that live for the rest of the process, swapped
/// without a lock. Stores are Release and loads Acquire, so a reader sees the value as it was
/// written before it was stored.
pub(crate) struct StaticCell<T: 'static> {
    /// Null, or a pointer made from a `&'static T`.
    p: AtomicPtr<T>,
    /// Holds a `&'static T` in effect: `Send` and `Sync` only when `T: Sync`.
    _ref: PhantomData<&'static T>,
}

impl<T: std::fmt::Debug + 'static> std::fmt::Debug for StaticCell<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StaticCell").field(&self.get()).finish()
    }
}

impl<T: 'static> Default for StaticCell<T> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: 'static> StaticCell<T> {
    /// An empty cell.
    pub(crate) const fn new() -> Self {
        StaticCell { p: AtomicPtr::new(ptr::null_mut()), _ref: PhantomData }
    }

    fn raw(v: Option<&'static T>) -> *mut T {
        v.map_or(ptr::null_mut(), |r| ptr::from_ref(r).cast_mut())
    }

    fn from_raw(p: *mut T) -> Option<&'static T> {
        // SAFETY: every non-null pointer stored in a cell was made from a `&'static T`
        // (`raw`, or a box leaked in `replace`), and nothing writes through it.
        unsafe { p.as_ref() }
    }

    /// The value.
    #[inline]
    pub(crate) fn get(&self) -> Option<&'static T> {
        Self::from_raw(self.p.load(Ordering::Acquire))
    }

    /// Sets the value.
    #[inline]
    pub(crate) fn set(&self, v: Option<&'static T>) {
        self.p.store(Self::raw(v), Ordering::Release);
    }

    /// Replaces `seen` (what [`StaticCell::get`] returned) with `fresh`, leaked for the rest of
    /// the process, and returns it; when another thread replaced `seen` first, `fresh` is
    /// dropped and that thread's value returned instead. For values made a bounded number of
    /// times (once per call site and `init`).
    pub(crate) fn replace(&self, mut seen: Option<&'static T>, fresh: T) -> &'static T {
        let fresh = Box::into_raw(Box::new(fresh));
        loop {
            match self.p.compare_exchange(Self::raw(seen), fresh, Ordering::AcqRel, Ordering::Acquire) {
                // SAFETY: `fresh` is a box leaked above and never freed: valid for the rest of
                // the process, and nothing writes through it.
                Ok(_) => return unsafe { &*fresh },
                Err(winner) => match Self::from_raw(winner) {
                    Some(winner) => {
                        // SAFETY: `fresh` came from `Box::into_raw` above and was never
                        // published, so this is its only owner.
                        drop(unsafe { Box::from_raw(fresh) });
                        return winner;
                    }
                    // Someone cleared the cell meanwhile: try again from empty.
                    None => seen = None,
                },
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn published_values_stay_alive_and_are_found_again() {
        let p = Published::default();
        assert!(p.get().is_none());
        let first: *const u32 = p.publish(1);
        let second = p.publish_matching(|v| *v == 2, || 2);
        assert_eq!((*second, p.get()), (2, Some(&2)));
        let again = p.publish_matching(|v| *v == 1, || 9);
        assert!(ptr::eq(again, first), "the kept value is published again");
        p.unpublish();
        assert!(p.get().is_none());
    }

    #[test]
    fn a_static_cell_keeps_the_first_replacement() {
        static CELL: StaticCell<String> = StaticCell::new();
        assert!(CELL.get().is_none());
        let a = CELL.replace(None, "a".to_string());
        let b = CELL.replace(None, "b".to_string());
        assert_eq!((a.as_str(), b.as_str()), ("a", "a"), "a stale `seen` loses to the value in place");
        let c = CELL.replace(Some(a), "c".to_string());
        assert_eq!((c.as_str(), CELL.get().map(String::as_str)), ("c", Some("c")));
        CELL.set(None);
        assert!(CELL.get().is_none());
    }
}
