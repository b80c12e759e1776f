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
//!   leaves it null and the processor then fails with SYSTEM_ERROR on the null (its remark is
//!   the `NullPointerException`); ferromq answers the same code with a remark that says what
//!   is wrong: `the custom field <name> is null` (what Java's decoder logs) for an absent one,
//!   `the custom field <name> is not an int: <text>` for one that does not parse;
//! - the headers Java decodes by hand (`FastCodesHeader`: SEND_MESSAGE_V2, SEND_BATCH_MESSAGE,
//!   PULL_MESSAGE) parse every number of theirs that is present, optional ones too, and fail
//!   the request (SYSTEM_ERROR, the `NumberFormatException`) on one that does not:
//!   [`read_strict`] reads those ([`FastCodesHeader`]).

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
    /// The field is absent.
    #[error("the custom field <{field}> is null")]
    MissingField {
        /// The Java field name, which is also the extFields key.
        field: &'static str,
    },
    /// The field is present but its text is not a value of the field's type.
    #[error("the custom field <{field}> is not {expected}: {value}")]
    Unparsable {
        /// The Java field name, which is also the extFields key.
        field: &'static str,
        /// What the field holds (`an int`, `a long`, `a double`).
        expected: &'static str,
        /// The text, cut to [`UNPARSABLE_SHOWN_MAX`] characters.
        value: String,
    },
}

/// Characters of an unparsable value a remark shows, at most (the rest is cut: a client
/// controls its length).
pub const UNPARSABLE_SHOWN_MAX: usize = 64;

impl HeaderError {
    /// The error for `key`, whose present text did not parse as `kind`.
    fn unparsable(key: &'static str, kind: ValueKind, text: &str) -> HeaderError {
        let expected = match kind {
            ValueKind::Int => "an int",
            ValueKind::Long => "a long",
            ValueKind::Double => "a double",
            ValueKind::Text | ValueKind::Bool => "a value",
        };
        let mut value: String = text.chars().take(UNPARSABLE_SHOWN_MAX).collect();
        if value.len() < text.len() {
            value.push_str("...");
        }
        HeaderError::Unparsable {
            field: key,
            expected,
            value,
        }
    }
}

/// A header Java 4.9 decodes by hand (`FastCodesHeader`), parsing each of its numbers that
/// is present, optional ones too.
pub trait FastCodesHeader: CommandHeader {
    /// The fields Java's `decode` reads (later releases' fields are not among them: 4.9
    /// ignores those).
    const FAST_DECODED: &'static [&'static str];
}

/// Reads a [`FastCodesHeader`]: as [`CommandHeader::read_from`], and each number of
/// [`FastCodesHeader::FAST_DECODED`] that is present, optional ones too, must parse.
///
/// # Errors
/// [`HeaderError::Unparsable`] for the first such number that does not parse, else as
/// [`CommandHeader::read_from`].
pub fn read_strict<H: FastCodesHeader>(fields: &ExtFields) -> Result<H, HeaderError> {
    for info in H::FIELDS {
        if !H::FAST_DECODED.contains(&info.key) {
            continue;
        }
        let Some(text) = fields.get(info.key) else {
            continue;
        };
        let parses = match info.kind {
            ValueKind::Int => i32::parse_value(text).is_some(),
            ValueKind::Long => i64::parse_value(text).is_some(),
            ValueKind::Double => f64::parse_value(text).is_some(),
            ValueKind::Text | ValueKind::Bool => true,
        };
        if !parses {
            return Err(HeaderError::unparsable(info.key, info.kind, text));
        }
    }
    H::read_from(fields)
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
                let text = fields.get(key).ok_or(HeaderError::MissingField { field: key })?;
                <$ty as HeaderValue>::parse_value(text)
                    .ok_or_else(|| HeaderError::unparsable(key, <$ty as HeaderValue>::KIND, text))
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
    fn required_field_unparsable_says_what_it_holds() {
        let fields: ExtFields = [("queueId", "one"), ("offset", "x".repeat(100).as_str())]
            .into_iter()
            .collect();
        let error = <i32 as HeaderField>::read_field(&fields, "queueId").unwrap_err();
        assert_eq!(
            error.to_string(),
            "the custom field <queueId> is not an int: one"
        );
        let error = <i64 as HeaderField>::read_field(&fields, "offset").unwrap_err();
        let text = error.to_string();
        assert!(
            text.starts_with("the custom field <offset> is not a long: xxx"),
            "{text}"
        );
        assert!(text.ends_with("x..."), "{text}");
    }

    #[test]
    fn strict_read_refuses_an_unparsable_optional_number() {
        crate::remoting::header::command_header! {
            /// A header with an optional number.
            pub struct Sample {
                /// `a`.
                a: String = "a",
                /// `j`.
                j: Option<i32> = "j",
            }
        }
        impl FastCodesHeader for Sample {
            const FAST_DECODED: &'static [&'static str] = &["a", "j"];
        }
        let fields: ExtFields = [("a", "x"), ("j", "seven")].into_iter().collect();
        assert_eq!(Sample::read_from(&fields).unwrap().j, None);
        let error = read_strict::<Sample>(&fields).unwrap_err();
        assert_eq!(
            error.to_string(),
            "the custom field <j> is not an int: seven"
        );
        let fields: ExtFields = [("a", "x"), ("j", "7")].into_iter().collect();
        assert_eq!(read_strict::<Sample>(&fields).unwrap().j, Some(7));
    }

    #[test]
    fn optional_field_unparsable_is_absent() {
        let fields: ExtFields = [("queueId", "x")].into_iter().collect();
        let value = <Option<i32> as HeaderField>::read_field(&fields, "queueId").unwrap();
        assert_eq!(value, None);
    }
}
