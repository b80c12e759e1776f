//! The `define_codes!` macro shared by [`RequestCode`](super::RequestCode) and
//! [`ResponseCode`](super::ResponseCode).
//!
//! A code is an `i32` newtype rather than a Rust enum: peers send codes we do not know, and an
//! unknown code must survive decoding so that the server can answer "request type N not
//! supported" with the number it was given.

/// Defines a code newtype with one associated constant per known code and a name lookup.
macro_rules! define_codes {
    (
        $(#[$meta:meta])*
        $name:ident { $($code:ident = $value:expr,)* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub struct $name(pub i32);

        #[allow(missing_docs)]
        impl $name {
            $(pub const $code: $name = $name($value);)*

            /// Every known code with its Java name, in ascending numeric order.
            pub const ALL: &'static [(&'static str, $name)] =
                &[$((stringify!($code), $name($value)),)*];

            /// The Java constant name of this code, if it is one ferromq knows.
            #[must_use]
            pub fn name(self) -> Option<&'static str> {
                match self.0 {
                    $($value => Some(stringify!($code)),)*
                    _ => None,
                }
            }
        }

        impl std::fmt::Debug for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                match self.name() {
                    Some(name) => write!(f, "{}({})", name, self.0),
                    None => write!(f, "{}", self.0),
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                std::fmt::Debug::fmt(self, f)
            }
        }

        impl From<i32> for $name {
            fn from(code: i32) -> Self {
                $name(code)
            }
        }
    };
}

pub(crate) use define_codes;
