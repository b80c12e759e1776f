//! Message filters shared by the pull and POP processors: tag expressions by their hash
//! codes (`FilterAPI`), SQL92 selectors over a stored record's properties.

use crate::store::consume_queue::tags_code;
use crate::store::message::{decode_record, Record};
use ferromq_protocol::filter::sql92::{Selector, StoredProperties};
use ferromq_protocol::filter::EXPRESSION_TYPE_SQL92;

/// Whether an `expressionType` is a tag one (`ExpressionType.isTagType`): unset, empty or
/// `TAG`.
pub(crate) fn is_tag_type(kind: &str) -> bool {
    kind.is_empty() || kind == "TAG"
}

/// Compiles a pull's own subscription (`FilterFactory.get(type).compile`): SQL92 is the only
/// type besides tags.
pub(crate) fn compile(kind: &str, expression: &str) -> Result<Selector, String> {
    if kind != EXPRESSION_TYPE_SQL92 {
        return Err(format!("The filter type {kind} is not supported"));
    }
    Selector::compile(expression).map_err(|e| e.to_string())
}

/// The properties of a stored record, read in place; `None` if it is not a message record.
pub(crate) fn stored_properties(record: &[u8]) -> Option<StoredProperties<'_>> {
    match decode_record(record, false) {
        Ok(Record::Message { record, .. }) => Some(StoredProperties(record.properties)),
        _ => None,
    }
}

/// Tag hash codes of a TAG expression; `None` for "all" (`*` or empty).
pub(crate) fn tag_codes(expression: &str) -> Option<Vec<i64>> {
    let expression = expression.trim();
    if expression.is_empty() || expression == "*" {
        return None;
    }
    Some(
        expression
            .split("||")
            .map(str::trim)
            .filter(|tag| !tag.is_empty())
            .map(|tag| tags_code(Some(tag)))
            .collect(),
    )
}
