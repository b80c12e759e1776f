//! Evaluation of a compiled selector against a message's properties, with Java's value types
//! and conversions.

use super::{Expr, OrderOp, TextTest};
use std::cmp::Ordering;

/// A value during evaluation: the Java types a selector can produce.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `Boolean`.
    Bool(bool),
    /// `Integer`: a decimal literal within 32 bits.
    Int(i32),
    /// `Long`: a wider decimal literal.
    Long(i64),
    /// `Double`: a floating-point literal.
    Double(f64),
    /// `String`: a string literal or a property.
    Str(String),
}

/// Java's `toString` of a constant.
impl std::fmt::Display for Value {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Value::Bool(true) => f.write_str("TRUE"),
            Value::Bool(false) => f.write_str("FALSE"),
            Value::Int(value) => write!(f, "{value}"),
            Value::Long(value) => write!(f, "{value}"),
            Value::Double(value) => write!(f, "{value:?}"),
            Value::Str(text) => write!(f, "'{}'", text.replace('\'', "''")),
        }
    }
}

/// Why an evaluation failed where Java's throws.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// A string that is not the number it is compared with (`NumberFormatException`).
    #[error("For input string: \"{0}\"")]
    NumberFormat(String),
    /// `>`, `>=`, `<` or `<=` between two strings that are not both numbers.
    #[error("It's illegal to compare string by '>=', '>', '<', '<='. lv={0}, rv={1}")]
    StringOrder(String, String),
    /// A boolean compared with a string: Java casts the boolean to a string and throws
    /// `ClassCastException`.
    #[error("a boolean cannot be compared with the string '{0}'")]
    BooleanWithString(String),
}

type Lookup<'a> = &'a dyn super::Properties;

impl Expr {
    /// The value of this node (`Expression.evaluate`); `None` is Java's null.
    pub(super) fn evaluate(&self, property: Lookup<'_>) -> Result<Option<Value>, EvalError> {
        Ok(match self {
            Expr::Constant(value) => value.clone(),
            Expr::Property(name) => property
                .property(name)
                .map(|text| Value::Str(text.to_owned())),
            Expr::Negate(operand) => match operand.evaluate(property)? {
                Some(Value::Int(value)) => Some(Value::Int(value.wrapping_neg())),
                Some(Value::Long(value)) => Some(Value::Long(value.wrapping_neg())),
                Some(Value::Double(value)) => Some(Value::Double(-value)),
                _ => None,
            },
            Expr::Not(operand) => operand.evaluate_bool(property)?.map(|b| Value::Bool(!b)),
            Expr::BooleanCast(operand) => match operand.evaluate(property)? {
                None => None,
                Some(Value::Bool(value)) => Some(Value::Bool(value)),
                Some(_) => Some(Value::Bool(false)),
            },
            Expr::And(left, right) => logic(left, right, false, property)?,
            Expr::Or(left, right) => logic(left, right, true, property)?,
            Expr::Equal(left, right) => {
                let lv = left.evaluate(property)?;
                let rv = right.evaluate(property)?;
                match (lv, rv) {
                    (None, None) => Some(Value::Bool(true)),
                    (None, Some(_)) => None,
                    (Some(_), None) => Some(Value::Bool(false)),
                    (Some(lv), Some(rv)) => Some(Value::Bool(compare(lv, rv)? == Ordering::Equal)),
                }
            }
            Expr::Order(op, left, right) => {
                let Some(lv) = left.evaluate(property)? else {
                    return Ok(None);
                };
                let Some(rv) = right.evaluate(property)? else {
                    return Ok(None);
                };
                let ordering = match (lv, rv) {
                    // Strings are ordered only as the numbers they spell.
                    (Value::Str(l), Value::Str(r)) => match (java_double(&l), java_double(&r)) {
                        (Some(lv), Some(rv)) => java_double_compare(lv, rv),
                        _ => return Err(EvalError::StringOrder(l, r)),
                    },
                    (lv, rv) => compare(lv, rv)?,
                };
                Some(Value::Bool(match op {
                    OrderOp::Greater => ordering.is_gt(),
                    OrderOp::GreaterEqual => ordering.is_ge(),
                    OrderOp::Less => ordering.is_lt(),
                    OrderOp::LessEqual => ordering.is_le(),
                }))
            }
            Expr::Text {
                test,
                negated,
                operand,
                search,
            } => {
                if search.is_empty() {
                    return Ok(Some(Value::Bool(false)));
                }
                let found = match operand.evaluate(property)? {
                    Some(Value::Str(text)) => match test {
                        TextTest::Contains => text.contains(search.as_str()),
                        TextTest::StartsWith => text.starts_with(search.as_str()),
                        TextTest::EndsWith => text.ends_with(search.as_str()),
                    },
                    // A missing or non-string operand is false in both forms.
                    _ => return Ok(Some(Value::Bool(false))),
                };
                Some(Value::Bool(found != *negated))
            }
            Expr::In {
                property: name,
                list,
                negated,
            } => property
                .property(name)
                .map(|text| Value::Bool(list.iter().any(|s| s == text) != *negated)),
        })
    }

    /// The value of a boolean node: Java casts it to `Boolean`, which every boolean node
    /// gives (or null).
    fn evaluate_bool(&self, property: Lookup<'_>) -> Result<Option<bool>, EvalError> {
        Ok(match self.evaluate(property)? {
            Some(Value::Bool(value)) => Some(value),
            _ => None,
        })
    }
}

/// `LogicExpression`'s AND (`decisive` false) and OR (`decisive` true): an operand equal to
/// `decisive` decides, the right one evaluated only when the left does not; otherwise an
/// unknown operand makes the result unknown.
fn logic(
    left: &Expr,
    right: &Expr,
    decisive: bool,
    property: Lookup<'_>,
) -> Result<Option<Value>, EvalError> {
    let lv = left.evaluate_bool(property)?;
    if lv == Some(decisive) {
        return Ok(Some(Value::Bool(decisive)));
    }
    let rv = right.evaluate_bool(property)?;
    Ok(match (lv, rv) {
        (_, Some(value)) if value == decisive => Some(Value::Bool(decisive)),
        (Some(_), Some(_)) => Some(Value::Bool(!decisive)),
        _ => None,
    })
}

/// Java's `ComparisonExpression.__compare` with string conversion on: values of two types
/// are brought to one (an `Integer` widens to `Long` or `Double`, a `Long` to `Double`, a
/// string is parsed as the other side's type), and a pair no rule covers compares as less.
pub(super) fn compare(lv: Value, rv: Value) -> Result<Ordering, EvalError> {
    use Value::{Bool, Double, Int, Long, Str};
    Ok(match (lv, rv) {
        (Bool(l), Bool(r)) => l.cmp(&r),
        (Int(l), Int(r)) => l.cmp(&r),
        (Long(l), Long(r)) => l.cmp(&r),
        (Double(l), Double(r)) => java_double_compare(l, r),
        (Str(l), Str(r)) => l.encode_utf16().cmp(r.encode_utf16()),
        (Bool(_), Str(r)) => return Err(EvalError::BooleanWithString(r)),
        (Int(l), Long(r)) => i64::from(l).cmp(&r),
        (Int(l), Double(r)) => java_double_compare(f64::from(l), r),
        (Int(l), Str(r)) => l.cmp(&java_int(&r)?),
        (Long(l), Int(r)) => l.cmp(&i64::from(r)),
        (Long(l), Double(r)) => java_double_compare(long_to_double(l), r),
        (Long(l), Str(r)) => l.cmp(&java_long(&r)?),
        (Double(l), Int(r)) => java_double_compare(l, f64::from(r)),
        (Double(l), Long(r)) => java_double_compare(l, long_to_double(r)),
        (Double(l), Str(r)) => java_double_compare(l, number_or_error(&r, java_double)?),
        (Str(l), Bool(r)) => l.eq_ignore_ascii_case("true").cmp(&r),
        (Str(l), Int(r)) => java_int(&l)?.cmp(&r),
        (Str(l), Long(r)) => java_long(&l)?.cmp(&r),
        (Str(l), Double(r)) => java_double_compare(number_or_error(&l, java_double)?, r),
        _ => Ordering::Less,
    })
}

/// `(double) value`, Java's widening of a `long` (rounds to nearest).
#[allow(clippy::cast_precision_loss)]
fn long_to_double(value: i64) -> f64 {
    value as f64
}

/// `Double.compare`: -0.0 below 0.0, NaN above everything and equal to itself.
fn java_double_compare(l: f64, r: f64) -> Ordering {
    match (l.is_nan(), r.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => l.total_cmp(&r),
    }
}

fn number_or_error<T>(text: &str, parse: fn(&str) -> Option<T>) -> Result<T, EvalError> {
    parse(text).ok_or_else(|| EvalError::NumberFormat(text.to_owned()))
}

/// `Integer.valueOf(String)`: an optional sign and decimal digits, nothing else.
fn java_int(text: &str) -> Result<i32, EvalError> {
    number_or_error(text, |t| t.parse().ok())
}

/// `Long.valueOf(String)`.
fn java_long(text: &str) -> Result<i64, EvalError> {
    number_or_error(text, |t| t.parse().ok())
}

/// `Double.valueOf(String)`: surrounding whitespace and control characters ignored, an
/// optional `d`/`f` suffix, `NaN` and `Infinity` spelled as Java spells them. (Java's hex
/// floating-point form, `0x1p3`, is not read.)
pub(super) fn java_double(text: &str) -> Option<f64> {
    let text = text.trim_matches(|c: char| c <= ' ');
    let unsigned = text.strip_prefix(['+', '-']).unwrap_or(text);
    match unsigned {
        "NaN" => return Some(f64::NAN),
        "Infinity" => {
            return Some(if text.starts_with('-') {
                f64::NEG_INFINITY
            } else {
                f64::INFINITY
            })
        }
        _ => {}
    }
    // Rust reads words Java does not ("inf", "nan"): only digits, '.', signs and exponents.
    let number = text.strip_suffix(['d', 'D', 'f', 'F']).unwrap_or(text);
    let plain = number
        .chars()
        .all(|c| c.is_ascii_digit() || matches!(c, '.' | '+' | '-' | 'e' | 'E'));
    if !plain || !number.chars().any(|c| c.is_ascii_digit()) {
        return None;
    }
    number.parse().ok()
}
