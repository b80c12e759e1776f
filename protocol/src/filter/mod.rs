//! Subscriptions as Java's `FilterAPI` builds them: a [`SubscriptionData`] from a tag
//! expression such as `"TagA || TagB"` or from a [`MessageSelector`] (tags or an SQL92
//! expression over message properties, which the broker evaluates), and whether a message's
//! tag passes it on the client side. [`sql92`] compiles and evaluates SQL92 selectors.

pub mod sql92;

use crate::calendar::now_ms;
use crate::message::java_string_hash;
use crate::remoting::heartbeat::{SubscriptionData, EXPRESSION_TYPE_TAG, SUB_ALL};

/// The expression type of SQL92 filters (`ExpressionType.SQL92`).
pub const EXPRESSION_TYPE_SQL92: &str = "SQL92";

/// What a consumer subscribes to in a topic (Java `MessageSelector`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MessageSelector {
    /// A tag expression: `*`, `TagA`, `TagA || TagB` (`MessageSelector.byTag`).
    Tag(String),
    /// An SQL92 expression over the message's properties, e.g. `a > 5 AND b = 'x'`
    /// (`MessageSelector.bySql`); the broker filters, and only a broker with
    /// `enablePropertyFilter=true` takes it.
    Sql92(String),
}

impl MessageSelector {
    /// A tag selector.
    #[must_use]
    pub fn by_tag(expression: &str) -> MessageSelector {
        MessageSelector::Tag(expression.to_owned())
    }

    /// An SQL92 selector.
    #[must_use]
    pub fn by_sql(expression: &str) -> MessageSelector {
        MessageSelector::Sql92(expression.to_owned())
    }

    /// Its `expressionType` on the wire.
    #[must_use]
    pub fn expression_type(&self) -> &'static str {
        match self {
            MessageSelector::Tag(_) => EXPRESSION_TYPE_TAG,
            MessageSelector::Sql92(_) => EXPRESSION_TYPE_SQL92,
        }
    }
}

impl SubscriptionData {
    /// The subscription `selector` makes (`FilterAPI.build`): a tag one as
    /// [`SubscriptionData::from_expression`], an SQL92 one with the expression as it is.
    ///
    /// # Errors
    /// Java's message for an empty SQL92 expression.
    pub fn from_selector(
        topic: &str,
        selector: &MessageSelector,
    ) -> Result<SubscriptionData, String> {
        match selector {
            MessageSelector::Tag(expression) => Ok(Self::from_expression(topic, expression)),
            MessageSelector::Sql92(expression) if expression.trim().is_empty() => {
                Err(format!("Expression can't be null! {EXPRESSION_TYPE_SQL92}"))
            }
            MessageSelector::Sql92(expression) => Ok(SubscriptionData {
                topic: topic.to_owned(),
                sub_string: expression.clone(),
                sub_version: now_ms(),
                expression_type: Some(EXPRESSION_TYPE_SQL92.to_owned()),
                ..SubscriptionData::default()
            }),
        }
    }

    /// The `expressionType` a pull of this subscription names (TAG when unset).
    #[must_use]
    pub fn expression_type(&self) -> &str {
        self.expression_type
            .as_deref()
            .unwrap_or(EXPRESSION_TYPE_TAG)
    }

    /// A TAG subscription as Java's `FilterAPI.buildSubscriptionData` makes it: `*` or an
    /// empty expression matches all; otherwise the `||`-separated tags, trimmed, empty ones
    /// dropped, each with its `String.hashCode`. `sub_version` is the current time in ms.
    #[must_use]
    pub fn from_expression(topic: &str, expression: &str) -> SubscriptionData {
        let mut data = SubscriptionData {
            topic: topic.to_owned(),
            sub_string: expression.to_owned(),
            sub_version: now_ms(),
            expression_type: Some(EXPRESSION_TYPE_TAG.to_owned()),
            ..SubscriptionData::default()
        };
        if expression.is_empty() || expression == SUB_ALL {
            data.sub_string = SUB_ALL.to_owned();
            return data;
        }
        for tag in expression.split("||").map(str::trim) {
            if !tag.is_empty() && !data.tags_set.iter().any(|t| t == tag) {
                data.tags_set.push(tag.to_owned());
                data.code_set.push(java_string_hash(tag));
            }
        }
        data
    }

    /// Whether this subscription matches every tag.
    #[must_use]
    pub fn matches_all(&self) -> bool {
        self.sub_string.is_empty() || self.sub_string == SUB_ALL
    }

    /// Whether a message with `tag` passes this subscription's tags on the client side; a
    /// subscription with no tags (all, or SQL92, which the broker alone evaluates) passes
    /// every message, as Java's `PullAPIWrapper` does.
    #[must_use]
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        if self.matches_all() || self.tags_set.is_empty() {
            return true;
        }
        tag.is_some_and(|tag| self.tags_set.iter().any(|t| t == tag))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tag_expression_builds_tags_and_java_hash_codes() {
        let data = SubscriptionData::from_expression("T", " a || b ||  || a");
        assert_eq!(data.tags_set, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(data.code_set, vec![97, 98]);
        assert!(data.matches_tag(Some("b")));
        assert!(!data.matches_tag(Some("c")));
        assert!(!data.matches_tag(None));
        let all = SubscriptionData::from_expression("T", "");
        assert_eq!(all.sub_string, "*");
        assert!(all.tags_set.is_empty());
        assert!(all.matches_tag(None));
    }

    #[test]
    fn sql92_selectors_keep_their_expression_and_filter_nothing_here() {
        let selector = MessageSelector::by_sql("a > 5 AND b = 'x'");
        let data = SubscriptionData::from_selector("T", &selector).unwrap();
        assert_eq!(data.sub_string, "a > 5 AND b = 'x'");
        assert_eq!(data.expression_type(), "SQL92");
        assert!(data.tags_set.is_empty() && data.code_set.is_empty());
        assert!(data.matches_tag(Some("anything")) && data.matches_tag(None));
        let empty = SubscriptionData::from_selector("T", &MessageSelector::by_sql(" "));
        assert_eq!(empty.unwrap_err(), "Expression can't be null! SQL92");
        let tags = SubscriptionData::from_selector("T", &MessageSelector::by_tag("a||b")).unwrap();
        assert_eq!((tags.expression_type(), tags.code_set.len()), ("TAG", 2));
    }
}
