//! The one `unsafe` method of `tracing_subscriber::Layer` a wrapping layer must forward.

/// Writes `downcast_raw` for a `Layer` impl whose layer wraps another one in the field
/// `$inner`: it answers for its own type and forwards every other type id to the inner layer,
/// so a subscriber still finds what the inner layer exposes (the OTel bridge finds its
/// span-context accessors this way).
///
/// Use it inside `impl<S> Layer<S> for Wrapper { ... }`:
/// `crate::sync::forward_downcast_raw!(inner);`. With `inner, field: Type, ...` it also answers
/// for each `Type` with a pointer to `self.field` (so a subscriber finds a wrapper's own state).
macro_rules! forward_downcast_raw {
    ($inner:ident, $($field:ident: $ty:ty),+ $(,)?) => {
        // Allowed here, expanded from `sync`: the contract is the trait's, checked below.
        #[allow(unsafe_code)]
        // SAFETY: returns a pointer to `self` for `Self`'s own type id and to `self.$field`, of
        // type `$ty`, for `$ty`'s, both valid as long as `self`, which is what the trait's
        // contract asks; every other id gets the inner layer's answer under the same contract.
        unsafe fn downcast_raw(&self, id: ::std::any::TypeId) -> ::std::option::Option<*const ()> {
            if id == ::std::any::TypeId::of::<Self>() {
                return ::std::option::Option::Some(::std::ptr::from_ref(self).cast());
            }
            $(
                if id == ::std::any::TypeId::of::<$ty>() {
                    let field: &$ty = &self.$field;
                    return ::std::option::Option::Some(::std::ptr::from_ref(field).cast());
                }
            )+
            // SAFETY: forwarded under the same contract.
            unsafe { self.$inner.downcast_raw(id) }
        }
    };
    ($inner:ident) => {
        // Allowed here, expanded from `sync`: the contract is the trait's, checked below.
        #[allow(unsafe_code)]
        // SAFETY: returns a pointer to `self` only for `Self`'s own type id, which is what the
        // trait's contract asks; every other id gets the inner layer's answer under the same
        // contract.
        unsafe fn downcast_raw(&self, id: ::std::any::TypeId) -> ::std::option::Option<*const ()> {
            if id == ::std::any::TypeId::of::<Self>() {
                ::std::option::Option::Some(::std::ptr::from_ref(self).cast())
            } else {
                // SAFETY: forwarded under the same contract.
                unsafe { self.$inner.downcast_raw(id) }
            }
        }
    };
}

pub(crate) use forward_downcast_raw;
