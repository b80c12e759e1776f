//! Typed custom headers and their mapping to `extFields`.
//!
//! Mirrors `CommandCustomHeader` and `RemotingCommand.makeCustomHeaderToNet` /
//! `decodeCommandCustomHeader` (`reference/remoting.md` §5.1): each field of a header becomes
//! one extFields entry keyed by the Java field name, with the value as text.
//!
//! Decoding is as lenient as Java's and no more:
//! - integers parse with Java's `Integer.parseInt` / `Long.parseLong` rules (an optional sign,
//!   decimal digits);
//! - booleans are `true` when the text equals `true` ignoring case, anything else is `false`;
//! - an optional field whose text does not parse is treated as absent (Java logs and leaves it
//!   null);
//! - a required (`@CFNotNull`) field that is absent or unparsable is a [`HeaderError`]. Java
//!   leaves it null and the processor then fails with SYSTEM_ERROR; ferromq answers the same
//!   code with the remark Java's decoder logs, `the custom field <name> is null`.

use super::command::ExtFields;

/// The Java type of one header field, for schema-driven tests and tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// `String`.
    Text,
    /// `Integer` / `int`.
    Int,
    /// `Long` / `long`.
    Long,
    /// `Boolean` / `boolean`.
    Bool,
    /// `Double` / `double`.
    Double,
}

/// One field of a header's schema.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FieldInfo {
    /// The extFields key (the Java field name).
    pub key: &'static str,
    /// The value type.
    pub kind: ValueKind,
    /// Whether Java marks it `@CFNotNull`.
    pub required: bool,
}

/// A typed custom header (`CommandCustomHeader` in Java).
pub trait CommandHeader: Sized {
    /// The fields, in declaration order.
    const FIELDS: &'static [FieldInfo];

    /// Reads the header from a command's extFields.
    ///
    /// # Errors
    /// [`HeaderError`] when a required field is missing or does not parse.
    fn read_from(fields: &ExtFields) -> Result<Self, HeaderError>;

    /// Writes every non-null field into `fields`.
    fn write_to(&self, fields: &mut ExtFields);
}

/// A required header field is missing or unparsable.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// The field is absent (or its text did not parse as the field's type).
    #[error("the custom field <{field}> is null")]
    MissingField {
        /// The Java field name, which is also the extFields key.
        field: &'static str,
    },
}

/// A type that can be one extFields value.
pub trait HeaderValue: Sized {
    /// The Java type.
    const KIND: ValueKind;
    /// Parses the text as Java would, `None` where Java would fail.
    fn parse_value(text: &str) -> Option<Self>;
    /// Formats as Java's `String.valueOf`.
    fn format_value(&self) -> String;
}

impl HeaderValue for String {
    const KIND: ValueKind = ValueKind::Text;
    fn parse_value(text: &str) -> Option<Self> {
        Some(text.to_owned())
    }
    fn format_value(&self) -> String {
        self.clone()
    }
}

impl HeaderValue for bool {
    const KIND: ValueKind = ValueKind::Bool;
    fn parse_value(text: &str) -> Option<Self> {
        Some(text.eq_ignore_ascii_case("true"))
    }
    fn format_value(&self) -> String {
        self.to_string()
    }
}

impl HeaderValue for f64 {
    const KIND: ValueKind = ValueKind::Double;
    fn parse_value(text: &str) -> Option<Self> {
        text.trim().parse().ok()
    }
    fn format_value(&self) -> String {
        self.to_string()
    }
}

macro_rules! java_integer_value {
    ($($ty:ty => $kind:ident),*) => {$(
        impl HeaderValue for $ty {
            const KIND: ValueKind = ValueKind::$kind;
            fn parse_value(text: &str) -> Option<Self> {
                // Java accepts a leading '+' or '-' and decimal digits only, no whitespace.
                let digits = text.strip_prefix('+').unwrap_or(text);
                if digits.starts_with('+') || digits.is_empty() {
                    return None;
                }
                digits.parse().ok()
            }
            fn format_value(&self) -> String {
                self.to_string()
            }
        }
    )*};
}
java_integer_value!(i32 => Int, i64 => Long);

/// One field of a typed header: a required `T` or an optional `Option<T>`.
pub trait HeaderField: Sized {
    /// The Java type of the field.
    const KIND: ValueKind;
    /// Whether the field is required.
    const REQUIRED: bool;
    /// Reads the field named `key`.
    ///
    /// # Errors
    /// [`HeaderError::MissingField`] for a required field that is absent or unparsable.
    fn read_field(fields: &ExtFields, key: &'static str) -> Result<Self, HeaderError>;
    /// Writes the field unless it is null.
    fn write_field(&self, fields: &mut ExtFields, key: &'static str);
}

macro_rules! header_field {
    ($($ty:ty),*) => {$(
        impl HeaderField for $ty {
            const KIND: ValueKind = <$ty as HeaderValue>::KIND;
            const REQUIRED: bool = true;
            fn read_field(fields: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
                fields
                    .get(key)
                    .and_then(<$ty as HeaderValue>::parse_value)
                    .ok_or(HeaderError::MissingField { field: key })
            }
            fn write_field(&self, fields: &mut ExtFields, key: &'static str) {
                fields.insert(key, self.format_value());
            }
        }

        impl HeaderField for Option<$ty> {
            const KIND: ValueKind = <$ty as HeaderValue>::KIND;
            const REQUIRED: bool = false;
            fn read_field(fields: &ExtFields, key: &'static str) -> Result<Self, HeaderError> {
                Ok(fields.get(key).and_then(<$ty as HeaderValue>::parse_value))
            }
            fn write_field(&self, fields: &mut ExtFields, key: &'static str) {
                if let Some(value) = self {
                    fields.insert(key, value.format_value());
                }
            }
        }
    )*};
}
header_field!(String, bool, i32, i64, f64);

/// Defines a typed header struct and its [`CommandHeader`] impl.
///
/// Each field is `rust_name: Type = "javaKey"`; `Option<T>` marks an optional field.
macro_rules! command_header {
    (
        $(#[$meta:meta])*
        pub struct $name:ident {
            $(
                $(#[$field_meta:meta])*
                $field:ident : $ty:ty = $key:literal
            ),* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Debug, Default, PartialEq)]
        pub struct $name {
            $(
                $(#[$field_meta])*
                pub $field: $ty,
            )*
        }

        impl $crate::remoting::header::CommandHeader for $name {
            const FIELDS: &'static [$crate::remoting::header::FieldInfo] = &[$(
                $crate::remoting::header::FieldInfo {
                    key: $key,
                    kind: <$ty as $crate::remoting::header::HeaderField>::KIND,
                    required: <$ty as $crate::remoting::header::HeaderField>::REQUIRED,
                },
            )*];

            #[allow(unused_variables)]
            fn read_from(
                fields: &$crate::remoting::ExtFields,
            ) -> Result<Self, $crate::remoting::header::HeaderError> {
                Ok($name {
                    $($field: <$ty as $crate::remoting::header::HeaderField>::read_field(
                        fields, $key,
                    )?,)*
                })
            }

            #[allow(unused_variables)]
            fn write_to(&self, fields: &mut $crate::remoting::ExtFields) {
                $($crate::remoting::header::HeaderField::write_field(&self.$field, fields, $key);)*
            }
        }
    };
}

pub(crate) use command_header;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_parse_follows_java_rules() {
        assert_eq!(i32::parse_value("42"), Some(42));
        assert_eq!(i32::parse_value("+42"), Some(42));
        assert_eq!(i32::parse_value("-42"), Some(-42));
        assert_eq!(i32::parse_value("++42"), None);
        assert_eq!(i32::parse_value(" 42"), None);
        assert_eq!(i32::parse_value(""), None);
        assert_eq!(i32::parse_value("2147483648"), None);
        assert_eq!(i64::parse_value("2147483648"), Some(2_147_483_648));
    }

    #[test]
    fn bool_parse_is_true_only_for_true_ignoring_case() {
        assert_eq!(bool::parse_value("TRUE"), Some(true));
        assert_eq!(bool::parse_value("yes"), Some(false));
    }

    #[test]
    fn required_field_missing_is_error_with_java_text() {
        let error = <String as HeaderField>::read_field(&ExtFields::new(), "topic").unwrap_err();
        assert_eq!(error.to_string(), "the custom field <topic> is null");
    }

    #[test]
    fn optional_field_unparsable_is_absent() {
        let fields: ExtFields = [("queueId", "x")].into_iter().collect();
        let value = <Option<i32> as HeaderField>::read_field(&fields, "queueId").unwrap();
        assert_eq!(value, None);
    }
}
