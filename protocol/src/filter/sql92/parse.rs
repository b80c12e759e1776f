//! From text to a compiled selector: pest parses with `grammar.pest` (the rules of Java's
//! `SelectorParser.jj`), and the walk below builds each node as the .jj's actions do, with
//! the checks of Java's expression factories.

use super::eval::{compare, Value};
use super::{Expr, OrderOp, TextTest};
use crate::limits::{SQL92_NESTING_MAX, SQL92_OPERATORS_MAX};
use pest::iterators::Pair;
use pest::Parser as _;
use std::cmp::Ordering;

#[derive(pest_derive::Parser)]
#[grammar = "filter/sql92/grammar.pest"]
struct SelectorParser;

/// Why an expression does not compile (Java's `ParseException` or the `RuntimeException` of
/// an expression factory, which `SelectorParser.parse` reports alike).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ParseError {
    message: String,
}

impl ParseError {
    fn at(pair: &Pair<'_, Rule>, what: &str) -> ParseError {
        let (line, column) = pair.line_col();
        ParseError {
            message: format!("{what} (at line {line}, column {column})"),
        }
    }
}

type Parsed<T> = Result<T, ParseError>;

/// Parses and builds `text` (`SelectorParser.JmsSelector`).
pub(super) fn parse(text: &str) -> Parsed<Expr> {
    check_nesting(text)?;
    let mut pairs = SelectorParser::parse(Rule::selector, text).map_err(syntax_error)?;
    let selector = pairs.next().expect("pest yields the selector rule");
    let or_expr = inner(selector).next().expect("the grammar has an or_expr");
    let span = or_expr.clone();
    as_boolean(&span, build_or(or_expr)?)
}

/// The keywords of binary operators (each a level of the tree it builds).
const BINARY_KEYWORDS: [&str; 8] = [
    "AND",
    "OR",
    "IS",
    "IN",
    "BETWEEN",
    "CONTAINS",
    "STARTSWITH",
    "ENDSWITH",
];

/// Refuses an expression over [`SQL92_NESTING_MAX`] or [`SQL92_OPERATORS_MAX`]
/// before anything recurses over it. Counts outside string literals; comments are counted
/// too, which errs on the safe side.
fn check_nesting(text: &str) -> Parsed<()> {
    let mut nesting = 0usize;
    let mut operators = 0usize;
    let mut in_string = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\'' => in_string = !in_string,
            _ if in_string => {}
            '(' | '-' | '+' => nesting += 1,
            '=' | '<' | '>' => operators += 1,
            c if c.is_ascii_alphabetic() || c == '_' || c == '$' => {
                let mut word = String::from(c);
                while let Some(&next) = chars.peek() {
                    if !(next.is_ascii_alphanumeric() || next == '_' || next == '$') {
                        break;
                    }
                    word.push(next);
                    chars.next();
                }
                if word.eq_ignore_ascii_case("NOT") {
                    nesting += 1;
                } else if BINARY_KEYWORDS.iter().any(|k| word.eq_ignore_ascii_case(k)) {
                    operators += 1;
                }
            }
            _ => {}
        }
    }
    if nesting > SQL92_NESTING_MAX || operators > SQL92_OPERATORS_MAX {
        return Err(ParseError {
            message: format!(
                "Expression too complex: {nesting} parentheses and prefix operators (at most \
                 {SQL92_NESTING_MAX}), {operators} binary operators (at most {SQL92_OPERATORS_MAX})"
            ),
        });
    }
    Ok(())
}

/// A syntax error as Java's `ParseException` words it: what was found where, and what the
/// grammar expected there.
fn syntax_error(error: pest::error::Error<Rule>) -> ParseError {
    let (line, column) = match error.line_col {
        pest::error::LineColLocation::Pos(at) | pest::error::LineColLocation::Span(at, _) => at,
    };
    let found = error
        .line()
        .chars()
        .skip(column.saturating_sub(1))
        .take_while(|c| !c.is_whitespace())
        .collect::<String>();
    let found = if found.is_empty() {
        "<EOF>".to_owned()
    } else {
        found
    };
    let expected = match &error.variant {
        pest::error::ErrorVariant::ParsingError { positives, .. } => {
            let mut names: Vec<&str> = positives.iter().map(|rule| token_name(*rule)).collect();
            names.sort_unstable();
            names.dedup();
            names.join(", ")
        }
        pest::error::ErrorVariant::CustomError { message } => message.clone(),
    };
    ParseError {
        message: format!(
            "Encountered \"{found}\" at line {line}, column {column}. \
             Was expecting one of: {expected}"
        ),
    }
}

/// How an expected rule is named in a syntax error: the .jj's token names.
fn token_name(rule: Rule) -> &'static str {
    match rule {
        Rule::EOI => "<EOF>",
        Rule::kw_not | Rule::not | Rule::not_between | Rule::not_in_list => "\"NOT\"",
        Rule::not_contains | Rule::not_starts_with | Rule::not_ends_with => "\"NOT\"",
        Rule::kw_and => "\"AND\"",
        Rule::kw_or => "\"OR\"",
        Rule::kw_between | Rule::between => "\"BETWEEN\"",
        Rule::kw_in | Rule::in_list => "\"IN\"",
        Rule::kw_is | Rule::is_null | Rule::is_not_null => "\"IS\"",
        Rule::kw_null => "\"NULL\"",
        Rule::kw_contains | Rule::contains => "\"CONTAINS\"",
        Rule::kw_startswith | Rule::starts_with => "\"STARTSWITH\"",
        Rule::kw_endswith | Rule::ends_with => "\"ENDSWITH\"",
        Rule::equal => "\"=\"",
        Rule::not_equal => "\"<>\"",
        Rule::greater => "\">\"",
        Rule::greater_equal => "\">=\"",
        Rule::less => "\"<\"",
        Rule::less_equal => "\"<=\"",
        Rule::string => "<STRING_LITERAL>",
        Rule::decimal => "<DECIMAL_LITERAL>",
        Rule::float => "<FLOATING_POINT_LITERAL>",
        Rule::ident => "<ID>",
        _ => "an expression",
    }
}

/// The children of a node, keywords left out (they are in the node's rule already).
fn inner(pair: Pair<'_, Rule>) -> impl Iterator<Item = Pair<'_, Rule>> {
    pair.into_inner().filter(|p| {
        !matches!(
            p.as_rule(),
            Rule::kw_not
                | Rule::kw_and
                | Rule::kw_or
                | Rule::kw_between
                | Rule::kw_in
                | Rule::kw_is
                | Rule::kw_null
                | Rule::kw_contains
                | Rule::kw_startswith
                | Rule::kw_endswith
        )
    })
}

fn build_or(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    build_logic(pair, build_and, Expr::Or)
}

fn build_and(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    build_logic(pair, build_equality, Expr::And)
}

/// `orExpression` / `andExpression`: operands joined left to right, each made boolean.
fn build_logic(
    pair: Pair<'_, Rule>,
    operand: fn(Pair<'_, Rule>) -> Parsed<Expr>,
    join: fn(Box<Expr>, Box<Expr>) -> Expr,
) -> Parsed<Expr> {
    let mut operands = inner(pair);
    let first = operands.next().expect("the grammar has a first operand");
    let mut left = operand(first.clone())?;
    let mut left_at = first;
    for next in operands {
        let right = operand(next.clone())?;
        let l = as_boolean(&left_at, left)?;
        let r = as_boolean(&next, right)?;
        left = join(Box::new(l), Box::new(r));
        left_at = next;
    }
    Ok(left)
}

/// `equalityExpression`.
fn build_equality(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    let mut parts = inner(pair);
    let mut left = build_comparison(parts.next().expect("the grammar has an operand"))?;
    for tail in parts {
        left = match tail.as_rule() {
            Rule::equal => create_equal(&tail, left, build_comparison(only_child(&tail))?)?,
            Rule::not_equal => {
                let right = build_comparison(only_child(&tail))?;
                Expr::Not(Box::new(create_equal(&tail, left, right)?))
            }
            Rule::is_null => Expr::Equal(Box::new(left), Box::new(Expr::Constant(None))),
            Rule::is_not_null => Expr::Not(Box::new(Expr::Equal(
                Box::new(left),
                Box::new(Expr::Constant(None)),
            ))),
            rule => unreachable!("equality tail {rule:?}"),
        };
    }
    Ok(left)
}

/// `comparisonExpression`.
fn build_comparison(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    let mut parts = inner(pair);
    let mut left = build_unary(parts.next().expect("the grammar has an operand"))?;
    for tail in parts {
        let rule = tail.as_rule();
        left = match rule {
            Rule::greater => create_order(&tail, OrderOp::Greater, left, unary_child(&tail)?)?,
            Rule::greater_equal => {
                create_order(&tail, OrderOp::GreaterEqual, left, unary_child(&tail)?)?
            }
            Rule::less => create_order(&tail, OrderOp::Less, left, unary_child(&tail)?)?,
            Rule::less_equal => create_order(&tail, OrderOp::LessEqual, left, unary_child(&tail)?)?,
            Rule::contains | Rule::not_contains => text_test(&tail, TextTest::Contains, left),
            Rule::starts_with | Rule::not_starts_with => {
                text_test(&tail, TextTest::StartsWith, left)
            }
            Rule::ends_with | Rule::not_ends_with => text_test(&tail, TextTest::EndsWith, left),
            Rule::between | Rule::not_between => {
                let mut bounds = inner(tail.clone());
                let low = build_unary(bounds.next().expect("the grammar has a low bound"))?;
                let high = build_unary(bounds.next().expect("the grammar has a high bound"))?;
                if rule == Rule::between {
                    create_between(&tail, left, low, high)?
                } else {
                    // `createNotBetween`: value < low OR value > high, bounds unchecked.
                    let below = create_order(&tail, OrderOp::Less, left.clone(), low)?;
                    let above = create_order(&tail, OrderOp::Greater, left, high)?;
                    Expr::Or(Box::new(below), Box::new(above))
                }
            }
            Rule::in_list | Rule::not_in_list => {
                let Expr::Property(property) = left else {
                    let what = format!("Expected a property for In expression, got: {left}");
                    return Err(ParseError::at(&tail, &what));
                };
                Expr::In {
                    property,
                    list: inner(tail.clone())
                        .map(|s| decode_string(s.as_str()))
                        .collect(),
                    negated: rule == Rule::not_in_list,
                }
            }
            rule => unreachable!("comparison tail {rule:?}"),
        };
    }
    Ok(left)
}

/// `unaryExpr`.
fn build_unary(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    let child = only_child(&pair);
    match child.as_rule() {
        Rule::plus => build_unary(only_child(&child)),
        Rule::negate => Ok(Expr::Negate(Box::new(build_unary(only_child(&child))?))),
        Rule::not => {
            let operand = only_child(&child);
            let built = build_unary(operand.clone())?;
            Ok(Expr::Not(Box::new(as_boolean(&operand, built)?)))
        }
        Rule::primary => build_primary(child),
        rule => unreachable!("unary {rule:?}"),
    }
}

/// `primaryExpr`: a literal, a property or a parenthesized expression.
fn build_primary(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    let child = only_child(&pair);
    match child.as_rule() {
        Rule::ident => Ok(Expr::Property(child.as_str().to_owned())),
        Rule::or_expr => build_or(child),
        // Not `only_child`: the `NULL` literal is a keyword rule.
        Rule::literal => build_literal(
            child
                .into_inner()
                .next()
                .expect("the grammar gives a literal a child"),
        ),
        rule => unreachable!("primary {rule:?}"),
    }
}

/// `literal`, with `ConstantExpression.createFromDecimal` and `createFloat`.
fn build_literal(pair: Pair<'_, Rule>) -> Parsed<Expr> {
    let text = pair.as_str();
    let value = match pair.as_rule() {
        Rule::string => Some(Value::Str(decode_string(text))),
        Rule::decimal => {
            let digits = text.trim_end_matches(['l', 'L']);
            let Ok(value) = digits.parse::<i64>() else {
                let what = format!("For input string: \"{digits}\"");
                return Err(ParseError::at(&pair, &what));
            };
            Some(match i32::try_from(value) {
                Ok(small) => Value::Int(small),
                Err(_) => Value::Long(value),
            })
        }
        Rule::float => {
            let value: f64 = text
                .parse()
                .map_err(|_| ParseError::at(&pair, &format!("For input string: \"{text}\"")))?;
            if value > f64::MAX {
                let what = format!("{text} is greater than 1.7976931348623157E308");
                return Err(ParseError::at(&pair, &what));
            }
            // Java compares with Double.MIN_VALUE, the smallest positive double, so a zero
            // literal is refused too.
            if value < f64::from_bits(1) {
                return Err(ParseError::at(
                    &pair,
                    &format!("{text} is less than 4.9E-324"),
                ));
            }
            Some(Value::Double(value))
        }
        Rule::kw_true => Some(Value::Bool(true)),
        Rule::kw_false => Some(Value::Bool(false)),
        Rule::kw_null => None,
        rule => unreachable!("literal {rule:?}"),
    };
    Ok(Expr::Constant(value))
}

/// `stringLitteral`: the quotes dropped, each doubled quote made one.
fn decode_string(image: &str) -> String {
    let body = image
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .unwrap_or(image);
    body.replace("''", "'")
}

fn only_child<'a>(pair: &Pair<'a, Rule>) -> Pair<'a, Rule> {
    inner(pair.clone())
        .next()
        .expect("the grammar gives this rule a child")
}

fn unary_child(pair: &Pair<'_, Rule>) -> Parsed<Expr> {
    build_unary(only_child(pair))
}

fn text_test(pair: &Pair<'_, Rule>, test: TextTest, operand: Expr) -> Expr {
    let negated = matches!(
        pair.as_rule(),
        Rule::not_contains | Rule::not_starts_with | Rule::not_ends_with
    );
    Expr::Text {
        test,
        negated,
        operand: Box::new(operand),
        search: decode_string(only_child(pair).as_str()),
    }
}

/// `asBooleanExpression`: a boolean node as it is, a property cast to boolean, anything
/// else refused.
fn as_boolean(at: &Pair<'_, Rule>, expr: Expr) -> Parsed<Expr> {
    if expr.is_boolean() {
        return Ok(expr);
    }
    if let Expr::Property(_) = expr {
        return Ok(Expr::BooleanCast(Box::new(expr)));
    }
    let what = format!("Expression will not result in a boolean value: {expr}");
    Err(ParseError::at(at, &what))
}

/// `ComparisonExpression.createEqual`: neither side the `NULL` literal, and no boolean
/// literal compared with another kind of literal.
fn create_equal(at: &Pair<'_, Rule>, left: Expr, right: Expr) -> Parsed<Expr> {
    for operand in [&left, &right] {
        if *operand == Expr::Constant(None) {
            return Err(ParseError::at(at, "'NULL' cannot be compared."));
        }
    }
    let both_literals = matches!((&left, &right), (Expr::Constant(_), Expr::Constant(_)));
    if both_literals && left.is_boolean() && !right.is_boolean() {
        let what = format!("'{left}' cannot be compared with '{right}'");
        return Err(ParseError::at(at, &what));
    }
    Ok(Expr::Equal(Box::new(left), Box::new(right)))
}

/// `createGreaterThan` and the others: literals must be numbers, and no operand may be
/// boolean (`checkLessThanOperand`).
fn create_order(at: &Pair<'_, Rule>, op: OrderOp, left: Expr, right: Expr) -> Parsed<Expr> {
    for operand in [&left, &right] {
        let comparable = match operand {
            Expr::Constant(value) => matches!(
                value,
                Some(Value::Int(_) | Value::Long(_) | Value::Double(_))
            ),
            other => !other.is_boolean(),
        };
        if !comparable {
            return Err(ParseError::at(
                at,
                &format!("Value '{operand}' cannot be compared."),
            ));
        }
    }
    Ok(Expr::Order(op, Box::new(left), Box::new(right)))
}

/// `createBetween`: literal bounds must be present and in order; then
/// value >= low AND value <= high.
fn create_between(at: &Pair<'_, Rule>, value: Expr, low: Expr, high: Expr) -> Parsed<Expr> {
    if let (Expr::Constant(lv), Expr::Constant(rv)) = (&low, &high) {
        let (Some(lv), Some(rv)) = (lv, rv) else {
            let what = "Illegal values of between, values can not be null!";
            return Err(ParseError::at(at, what));
        };
        let order =
            compare(rv.clone(), lv.clone()).map_err(|e| ParseError::at(at, &e.to_string()))?;
        if order == Ordering::Less {
            let what = format!(
                "Illegal values of between, left value({lv}) \
                 must less than or equal to right value({rv})"
            );
            return Err(ParseError::at(at, &what));
        }
    }
    let at_least = create_order(at, OrderOp::GreaterEqual, value.clone(), low)?;
    let at_most = create_order(at, OrderOp::LessEqual, value, high)?;
    Ok(Expr::And(Box::new(at_least), Box::new(at_most)))
}
