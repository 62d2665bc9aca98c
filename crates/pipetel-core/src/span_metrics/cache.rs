//! The callsite cache: each callsite resolved once, then found without a lock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, RwLock};

use tracing::Metadata;

use super::direct;
use super::site::Site;
use crate::sync::StaticCell;

/// Slots a lookup or an insertion probes before giving up (the callsite cache).
const PROBES: usize = 16;

/// Resolved callsites, keyed by their metadata's address: a fixed table read without locks,
/// written under `writer`'s lock; callsites beyond it go to `overflow`. Sites are leaked: they
/// live for the rest of the process (see the module docs).
pub(super) struct SiteCache {
    keys: Box<[AtomicUsize]>,
    /// The site of the callsite whose key is in the same slot; none for a callsite whose spans
    /// do not count.
    values: Box<[StaticCell<Site>]>,
    writer: Mutex<()>,
    overflow: RwLock<HashMap<usize, Option<&'static Site>>>,
}

const SITE_SLOTS: usize = 512;

impl Default for SiteCache {
    fn default() -> Self {
        SiteCache {
            keys: (0..SITE_SLOTS).map(|_| AtomicUsize::new(0)).collect(),
            values: (0..SITE_SLOTS).map(|_| StaticCell::new()).collect(),
            writer: Mutex::new(()),
            overflow: RwLock::new(HashMap::new()),
        }
    }
}

impl SiteCache {
    #[inline]
    pub(super) fn get(
        &self,
        meta: &'static Metadata<'static>,
        resolve: impl FnOnce(&'static Metadata<'static>) -> Option<Site>,
    ) -> Option<&'static Site> {
        let key = std::ptr::from_ref(meta) as usize;
        let home = crate::sync::spread(key as u64) % SITE_SLOTS;
        for i in 0..PROBES {
            let at = (home + i) % SITE_SLOTS;
            match self.keys[at].load(Ordering::Acquire) {
                k if k == key => return self.values[at].get(),
                0 => break,
                _ => {}
            }
        }
        self.get_slow(key, meta, resolve)
    }

    #[cold]
    #[inline(never)]
    fn get_slow(
        &self,
        key: usize,
        meta: &'static Metadata<'static>,
        resolve: impl FnOnce(&'static Metadata<'static>) -> Option<Site>,
    ) -> Option<&'static Site> {
        if let Some(site) = crate::sync::read(&self.overflow).get(&key) {
            return *site;
        }
        let writer = crate::sync::lock(&self.writer);
        // Another thread may have resolved it meanwhile.
        let home = crate::sync::spread(key as u64) % SITE_SLOTS;
        let mut free = None;
        for i in 0..PROBES {
            let at = (home + i) % SITE_SLOTS;
            match self.keys[at].load(Ordering::Acquire) {
                k if k == key => return self.values[at].get(),
                0 => {
                    free = Some(at);
                    break;
                }
                _ => {}
            }
        }
        if let Some(site) = crate::sync::read(&self.overflow).get(&key) {
            return *site;
        }
        let site: Option<&'static Site> = resolve(meta).map(|site| &*Box::leak(Box::new(site)));
        if let Some(site) = site {
            direct::add(site);
        }
        match free {
            Some(at) => {
                // The value first: a reader that sees the key must see it.
                self.values[at].set(site);
                self.keys[at].store(key, Ordering::Release);
            }
            None => {
                crate::sync::write(&self.overflow).insert(key, site);
            }
        }
        drop(writer);
        site
    }
}
