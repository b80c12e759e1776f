//! SQL92 message selectors (`MessageSelector.bySql`), as RocketMQ's filter module compiles
//! and evaluates them: the grammar of its `SelectorParser.jj` (in `grammar.pest`), the checks
//! its expression factories make while parsing, and the evaluation rules of its
//! `ComparisonExpression`, `LogicExpression` and `UnaryExpression`, quirks included, so that
//! a selector takes on ferromq exactly the messages it takes on a Java broker.
//!
//! ```
//! use ferromq_protocol::filter::sql92::Selector;
//!
//! let selector = Selector::compile("a > 5 AND color IN ('red', 'blue')").unwrap();
//! let message = [("a", "7"), ("color", "red")];
//! assert!(selector.matches(&message));
//! assert!(Selector::compile("a >").is_err());
//! ```
//!
//! Values: a message's properties are strings; literals are Java's `Integer` (a decimal that
//! fits 32 bits), `Long`, `Double`, `String` and `Boolean`. Comparing values of two types
//! converts one as Java's `ComparisonExpression.__compare` does with string conversion on
//! (as `SelectorParser.parse` always sets it): `a > 5` reads the property `a` as an
//! `Integer`, `a > 5.0` as a `Double`. A string that does not convert makes the evaluation
//! fail, and a failed evaluation does not match (the broker logs it, as Java does).

mod eval;
mod parse;
#[cfg(test)]
mod tests;

pub use eval::{EvalError, Value};
pub use parse::ParseError;

/// A compiled selector (Java's `BooleanExpression` from `SqlFilter.compile`).
#[doc(alias = "SqlFilter")]
#[doc(alias = "BooleanExpression")]
#[derive(Clone, Debug, PartialEq)]
pub struct Selector {
    root: Expr,
}

impl Selector {
    /// Compiles `expression` (`SelectorParser.parse`).
    ///
    /// # Errors
    /// [`ParseError`]: a syntax error naming its line and column, or one of the checks Java's
    /// expression factories make (a string compared with `>`, `BETWEEN` bounds out of
    /// order, a literal out of range, an expression that is not boolean, …).
    pub fn compile(expression: &str) -> Result<Selector, ParseError> {
        parse::parse(expression).map(|root| Selector { root })
    }

    /// The value of the selector for a message whose properties `property` looks up
    /// (`BooleanExpression.evaluate`): `Ok(None)` is Java's null (unknown).
    ///
    /// # Errors
    /// [`EvalError`] where Java's evaluation throws (a property that does not convert to
    /// the number it is compared with).
    pub fn evaluate(&self, properties: &dyn Properties) -> Result<Option<Value>, EvalError> {
        self.root.evaluate(properties)
    }

    /// Whether a message matches, as the broker decides (`ExpressionMessageFilter`): only a
    /// `TRUE` matches; unknown and failed evaluations do not.
    pub fn matches(&self, properties: &dyn Properties) -> bool {
        matches!(self.evaluate(properties), Ok(Some(Value::Bool(true))))
    }
}

/// A message's properties as a selector reads them (Java's `EvaluationContext`).
pub trait Properties {
    /// The value of property `name`, if the message has it.
    fn property(&self, name: &str) -> Option<&str>;
}

/// The properties of a stored record as they are stored (`name 0x01 value`, entries
/// separated by 0x02), read in place: nothing is decoded or allocated for a lookup. Entries
/// with an empty name or value are not there, as Java's `string2messageProperties` drops
/// them.
#[derive(Clone, Copy, Debug)]
pub struct StoredProperties<'a>(pub &'a [u8]);

impl Properties for StoredProperties<'_> {
    fn property(&self, name: &str) -> Option<&str> {
        self.0
            .split(|b| *b == PROPERTY_SEPARATOR)
            .filter_map(|entry| {
                let at = entry.iter().position(|b| *b == NAME_VALUE_SEPARATOR)?;
                Some((&entry[..at], &entry[at + 1..]))
            })
            .find(|(n, v)| *n == name.as_bytes() && !v.is_empty())
            .and_then(|(_, v)| std::str::from_utf8(v).ok())
    }
}

const NAME_VALUE_SEPARATOR: u8 = 1;
const PROPERTY_SEPARATOR: u8 = 2;

/// Name-value pairs, as a stored record's properties decode.
impl<K: AsRef<str>, V: AsRef<str>> Properties for Vec<(K, V)> {
    fn property(&self, name: &str) -> Option<&str> {
        find_pair(self, name)
    }
}

impl<K: AsRef<str>, V: AsRef<str>, const N: usize> Properties for [(K, V); N] {
    fn property(&self, name: &str) -> Option<&str> {
        find_pair(self, name)
    }
}

fn find_pair<'a, K: AsRef<str>, V: AsRef<str>>(pairs: &'a [(K, V)], name: &str) -> Option<&'a str> {
    pairs
        .iter()
        .find(|(n, _)| n.as_ref() == name)
        .map(|(_, v)| v.as_ref())
}

impl<S: std::hash::BuildHasher> Properties for std::collections::HashMap<String, String, S> {
    fn property(&self, name: &str) -> Option<&str> {
        self.get(name).map(String::as_str)
    }
}

/// A node of a compiled selector; each variant names the Java expression it stands for.
#[derive(Clone, Debug, PartialEq)]
enum Expr {
    /// `ConstantExpression` (`None`: the `NULL` literal).
    Constant(Option<Value>),
    /// `PropertyExpression`: a message property, or null when the message has none.
    Property(String),
    /// `UnaryExpression.createNegate`.
    Negate(Box<Expr>),
    /// `UnaryExpression.createNOT`.
    Not(Box<Expr>),
    /// `UnaryExpression.createBooleanCast`: a property where a boolean is expected.
    BooleanCast(Box<Expr>),
    /// `LogicExpression.createAND`.
    And(Box<Expr>, Box<Expr>),
    /// `LogicExpression.createOR`.
    Or(Box<Expr>, Box<Expr>),
    /// `ComparisonExpression.doCreateEqual` (`=`, and `IS NULL` against the null literal).
    Equal(Box<Expr>, Box<Expr>),
    /// `>`, `>=`, `<`, `<=`.
    Order(OrderOp, Box<Expr>, Box<Expr>),
    /// `CONTAINS`, `STARTSWITH`, `ENDSWITH` and their `NOT` forms.
    Text {
        test: TextTest,
        negated: bool,
        operand: Box<Expr>,
        search: String,
    },
    /// `UnaryExpression.createInExpression` over a property.
    In {
        property: String,
        list: Vec<String>,
        negated: bool,
    },
}

/// The ordering comparisons.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OrderOp {
    Greater,
    GreaterEqual,
    Less,
    LessEqual,
}

/// The string tests.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum TextTest {
    Contains,
    StartsWith,
    EndsWith,
}

impl Expr {
    /// Whether Java's node implements `BooleanExpression` (what `asBooleanExpression` and
    /// the comparison checks ask).
    fn is_boolean(&self) -> bool {
        match self {
            Expr::Constant(value) => matches!(value, None | Some(Value::Bool(_))),
            Expr::Property(_) | Expr::Negate(_) => false,
            _ => true,
        }
    }
}

/// Java's `toString` of an expression, which its parse errors quote.
impl std::fmt::Display for Expr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Expr::Constant(None) => f.write_str("NULL"),
            Expr::Constant(Some(value)) => write!(f, "{value}"),
            Expr::Property(name) => f.write_str(name),
            Expr::Negate(operand) => write!(f, "(- {operand})"),
            Expr::Not(operand) => write!(f, "(NOT {operand})"),
            Expr::BooleanCast(operand) => write!(f, "{operand}"),
            Expr::And(left, right) => write!(f, "({left} && {right})"),
            Expr::Or(left, right) => write!(f, "({left} || {right})"),
            Expr::Equal(left, right) => write!(f, "({left} == {right})"),
            Expr::Order(op, left, right) => {
                let symbol = match op {
                    OrderOp::Greater => ">",
                    OrderOp::GreaterEqual => ">=",
                    OrderOp::Less => "<",
                    OrderOp::LessEqual => "<=",
                };
                write!(f, "({left} {symbol} {right})")
            }
            Expr::Text {
                test,
                negated,
                operand,
                ..
            } => {
                let not = if *negated { "NOT " } else { "" };
                let symbol = match test {
                    TextTest::Contains => "CONTAINS",
                    TextTest::StartsWith => "STARTSWITH",
                    TextTest::EndsWith => "ENDSWITH",
                };
                write!(f, "({not}{symbol} {operand})")
            }
            Expr::In {
                property,
                list,
                negated,
            } => {
                let not = if *negated { "NOT " } else { "" };
                write!(f, "{property} {not}IN ( {} )", list.join(", "))
            }
        }
    }
}
