//! SEARCH_OFFSET_BY_TIMESTAMP's search (`ConsumeQueue.getOffsetInQueueByTime`): a queue
//! offset by the store time of its messages, on either side of a time.

use crate::store::reader::StoreReader;
use ferromq_uring::IoError;

/// Which side of a time SEARCH_OFFSET_BY_TIMESTAMP answers (5.x's `BoundaryType`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Boundary {
    /// The first message stored at or after the time (`LOWER`, the default).
    Lower,
    /// The last message stored at or before the time (`UPPER`).
    Upper,
}

impl Boundary {
    /// As 5.x's `BoundaryType.getType`: `upper` in any case is [`Boundary::Upper`],
    /// anything else (or nothing: 4.x clients send none) [`Boundary::Lower`].
    #[must_use]
    pub fn from_header(value: Option<&str>) -> Boundary {
        match value {
            Some(name) if name.eq_ignore_ascii_case("upper") => Boundary::Upper,
            _ => Boundary::Lower,
        }
    }
}

impl StoreReader {
    /// The queue offset at `timestamp`'s `boundary` (5.x's `getOffsetInQueueByTime` with a
    /// `BoundaryType`): for [`Boundary::Lower`] the first message stored at or after it (the
    /// max offset when every message is older), for [`Boundary::Upper`] the last one stored
    /// at or before it (the min offset when every message is newer, where Java answers 0).
    /// Units whose record retention deleted count as older than any time, as Java skips
    /// those below the CommitLog's min offset.
    ///
    /// # Errors
    /// [`IoError`].
    pub async fn offset_by_time(
        &self,
        topic: &str,
        queue_id: i32,
        timestamp: i64,
        boundary: Boundary,
    ) -> Result<i64, IoError> {
        let (min, max) = (
            self.min_offset_in_queue(topic, queue_id),
            self.max_offset_in_queue(topic, queue_id),
        );
        // The first offset past `timestamp`'s side: a message stored at `timestamp` is on
        // the far side for `Upper` and on the near side for `Lower`.
        let (mut low, mut high) = (min, max.max(min));
        while low < high {
            let middle = low + (high - low) / 2;
            let time = self.store_time_at(topic, queue_id, middle).await?;
            let past = time.is_some_and(|time| match boundary {
                Boundary::Lower => time >= timestamp,
                Boundary::Upper => time > timestamp,
            });
            if past {
                high = middle;
            } else {
                low = middle + 1;
            }
        }
        Ok(match boundary {
            Boundary::Lower => low,
            Boundary::Upper => (low - 1).max(min),
        })
    }
}
