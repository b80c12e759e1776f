//! Message filters shared by the pull and POP processors: tag expressions by their hash
//! codes (`FilterAPI`), SQL92 selectors over a stored record's properties.

use crate::store::consume_queue::tags_code;
use crate::store::message::{decode_record, Record};
use crate::store::reader::{PullFilter, RecordFilter};
use ferromq_protocol::filter::sql92::{Selector, StoredProperties};
use ferromq_protocol::filter::EXPRESSION_TYPE_SQL92;
use std::sync::Arc;

/// How a pull or a pop filters (Java's `MessageFilter`).
pub(crate) enum Filter {
    /// By the tags codes of the ConsumeQueue units; `None` takes all.
    Tags(Option<Vec<i64>>),
    /// By an SQL92 selector over each record's properties.
    Sql92(Arc<Selector>),
}

impl Filter {
    /// Whether a ConsumeQueue unit of tags code `code` passes.
    pub(crate) fn accepts_code(&self, code: i64) -> bool {
        match self {
            Filter::Tags(Some(codes)) => codes.contains(&code),
            Filter::Tags(None) | Filter::Sql92(_) => true,
        }
    }

    /// Whether a whole stored record passes (a record that is no message fails a selector).
    pub(crate) fn accepts_record(&self, record: &[u8]) -> bool {
        match self {
            Filter::Sql92(selector) => {
                stored_properties(record).is_some_and(|p| selector.matches(&p))
            }
            Filter::Tags(_) => true,
        }
    }

    /// The store's view of this filter, through `accepts` and `by_selector`, closures over
    /// [`Filter::accepts_code`] and [`Filter::accepts_record`] (the store takes `dyn Fn`s):
    /// each is left out when it takes everything.
    pub(crate) fn pull_filter<'a>(
        &self,
        accepts: &'a dyn Fn(i64) -> bool,
        by_selector: RecordFilter<'a>,
    ) -> PullFilter<'a> {
        PullFilter {
            tags_codes: matches!(self, Filter::Tags(Some(_))).then_some(accepts),
            records: matches!(self, Filter::Sql92(_)).then_some(by_selector),
        }
    }
}

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
