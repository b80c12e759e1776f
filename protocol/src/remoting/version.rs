//! `MQVersion.Version`: the names of the version ordinals peers send in every command's
//! `version` field, as 4.9.8's `MQVersion.getVersionDesc` gives them (`V4_9_8` is 409,
//! `V5_3_3` 479), for what admin tools print. Tested below against ordinals read from the
//! 4.9.8 source. Also the ordinals a broker compares a client's version with, named as the
//! enum names them.

/// `MQVersion.Version.V3_0_7_SNAPSHOT`: the first client that reports its offsets
/// (GET_CONSUMER_STATUS_FROM_CLIENT) and applies a pushed reset (RESET_CONSUMER_CLIENT_OFFSET).
pub const V3_0_7_SNAPSHOT: i32 = 28;

/// `MQVersion.Version.V3_1_8_SNAPSHOT`: the first client that answers the broker's calls
/// (GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY).
pub const V3_1_8_SNAPSHOT: i32 = 62;

/// The first ordinals, before the regular `SNAPSHOT` / release pairs.
const FIRST: [&str; 16] = [
    "V3_0_0_SNAPSHOT",
    "V3_0_0_ALPHA1",
    "V3_0_0_BETA1",
    "V3_0_0_BETA2",
    "V3_0_0_BETA3",
    "V3_0_0_BETA4",
    "V3_0_0_BETA5",
    "V3_0_0_BETA6_SNAPSHOT",
    "V3_0_0_BETA6",
    "V3_0_0_BETA7_SNAPSHOT",
    "V3_0_0_BETA7",
    "V3_0_0_BETA8_SNAPSHOT",
    "V3_0_0_BETA8",
    "V3_0_0_BETA9_SNAPSHOT",
    "V3_0_0_BETA9",
    "V3_0_0_FINAL",
];

/// The releases after [`FIRST`], each as a `_SNAPSHOT` then a release ordinal:
/// (major, minor, first patch, last patch), in the enum's order.
fn releases() -> impl Iterator<Item = (u32, u32, u32)> {
    let mut lines: Vec<(u32, u32, u32, u32)> = vec![(3, 0, 1, 15), (3, 1, 0, 9), (3, 2, 0, 9)];
    lines.extend((3..=9).map(|minor| (3, minor, 1, 9)));
    lines.extend((4..=5).flat_map(|major| (0..=9).map(move |minor| (major, minor, 0, 9))));
    lines
        .into_iter()
        .flat_map(|(major, minor, first, last)| (first..=last).map(move |p| (major, minor, p)))
}

/// The name of version ordinal `value`; past the last one, the last (`V5_9_9`), as Java.
#[must_use]
pub fn version_desc(value: i32) -> String {
    let index = usize::try_from(value).unwrap_or(0);
    if let Some(name) = FIRST.get(index) {
        return (*name).to_owned();
    }
    let pair = (index - FIRST.len()) / 2;
    let snapshot = (index - FIRST.len()).is_multiple_of(2);
    match releases().nth(pair) {
        Some((major, minor, patch)) if snapshot => format!("V{major}_{minor}_{patch}_SNAPSHOT"),
        Some((major, minor, patch)) => format!("V{major}_{minor}_{patch}"),
        None => "V5_9_9".to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::{version_desc, V3_0_7_SNAPSHOT, V3_1_8_SNAPSHOT};

    #[test]
    fn ordinals_name_the_versions_java_names() {
        assert_eq!(version_desc(0), "V3_0_0_SNAPSHOT");
        assert_eq!(version_desc(15), "V3_0_0_FINAL");
        assert_eq!(version_desc(16), "V3_0_1_SNAPSHOT");
        assert_eq!(version_desc(28), "V3_0_7_SNAPSHOT");
        assert_eq!(version_desc(V3_0_7_SNAPSHOT), "V3_0_7_SNAPSHOT");
        assert_eq!(version_desc(V3_1_8_SNAPSHOT), "V3_1_8_SNAPSHOT");
        assert_eq!(version_desc(212), "V4_0_0_SNAPSHOT");
        assert_eq!(version_desc(401), "V4_9_4");
        assert_eq!(version_desc(409), "V4_9_8");
        assert_eq!(version_desc(479), "V5_3_3");
        assert_eq!(version_desc(610), "V5_9_9_SNAPSHOT");
        assert_eq!(version_desc(611), "V5_9_9");
        assert_eq!(version_desc(5000), "V5_9_9");
        assert_eq!(version_desc(-1), "V3_0_0_SNAPSHOT");
    }
}
