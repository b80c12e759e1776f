//! The selector table: expressions × messages with the results a Java broker gives (worked
//! out from Java's expression classes, quirks included), and expressions it refuses.

use super::*;

/// The messages' properties; `None` is a property the message does not have.
const NAMES: [&str; 5] = ["a", "b", "c", "TAGS", "u"];
const MESSAGES: [[Option<&str>; 5]; 5] = [
    [
        Some("1"),
        Some("hello"),
        Some("3.5"),
        Some("TagA"),
        Some("日本語"),
    ],
    [
        Some("10"),
        Some("world"),
        Some("-2"),
        Some("TagB"),
        Some("中文"),
    ],
    [None, Some("it's"), None, Some("TagA"), None],
    [Some("abc"), Some("hello world"), Some("x"), None, None],
    [Some("3000000000"), None, Some("1e3"), Some("TagC"), None],
];

fn lookup(message: usize) -> Vec<(&'static str, &'static str)> {
    NAMES
        .iter()
        .zip(MESSAGES[message])
        .filter_map(|(name, value)| Some((*name, value?)))
        .collect()
}

/// (expression, whether each of [`MESSAGES`] matches).
const TABLE: &[(&str, [bool; 5])] = &[
    // A property compared with an int literal is read as Java's Integer: "abc" and
    // "3000000000" do not convert, and the evaluation fails (no match).
    ("a = 1", [true, false, false, false, false]),
    ("a <> 1", [false, true, false, false, false]),
    ("a > 5", [false, true, false, false, false]),
    ("a > -5", [true, true, false, false, false]),
    // Against a double literal it is read as a Double.
    ("a > 5.0", [false, true, false, false, true]),
    ("a = 1.0", [true, false, false, false, false]),
    // Against a long literal, as a Long.
    ("a > 2147483648", [false, false, false, false, true]),
    ("a >= 10L", [false, true, false, false, false]),
    ("a >= 1 AND a <= 10", [true, true, false, false, false]),
    ("a BETWEEN 1 AND 10", [true, true, false, false, false]),
    ("a NOT BETWEEN 1 AND 5", [false, true, false, false, false]),
    ("a = '1'", [true, false, false, false, false]),
    ("b = 'hello'", [true, false, false, false, false]),
    // A missing property makes = unknown, and NOT unknown is unknown.
    ("b <> 'hello'", [false, true, true, true, false]),
    ("b IN ('hello', 'world')", [true, true, false, false, false]),
    (
        "b NOT IN ('hello', 'world')",
        [false, false, true, true, false],
    ),
    ("b IS NULL", [false, false, false, false, true]),
    ("a IS NOT NULL", [true, true, false, true, true]),
    (
        "x IS NULL AND b IS NOT NULL",
        [true, true, true, true, false],
    ),
    ("b CONTAINS 'o'", [true, true, false, true, false]),
    // The NOT forms of the string tests are false for a missing property too.
    ("b NOT CONTAINS 'o'", [false, false, true, false, false]),
    ("b STARTSWITH 'hel'", [true, false, false, true, false]),
    ("b NOT STARTSWITH 'hel'", [false, true, true, false, false]),
    ("b ENDSWITH 'ld'", [false, true, false, true, false]),
    ("b NOT ENDSWITH 'ld'", [true, false, true, false, false]),
    ("b = 'it''s'", [false, false, true, false, false]),
    ("u = '日本語'", [true, false, false, false, false]),
    ("u CONTAINS '文'", [false, true, false, false, false]),
    (
        "TAGS = 'TagA' OR TAGS = 'TagC'",
        [true, false, true, false, true],
    ),
    (
        "TAGS IN ('TagA') AND a IS NULL",
        [false, false, true, false, false],
    ),
    // "3.5" is no Integer: every message fails or is false.
    ("c > 0", [false, false, false, false, false]),
    ("c > 0.5", [true, false, false, false, true]),
    ("c < -1.5", [false, true, false, false, false]),
    ("c = 1000.0", [false, false, false, false, true]),
    ("NOT (a > 5)", [true, false, false, false, false]),
    // A failed operand fails the whole evaluation, OR or not.
    ("a > 5 OR b = 'hello'", [true, true, false, false, false]),
    ("b = 'hello' OR a > 5", [true, true, false, false, false]),
    ("TRUE", [true, true, true, true, true]),
    ("FALSE OR b = 'world'", [false, true, false, false, false]),
    (
        "b in ('hello') and a between 0 and 1",
        [true, false, false, false, false],
    ),
    ("a = 1 /* one */", [true, false, false, false, false]),
    ("a = 1 -- one\n", [true, false, false, false, false]),
    // NOT binds to the next operand in Java's grammar: (NOT b) CONTAINS 'zzz' tests a
    // boolean, which is never a string.
    ("NOT b CONTAINS 'zzz'", [false, false, false, false, false]),
    // A property where a boolean is wanted is cast: a string is not TRUE.
    ("b", [false, false, false, false, false]),
];

#[test]
fn the_table_matches_as_java_does() {
    assert!(TABLE.len() >= 30);
    for (expression, expected) in TABLE {
        let selector = Selector::compile(expression)
            .unwrap_or_else(|e| panic!("{expression:?} does not compile: {e}"));
        for (message, want) in expected.iter().enumerate() {
            let got = selector.matches(&lookup(message));
            assert_eq!(got, *want, "{expression:?} on message {message}");
        }
    }
}

#[test]
fn unknown_and_failed_evaluations_are_told_apart() {
    let selector = Selector::compile("a > 5").unwrap();
    assert_eq!(selector.evaluate(&lookup(2)), Ok(None));
    assert_eq!(
        selector.evaluate(&lookup(3)),
        Err(EvalError::NumberFormat("abc".to_owned()))
    );
    assert_eq!(selector.evaluate(&lookup(1)), Ok(Some(Value::Bool(true))));
}

/// (expression, a piece of the error message).
const REFUSED: &[(&str, &str)] = &[
    ("a >", "line 1, column 4"),
    ("a = 1 AND\n  b >", "line 2, column 6"),
    ("a > 'x'", "cannot be compared"),
    ("a = NULL", "'NULL' cannot be compared."),
    ("TRUE = 1", "cannot be compared with"),
    ("a > TRUE", "cannot be compared"),
    ("a BETWEEN 5 AND 1", "Illegal values of between"),
    ("a BETWEEN NULL AND 1", "can not be null"),
    ("5", "will not result in a boolean value"),
    ("a + 1 > 2", "line 1, column 3"),
    ("a IN (1)", "line 1, column 7"),
    ("'x' IN ('x')", "Expected a property for In expression"),
    ("a = 99999999999999999999", "For input string"),
    ("a > 0.0", "is less than"),
    ("a > 1e999", "is greater than"),
    ("a == 1", "line 1, column 4"),
    ("b CONTAINS c", "line 1, column 12"),
    ("a = 1 -- no line end", "line 1, column 7"),
    ("a = 'open", "line 1, column 5"),
    ("", "line 1, column 1"),
    ("a = 05", "line 1, column 6"),
    ("and = 1", "line 1, column 1"),
];

#[test]
fn bad_expressions_are_refused_with_java_reasons_and_positions() {
    for (expression, reason) in REFUSED {
        match Selector::compile(expression) {
            Ok(selector) => panic!("{expression:?} compiled to {selector:?}"),
            Err(e) => assert!(
                e.to_string().contains(reason),
                "{expression:?}: {e} does not say {reason:?}"
            ),
        }
    }
}

#[test]
fn keywords_ignore_case_and_are_not_identifiers_unless_longer() {
    let selector = Selector::compile("notes IS nOt NuLl AnD android = 'x'").unwrap();
    assert!(selector.matches(&[("notes", "n"), ("android", "x")]));
}

#[test]
fn mixed_numbers_compare_as_java_widens_them() {
    let cases = [
        ("1 = 1.0", true),
        ("2147483648 > 2147483647", true),
        ("1.5 > 1", true),
        ("3000000000 = 3000000000.0", true),
        ("-0.5 < 0.5", true),
        ("TRUE = TRUE", true),
        ("'a' = 'a'", true),
        ("1 = TRUE", false),
    ];
    for (expression, want) in cases {
        let selector = Selector::compile(expression).unwrap();
        assert_eq!(
            selector.matches(&Vec::<(&str, &str)>::new()),
            want,
            "{expression}"
        );
    }
}

#[test]
fn deep_expressions_are_refused_before_they_can_exhaust_the_stack() {
    use crate::limits::{SQL92_NESTING_MAX, SQL92_OPERATORS_MAX};
    let nested = |depth: usize| format!("{}a = 1{}", "(".repeat(depth), ")".repeat(depth));
    let deepest = Selector::compile(&nested(SQL92_NESTING_MAX)).unwrap();
    assert!(deepest.matches(&[("a", "1")]));
    let error = Selector::compile(&nested(100_000)).unwrap_err();
    assert!(error.to_string().contains("too complex"), "{error}");
    let nots = format!("{}a = 1", "NOT ".repeat(100_000));
    assert!(Selector::compile(&nots).is_err());
    // Each term has one operator, and one OR joins it to the next.
    let chain = |terms: usize| vec!["a"; terms].join(" OR ");
    let longest = Selector::compile(&chain(SQL92_OPERATORS_MAX + 1)).unwrap();
    assert!(!longest.matches(&[("a", "2")]));
    assert!(Selector::compile(&chain(SQL92_OPERATORS_MAX + 2)).is_err());
    let comparisons = format!("a{}", " > 1".repeat(100_000));
    assert!(Selector::compile(&comparisons).is_err());
    // Strings are not counted.
    let text = format!("b = '{}'", "(-+ NOT AND".repeat(1000));
    assert!(Selector::compile(&text).is_ok());
}

#[test]
fn stored_properties_are_read_in_place() {
    let stored = StoredProperties(b"a\x011\x02TAGS\x02b\x01\x02c\x01x\x01y\x02UNIQ_KEY\x01K");
    assert_eq!(stored.property("a"), Some("1"));
    assert_eq!(stored.property("TAGS"), None);
    assert_eq!(stored.property("b"), None);
    assert_eq!(stored.property("c"), Some("x\x01y"));
    assert_eq!(stored.property("UNIQ_KEY"), Some("K"));
    assert!(Selector::compile("a = 1 AND b IS NULL")
        .unwrap()
        .matches(&stored));
}
