//! The timer's deliveries: the message a due unit puts (Java's `convert`), and its put with
//! Java's retries.

use super::Stop;
use crate::broker::delay::{
    encode_properties, property, set_property, PROPERTY_REAL_QUEUE_ID, PROPERTY_REAL_TOPIC,
};
use crate::broker::state::now_ms;
use crate::broker::timer::{
    PROPERTY_TIMER_DEQUEUE_MS, PROPERTY_TIMER_ENQUEUE_MS, PROPERTY_TIMER_ROLL_TIMES,
};
use crate::store::commit_log::PutMessage;
use crate::store::message::MessageRecord;
use crate::store::message_store::StoreHandle;
use crate::store::segment_writer::StoreError;
use ferromq_shards::Shutdown;
use std::time::Duration;

/// Tries of a delivery's put (`doPut` three times unless `timerEnableRetryUntilSuccess`).
const PUT_TRIES: u32 = 3;

/// One delivery's put with Java's retries (`doPut` and its caller's loop).
pub(super) async fn put_with_retries(
    store: &StoreHandle,
    message: PutMessage,
    retry_until_success: bool,
    pause: Duration,
    shutdown: &Shutdown,
) -> Result<(), Stop> {
    let mut failures = 0;
    loop {
        match store.put(message.clone()).await {
            Ok(_) => return Ok(()),
            Err(StoreError::TooLarge { .. } | StoreError::Illegal(_)) => {
                let topic = &message.topic;
                tracing::warn!(topic, "timer message refused by the store; dropped");
                return Ok(());
            }
            Err(StoreError::ShuttingDown) => return Err(Stop),
            Err(error) => {
                failures += 1;
                let topic = &message.topic;
                if !retry_until_success && failures >= PUT_TRIES {
                    tracing::error!(%error, topic, failures, "timer delivery failed; dropped");
                    return Ok(());
                }
                tracing::warn!(%error, topic, failures, "timer delivery failed; retrying");
                let sleep = glommio::timer::sleep(pause);
                futures::pin_mut!(sleep);
                let stop = shutdown.wait();
                futures::pin_mut!(stop);
                if let futures::future::Either::Right(_) =
                    futures::future::select(sleep, stop).await
                {
                    return Err(Stop);
                }
            }
        }
    }
}

/// `convert` + `convertMessage`: the message to put for a due unit, `None` when it names
/// no real topic and queue.
pub(super) fn convert(
    record: &MessageRecord<'_>,
    mut properties: Vec<(String, String)>,
    enqueue_time_ms: i64,
    roll: bool,
) -> Option<PutMessage> {
    if enqueue_time_ms != -1 {
        set_property(
            &mut properties,
            PROPERTY_TIMER_ENQUEUE_MS,
            enqueue_time_ms.to_string(),
        );
    }
    if roll {
        let times = property(&properties, PROPERTY_TIMER_ROLL_TIMES)
            .and_then(|t| t.parse::<i32>().ok())
            .map_or(1, |t| t.wrapping_add(1));
        set_property(
            &mut properties,
            PROPERTY_TIMER_ROLL_TIMES,
            times.to_string(),
        );
    }
    set_property(
        &mut properties,
        PROPERTY_TIMER_DEQUEUE_MS,
        now_ms().to_string(),
    );
    let (topic, queue_id) = if roll {
        (record.topic.to_owned(), record.queue_id)
    } else {
        let topic = property(&properties, PROPERTY_REAL_TOPIC)?.to_owned();
        let queue_id = property(&properties, PROPERTY_REAL_QUEUE_ID)?
            .parse()
            .ok()?;
        properties.retain(|(key, _)| key != PROPERTY_REAL_TOPIC && key != PROPERTY_REAL_QUEUE_ID);
        (topic, queue_id)
    };
    Some(PutMessage {
        properties: encode_properties(&properties),
        ..PutMessage::from_record(record, topic, queue_id)
    })
}
