//! A builder's plain setters written once (`setters!`), for every option
//! type of the crate. A leaf module: the rooms that use it point at nothing
//! else through it.

/// A builder's plain setters, one line each: `name: T` sets the field
/// `name` to the value, `name: impl T` to `value.into()` (the argument is
/// `impl Into<T>`), and a leading `Some` wraps either in `Some`;
/// `name: callback(A, B)` boxes an `impl FnMut(A, B) + Send + 'static` into
/// `Some`, and `name: shared callback(A)` puts an `impl Fn(A) + Send + Sync +
/// 'static` in `Some(Arc)`. Each setter
/// is `#[must_use]` (none is after a leading `unmarked;`, for a type that is
/// `#[must_use]` itself) and carries the doc comments written above its line;
/// after a leading `in field;` (after `unmarked;`, if both) the setters set
/// `self.field.name`.
macro_rules! setters {
    (@with [$($must:tt)*] [$($path:tt)*]) => {};
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: callback($($arg:ty),*); $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, callback: impl FnMut($($arg),*) + Send + 'static) -> Self {
            self$(.$path)*.$name = Some(Box::new(callback));
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: shared callback($($arg:ty),*); $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, callback: impl Fn($($arg),*) + Send + Sync + 'static) -> Self {
            self$(.$path)*.$name = Some(::std::sync::Arc::new(callback));
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: Some impl $ty:ty; $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, $name: impl Into<$ty>) -> Self {
            self$(.$path)*.$name = Some($name.into());
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: impl $ty:ty; $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, $name: impl Into<$ty>) -> Self {
            self$(.$path)*.$name = $name.into();
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: Some $ty:ty; $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, $name: $ty) -> Self {
            self$(.$path)*.$name = Some($name);
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    (@with [$($must:tt)*] [$($path:tt)*] $(#[$doc:meta])* $name:ident: $ty:ty; $($rest:tt)*) => {
        $(#[$doc])*
        $($must)*
        pub fn $name(mut self, $name: $ty) -> Self {
            self$(.$path)*.$name = $name;
            self
        }
        $crate::setters::setters!(@with [$($must)*] [$($path)*] $($rest)*);
    };
    // For a type that is `#[must_use]` itself: clippy refuses the attribute
    // again on its methods.
    (unmarked; in $field:tt; $($setters:tt)*) => {
        $crate::setters::setters!(@with [] [$field] $($setters)*);
    };
    (unmarked; $($setters:tt)*) => {
        $crate::setters::setters!(@with [] [] $($setters)*);
    };
    // For options kept in a field of the type (`in settings;`): each
    // setter sets `self.settings.name`.
    (in $field:tt; $($setters:tt)*) => {
        $crate::setters::setters!(@with [#[must_use]] [$field] $($setters)*);
    };
    ($($setters:tt)*) => {
        $crate::setters::setters!(@with [#[must_use]] [] $($setters)*);
    };
}
pub(crate) use setters;
