//! What the `input_size` / `output_size` expressions may return.

/// A size the `input_size` / `output_size` expressions may return: any primitive number
/// (negative and NaN count as zero, fractions are truncated).
pub trait Size {
    /// The size as recorded.
    fn into_size(self) -> u64;
}

macro_rules! size_unsigned {
    ($($t:ty),*) => {$(
        impl Size for $t {
            #[inline]
            fn into_size(self) -> u64 {
                u64::try_from(self).unwrap_or(u64::MAX)
            }
        }
    )*};
}
macro_rules! size_signed {
    ($($t:ty),*) => {$(
        impl Size for $t {
            #[inline]
            fn into_size(self) -> u64 {
                u64::try_from(self).unwrap_or(0)
            }
        }
    )*};
}
size_unsigned!(u8, u16, u32, u64, u128, usize);
size_signed!(i8, i16, i32, i64, i128, isize);

impl Size for f64 {
    #[inline]
    fn into_size(self) -> u64 {
        // `as` saturates and maps NaN to 0.
        self as u64
    }
}

impl Size for f32 {
    #[inline]
    fn into_size(self) -> u64 {
        f64::from(self).into_size()
    }
}

impl<N: Size + Copy> Size for &N {
    #[inline]
    fn into_size(self) -> u64 {
        (*self).into_size()
    }
}
