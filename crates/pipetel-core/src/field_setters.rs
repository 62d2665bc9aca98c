//! Builder methods that each set one field.

/// Declares builder methods that take `self` by value, set one field and return `self`:
/// `fn name(field: Type);` stores the argument in the field of its name, `fn name(field: Type)
/// = expr;` stores `expr` (a conversion of the argument). Attributes (docs, `#[must_use]`) carry
/// over.
macro_rules! field_setters {
    ($(
        $(#[$meta:meta])*
        $vis:vis fn $name:ident($field:ident: $ty:ty) $(= $value:expr)?;
    )+) => {$(
        $(#[$meta])*
        $vis fn $name(mut self, $field: $ty) -> Self {
            self.$field = $crate::field_setters::field_setters!(@value $field $(, $value)?);
            self
        }
    )+};
    (@value $field:ident) => {
        $field
    };
    (@value $field:ident, $value:expr) => {
        $value
    };
}
pub(crate) use field_setters;
