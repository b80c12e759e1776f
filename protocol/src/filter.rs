//! Tag filtering on the client side (Java `FilterAPI`): a [`SubscriptionData`] built from a
//! tag expression such as `"TagA || TagB"`, and whether a message's tag passes it.

use crate::calendar::now_ms;
use crate::message::java_string_hash;
use crate::remoting::heartbeat::{SubscriptionData, EXPRESSION_TYPE_TAG, SUB_ALL};

impl SubscriptionData {
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

    /// Whether a message with `tag` passes this TAG subscription (client-side filtering).
    #[must_use]
    pub fn matches_tag(&self, tag: Option<&str>) -> bool {
        if self.matches_all() {
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
}
