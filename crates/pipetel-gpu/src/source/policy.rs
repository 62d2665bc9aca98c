//! The polling policy every vendor source follows, in one place: which fields a device still
//! answers, what an error means, when a device counts as failed or back, and what is logged.
//!
//! - A field (one vendor query) that answers "not supported", "no permission" or names a
//!   symbol the library lacks is [`ErrorClass::Unsupported`]: remembered per device and never
//!   asked again, so a missing feature costs one call, not one per poll (logged at debug).
//! - An error saying the device is gone is [`ErrorClass::Lost`]: the rest of the poll is
//!   skipped and the device reports failed for that poll.
//! - Anything else is [`ErrorClass::Transient`]: no value this poll, asked again next poll;
//!   the first time per field is a warning, later times are debug lines.
//! - A device's failed / answering transitions are logged once each way.
//!
//! A source only maps its vendor's errors onto [`ErrorClass`] ([`ReadError`]) and names its
//! fields ([`Field`]); [`DevicePolicy`] and [`Poll`] do the rest.

use std::fmt;
use std::sync::Arc;

use super::{DeviceInfo, DeviceSample};

/// What to do after a failed read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ErrorClass {
    /// The device (or library) cannot answer this query: stop asking.
    Unsupported,
    /// The device is gone: report it failed this poll.
    Lost,
    /// Skip this poll, retry the next.
    Transient,
}

/// A vendor error the policy can classify and print.
pub(crate) trait ReadError: fmt::Display {
    /// What the error means for the field and the device.
    fn class(&self) -> ErrorClass;
}

/// One vendor query of a device: the unit of "this device cannot do that, stop asking".
/// Implemented by fieldless enums of at most 32 variants.
pub(crate) trait Field: Copy {
    /// The field's position in a [`DevicePolicy`]'s bit sets (its discriminant).
    fn position(self) -> u32;
    /// The vendor function behind the field, for log lines.
    fn call(self) -> &'static str;

    /// The field's bit.
    fn bit(self) -> u32 {
        1 << self.position()
    }
}

/// Declares a vendor's fieldless enum of queries and its [`Field`] implementation from one
/// table: each variant, or `|`-joined variants read by one call, with the vendor function behind
/// it. The variants' order is their [`Field::position`].
macro_rules! fields {
    ($(#[$doc:meta])* $vis:vis $name:ident { $($($variant:ident)|+ => $call:literal,)+ }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        $vis enum $name {
            $($($variant,)+)+
        }

        impl $crate::source::policy::Field for $name {
            fn position(self) -> u32 {
                self as u32
            }

            fn call(self) -> &'static str {
                match self {
                    $($(Self::$variant)|+ => $call,)+
                }
            }
        }
    };
}
pub(crate) use fields;

/// What the policy remembers about one device between polls.
#[derive(Debug, Clone, Default)]
pub(crate) struct DevicePolicy {
    /// Fields that answered [`ErrorClass::Unsupported`]: never asked again.
    unsupported: u32,
    /// Fields whose transient error was already logged at warn level.
    warned: u32,
    /// Whether the previous poll found the device failed (to log transitions only).
    failed: bool,
}

impl DevicePolicy {
    /// A device that answered when the source opened.
    pub(crate) fn answering() -> Self {
        Self::default()
    }

    /// A device that did not answer when the source opened (already logged by the source).
    pub(crate) fn failed() -> Self {
        Self { failed: true, ..Self::default() }
    }

    /// Whether the previous poll found the device failed.
    pub(crate) fn is_failed(&self) -> bool {
        self.failed
    }

    /// Whether `field` is still asked.
    pub(crate) fn supports(&self, field: impl Field) -> bool {
        self.unsupported & field.bit() == 0
    }

    /// The sample of one poll: `read` is `None` when the device turned out lost (or its
    /// handle could not be had), so a half-read device never mixes values with a failed
    /// status. Logs the failed / answering transitions.
    pub(crate) fn settle(&mut self, info: &Arc<DeviceInfo>, read: Option<DeviceSample>) -> DeviceSample {
        match read {
            Some(sample) => {
                if self.failed {
                    tracing::info!(gpu.index = info.index, "GPU answers again");
                    self.failed = false;
                }
                sample
            }
            None => {
                if !self.failed {
                    tracing::warn!(gpu.index = info.index, gpu.id = %info.id, "GPU lost; reporting it as failed");
                    self.failed = true;
                }
                DeviceSample::failed(Arc::clone(info))
            }
        }
    }
}

/// The answer for one part of a field (one fan, one ECC block).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PartRead<T> {
    /// The part answered.
    Value(T),
    /// The part cannot answer: the source stops asking it.
    Drop,
    /// No value this poll (a transient error, or the device is lost).
    Skip,
}

/// The reads of one device in one poll; stops asking once the device is found lost.
#[derive(Debug)]
pub(crate) struct Poll<'a> {
    index: u32,
    policy: &'a mut DevicePolicy,
    lost: bool,
}

impl<'a> Poll<'a> {
    /// A poll of device `index`.
    pub(crate) fn new(index: u32, policy: &'a mut DevicePolicy) -> Self {
        Self { index, policy, lost: false }
    }

    /// Whether a read of this poll found the device lost.
    pub(crate) fn is_lost(&self) -> bool {
        self.lost
    }

    /// Whether `field` is asked in this poll (the device is not lost and answers it).
    pub(crate) fn wants(&self, field: impl Field) -> bool {
        !self.lost && self.policy.supports(field)
    }

    /// Stops asking `field` from now on (e.g. every part of it turned out unsupported).
    // Fallbacks and parts dropped one by one are ROCm SMI's (feature `amd`).
    #[cfg_attr(not(feature = "amd"), allow(dead_code))]
    pub(crate) fn drop_field(&mut self, field: impl Field) {
        self.policy.unsupported |= field.bit();
    }

    /// Reads `field` with `call` unless it is not wanted; an error is handled by the policy
    /// and gives `None`.
    pub(crate) fn read<F: Field, T, E: ReadError>(
        &mut self,
        field: F,
        call: impl FnOnce() -> Result<T, E>,
    ) -> Option<T> {
        if !self.wants(field) {
            return None;
        }
        call().map_err(|e| self.failed(field, &e)).ok()
    }

    /// Reads `first`; once the device has said `first` is unsupported, reads `fallback`
    /// instead (e.g. data-centre parts report socket power, not average power).
    #[cfg_attr(not(feature = "amd"), allow(dead_code))]
    pub(crate) fn read_or<F: Field, T, E: ReadError>(
        &mut self,
        first: F,
        fallback: F,
        call: impl Fn(F) -> Result<T, E>,
    ) -> Option<T> {
        let value = self.read(first, || call(first));
        if value.is_none() && !self.policy.supports(first) {
            return self.read(fallback, || call(fallback));
        }
        value
    }

    /// Reads one `part` of `field` (a fan, an ECC block). A part that cannot answer is
    /// [`PartRead::Drop`] for the caller to forget; other errors count against `field`.
    pub(crate) fn read_part<F: Field, T, E: ReadError>(
        &mut self,
        field: F,
        part: u64,
        call: impl FnOnce() -> Result<T, E>,
    ) -> PartRead<T> {
        if self.lost {
            return PartRead::Skip;
        }
        match call() {
            Ok(v) => PartRead::Value(v),
            Err(e) if e.class() == ErrorClass::Unsupported => {
                tracing::debug!(gpu.index = self.index, call = field.call(), part, error = %e,
                    "GPU field not available for this part; no longer read");
                PartRead::Drop
            }
            Err(e) => {
                self.failed(field, &e);
                PartRead::Skip
            }
        }
    }

    /// Applies the policy to an error of `field`; returns its class.
    fn failed(&mut self, field: impl Field, error: &impl ReadError) -> ErrorClass {
        let class = error.class();
        let (index, call) = (self.index, field.call());
        match class {
            ErrorClass::Unsupported => {
                self.policy.unsupported |= field.bit();
                tracing::debug!(gpu.index = index, call, error = %error, "GPU field not available; no longer read");
            }
            ErrorClass::Lost => self.lost = true,
            ErrorClass::Transient if self.policy.warned & field.bit() == 0 => {
                self.policy.warned |= field.bit();
                tracing::warn!(gpu.index = index, call, error = %error,
                    "GPU field read failed; skipped this poll, retried next poll");
            }
            ErrorClass::Transient => {
                tracing::debug!(gpu.index = index, call, error = %error, "GPU field read failed again");
            }
        }
        class
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fields!(TestField { A | B => "test_call", });

    struct TestError(ErrorClass);

    impl fmt::Display for TestError {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{:?}", self.0)
        }
    }

    impl ReadError for TestError {
        fn class(&self) -> ErrorClass {
            self.0
        }
    }

    fn fails(class: ErrorClass) -> impl FnOnce() -> Result<u32, TestError> {
        move || Err(TestError(class))
    }

    #[test]
    fn unsupported_fields_are_not_asked_again_and_transient_ones_are() {
        let mut policy = DevicePolicy::answering();
        let mut p = Poll::new(0, &mut policy);
        assert_eq!(p.read(TestField::A, fails(ErrorClass::Unsupported)), None);
        assert_eq!(p.read(TestField::B, fails(ErrorClass::Transient)), None);
        assert!(!p.is_lost());
        assert!(!policy.supports(TestField::A));
        assert!(policy.supports(TestField::B));
        let mut p = Poll::new(0, &mut policy);
        assert_eq!(p.read(TestField::A, || Ok::<_, TestError>(1)), None, "an unsupported field is not asked");
        assert_eq!(p.read(TestField::B, || Ok::<_, TestError>(2)), Some(2));
    }

    #[test]
    fn a_lost_device_stops_the_poll_and_the_fallback_follows_unsupported_only() {
        let mut policy = DevicePolicy::answering();
        let mut p = Poll::new(0, &mut policy);
        assert_eq!(p.read_or(TestField::A, TestField::B, |_| Err::<u32, _>(TestError(ErrorClass::Transient))), None);
        assert!(policy.supports(TestField::B));
        let mut p = Poll::new(0, &mut policy);
        let value = p.read_or(TestField::A, TestField::B, |f| match f {
            TestField::A => Err(TestError(ErrorClass::Unsupported)),
            TestField::B => Ok(7),
        });
        assert_eq!(value, Some(7));
        assert_eq!(p.read_part(TestField::B, 3, fails(ErrorClass::Unsupported)), PartRead::Drop);
        assert_eq!(p.read_part(TestField::B, 4, fails(ErrorClass::Lost)), PartRead::Skip);
        assert!(p.is_lost());
        assert_eq!(p.read(TestField::B, || Ok::<_, TestError>(1)), None, "nothing is asked of a lost device");
        assert_eq!(p.read_part(TestField::B, 5, || Ok::<_, TestError>(1)), PartRead::Skip);
    }

    #[test]
    fn settle_reports_failed_until_the_device_answers_again() {
        let info = Arc::new(DeviceInfo::new(0, "id".into(), "n".into(), "test"));
        let mut policy = DevicePolicy::failed();
        assert!(policy.is_failed());
        let ok = policy.settle(&info, Some(DeviceSample::new(Arc::clone(&info))));
        assert_eq!(ok.status, crate::DeviceStatus::Ok);
        assert!(!policy.is_failed());
        let failed = policy.settle(&info, None);
        assert_eq!(failed.status, crate::DeviceStatus::Failed);
        assert!(policy.is_failed());
    }
}
