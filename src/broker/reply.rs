//! What every request processor answers with: the response type, Java's error answer, the
//! region fields of send answers, and the lenient reading of headers Java goes on without.

use crate::remoting::{ExtFields, HeaderError, RemotingCommand, ResponseCode};
use std::borrow::Cow;

/// A response or nothing (oneway).
pub type Response = Option<RemotingCommand>;

/// A response with `code` and `remark` to `request`.
pub fn error(request: &RemotingCommand, code: ResponseCode, remark: impl Into<String>) -> Response {
    Some(RemotingCommand::response_to(
        request,
        code,
        Some(remark.into()),
    ))
}

/// A success answer to `request` with `body`.
pub fn with_body(request: &RemotingCommand, body: impl Into<Vec<u8>>) -> Response {
    let mut response = RemotingCommand::success_to(request);
    response.body = body.into();
    Some(response)
}

/// Java's pointer to its FAQ, appended to some remarks (`FAQUrl.suggestTodo`), as 5.x
/// words it (4.9.8 pointed to http://rocketmq.apache.org/docs/faq/).
pub const FAQ: &str =
    "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

/// Adds what Java's send processors put in every answer once the header decoded: the
/// region and the trace switch (`MSG_REGION`, `TRACE_ON`).
pub fn add_region_fields(response: &mut RemotingCommand) {
    let fields = response.ext_fields.get_or_insert_with(ExtFields::new);
    fields.insert("MSG_REGION", "DefaultRegion");
    fields.insert("TRACE_ON", "true");
}

/// [`add_region_fields`] on a send's answer.
pub fn with_region_fields(mut response: Response) -> Response {
    if let Some(response) = response.as_mut() {
        add_region_fields(response);
    }
    response
}

/// The answer to a request whose header did not decode: a missing topic as Java answers the
/// null it decodes and then validates (`The specified topic is blank.`), anything else with
/// the field and what is wrong with it.
pub fn header_refusal(request: &RemotingCommand, e: &HeaderError) -> Response {
    let remark = match e {
        HeaderError::MissingField {
            field: "topic" | "b",
        } => "The specified topic is blank.".into(),
        other => other.to_string(),
    };
    error(request, ResponseCode::SYSTEM_ERROR, remark)
}

/// A request's extFields with `defaults` for the fields it lacks: those Java goes on
/// without (its decoder only logs a missing `@CFNotNull` field) and that ferromq does not
/// need either.
pub fn with_defaults<'a>(
    request: &'a RemotingCommand,
    defaults: &[(&'static str, &'static str)],
) -> Cow<'a, ExtFields> {
    static EMPTY: ExtFields = ExtFields::EMPTY;
    let given = request.ext_fields.as_ref().unwrap_or(&EMPTY);
    if defaults.iter().all(|(key, _)| given.get(key).is_some()) {
        return Cow::Borrowed(given);
    }
    // Rare (no Java client leaves these out): the copy is paid only then.
    let mut fields = given.clone();
    for (key, value) in defaults {
        if fields.get(key).is_none() {
            fields.insert(*key, *value);
        }
    }
    Cow::Owned(fields)
}
