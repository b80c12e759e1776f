//! The page's routes: `GET /` (the page), `GET /live` (its live part, which the page
//! reloads), `GET /message` (a lookup), and the actions `POST /topic`, `POST /offset` and
//! `POST /resend` (HTML forms). Admin work runs on a thread of its own (the admin client
//! blocks), never on the endpoint's runtime. Bad form input gets a 400 page saying which
//! field; a refusal by a broker is shown with its code and remark.

use super::render::{self, Outcome};
use super::{lock, StatusPage};
use crate::admin::cluster::BrokerTargetArgs;
use crate::admin::group::ResetOffsetByTimeArgs;
use crate::admin::message::{self, QueryMsgByIdArgs, QueryMsgByKeyArgs};
use crate::admin::output::Report;
use crate::admin::topic::{self, UpdateTopicArgs};
use crate::admin::{group, AdminClient, AdminError};
use crate::remoting::RequestCode;
use base64::Engine;
use bytes::Bytes;
use ferromq_protocol::acl::Credentials;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, Response, StatusCode};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Largest form body read.
const FORM_BYTES_MAX: usize = 64 * 1024;
/// How long accepted credentials are trusted before the broker is asked again.
const CREDENTIALS_TRUSTED: Duration = Duration::from_secs(60);

/// Answers one request of the page (any path but `/metrics`).
pub async fn answer(page: &Arc<StatusPage>, request: Request<Incoming>) -> Response<Full<Bytes>> {
    let credentials = match authorize(page, &request).await {
        Ok(credentials) => credentials,
        Err(response) => return response,
    };
    let path = request.uri().path().to_owned();
    let query = request.uri().query().unwrap_or("").to_owned();
    match (request.method().clone(), path.as_str()) {
        (Method::GET | Method::HEAD, "/") => html(StatusCode::OK, render::page(page)),
        (Method::GET | Method::HEAD, "/live") => html(StatusCode::OK, render::live(page)),
        (Method::GET | Method::HEAD, "/message") => {
            let fields = form(query.as_bytes());
            let outcome = lookup(page, credentials, fields).await;
            respond(page, "Message lookup", outcome)
        }
        (Method::POST, "/topic" | "/offset" | "/resend") => {
            let body = match Limited::new(request.into_body(), FORM_BYTES_MAX)
                .collect()
                .await
            {
                Ok(body) => body.to_bytes(),
                Err(_) => {
                    let text = format!("a form of at most {FORM_BYTES_MAX} bytes");
                    return plain(StatusCode::PAYLOAD_TOO_LARGE, text);
                }
            };
            let fields = form(&body);
            match path.as_str() {
                "/topic" => respond(
                    page,
                    "Create or update a topic",
                    update_topic(page, credentials, fields).await,
                ),
                "/offset" => respond(
                    page,
                    "Reset a group's offset",
                    reset_offset(page, credentials, fields).await,
                ),
                _ => respond(
                    page,
                    "Resend a dead-lettered message",
                    resend(page, credentials, fields).await,
                ),
            }
        }
        (_, "/" | "/live" | "/message" | "/topic" | "/offset" | "/resend") => plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "not allowed here".to_owned(),
        ),
        _ => plain(
            StatusCode::NOT_FOUND,
            "not found; the status page is at /, metrics at /metrics".to_owned(),
        ),
    }
}

/// A form field missing or not what it should be: its name.
#[derive(Debug)]
struct BadField(&'static str);

/// A request's outcome, or the field that ends it early.
type Answer = Result<Outcome, BadField>;

/// Admin work the page hands to a thread of its own.
type AdminWork = Box<dyn FnOnce(&mut AdminClient) -> Result<Report, AdminError> + Send>;

fn respond(page: &StatusPage, title: &str, outcome: Answer) -> Response<Full<Bytes>> {
    match outcome {
        Ok(outcome) => {
            let status = match &outcome {
                Outcome::Done(_) => StatusCode::OK,
                Outcome::Refused(_) => StatusCode::UNPROCESSABLE_ENTITY,
            };
            html(status, render::outcome(page, title, &outcome))
        }
        Err(BadField(name)) => bad_field(name),
    }
}

/// With ACL on, the request's Basic credentials, checked by a signed request to the
/// broker (trusted for a minute); a 401 asking for them when missing or refused.
async fn authorize(
    page: &Arc<StatusPage>,
    request: &Request<Incoming>,
) -> Result<Option<Credentials>, Response<Full<Bytes>>> {
    let Some(check_addr) = page.acl_check_addr.clone() else {
        return Ok(None);
    };
    let Some(credentials) = basic_credentials(request) else {
        return Err(unauthorized(
            "sign in with an ACL account's access key and secret key",
        ));
    };
    let trusted = lock(&page.trusted)
        .get(&credentials.access_key)
        .is_some_and(|(secret, at)| {
            *secret == credentials.secret_key && at.elapsed() < CREDENTIALS_TRUSTED
        });
    if !trusted {
        let checked = credentials.clone();
        let page_for_check = Arc::clone(page);
        let verdict = blocking(move || {
            let mut client = page_for_check.admin_client(Some(checked))?;
            let request =
                crate::remoting::RemotingCommand::request(RequestCode::GET_BROKER_RUNTIME_INFO);
            client.call_ok(&check_addr, request).map(drop)
        })
        .await;
        if let Err(error) = verdict {
            return Err(unauthorized(&format!(
                "the broker refused these keys: {error}"
            )));
        }
        lock(&page.trusted).insert(
            credentials.access_key.clone(),
            (credentials.secret_key.clone(), Instant::now()),
        );
    }
    *lock(&page.viewer) = Some(credentials.clone());
    Ok(Some(credentials))
}

fn basic_credentials(request: &Request<Incoming>) -> Option<Credentials> {
    let value = request
        .headers()
        .get(hyper::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let encoded = value.strip_prefix("Basic ")?;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(encoded.trim())
        .ok()?;
    let text = String::from_utf8(decoded).ok()?;
    let (access_key, secret_key) = text.split_once(':')?;
    Some(Credentials {
        access_key: access_key.to_owned(),
        secret_key: secret_key.to_owned(),
        security_token: None,
    })
}

async fn lookup(
    page: &Arc<StatusPage>,
    credentials: Option<Credentials>,
    fields: HashMap<String, String>,
) -> Answer {
    let topic = optional(&fields, "topic");
    let id = optional(&fields, "id");
    let key = optional(&fields, "key");
    let work: AdminWork = match (id, key, topic) {
        (Some(msg_id), _, topic) => Box::new(move |client: &mut AdminClient| {
            message::query_by_id(client, &QueryMsgByIdArgs { msg_id, topic })
        }),
        (None, Some(key), Some(topic)) => Box::new(move |client: &mut AdminClient| {
            let args = QueryMsgByKeyArgs {
                topic,
                key,
                begin_timestamp: 0,
                end_timestamp: i64::MAX,
                max_num: 64,
            };
            message::query_by_key(client, &args)
        }),
        _ => return Err(BadField("id, or key with topic")),
    };
    Ok(run_admin(page, credentials, work).await)
}

async fn update_topic(
    page: &Arc<StatusPage>,
    credentials: Option<Credentials>,
    fields: HashMap<String, String>,
) -> Answer {
    let topic = required(&fields, "topic")?;
    let cluster = match optional(&fields, "cluster") {
        Some(cluster) => cluster,
        None => page.cluster_name().ok_or(BadField("cluster"))?,
    };
    let args = UpdateTopicArgs {
        topic,
        target: BrokerTargetArgs {
            broker: None,
            cluster: Some(cluster),
        },
        read_queue_nums: number(&fields, "read", 8)?,
        write_queue_nums: number(&fields, "write", 8)?,
        perm: number(&fields, "perm", 6)?,
        order: false,
    };
    let work = Box::new(move |client: &mut AdminClient| topic::update_topic(client, &args));
    Ok(run_admin(page, credentials, work).await)
}

async fn reset_offset(
    page: &Arc<StatusPage>,
    credentials: Option<Credentials>,
    fields: HashMap<String, String>,
) -> Answer {
    let args = ResetOffsetByTimeArgs {
        group: required(&fields, "group")?,
        topic: required(&fields, "topic")?,
        timestamp: optional(&fields, "timestamp").unwrap_or_else(|| "now".to_owned()),
        force: true,
        broker: None,
        queue: None,
    };
    let work = Box::new(move |client: &mut AdminClient| group::reset_offset_by_time(client, &args));
    Ok(run_admin(page, credentials, work).await)
}

async fn resend(
    page: &Arc<StatusPage>,
    credentials: Option<Credentials>,
    fields: HashMap<String, String>,
) -> Answer {
    let group = required(&fields, "group")?;
    let id = required(&fields, "id")?;
    let work =
        Box::new(move |client: &mut AdminClient| message::resend_dead_letter(client, &group, &id));
    Ok(run_admin(page, credentials, work).await)
}

/// Runs `work` with an admin client signing with `credentials`, on a thread of its own.
async fn run_admin(
    page: &Arc<StatusPage>,
    credentials: Option<Credentials>,
    work: AdminWork,
) -> Outcome {
    let page = Arc::clone(page);
    let result = blocking(move || {
        let mut client = page.admin_client(credentials)?;
        work(&mut client)
    })
    .await;
    match result {
        Ok(report) => Outcome::Done(report),
        Err(error) => Outcome::Refused(error.to_string()),
    }
}

/// Runs blocking `work` on a new thread and awaits its result.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce() -> Result<T, AdminError> + Send + 'static,
) -> Result<T, AdminError> {
    let (sender, receiver) = tokio::sync::oneshot::channel();
    let spawned = std::thread::Builder::new()
        .name("status-admin".to_owned())
        .spawn(move || {
            let _ = sender.send(work());
        });
    if let Err(error) = spawned {
        return Err(AdminError::Usage(format!("cannot start a thread: {error}")));
    }
    receiver
        .await
        .unwrap_or_else(|_| Err(AdminError::Usage("the admin thread ended".to_owned())))
}

fn form(bytes: &[u8]) -> HashMap<String, String> {
    form_urlencoded::parse(bytes).into_owned().collect()
}

fn optional(fields: &HashMap<String, String>, name: &str) -> Option<String> {
    fields
        .get(name)
        .map(|value| value.trim().to_owned())
        .filter(|value| !value.is_empty())
}

fn required(fields: &HashMap<String, String>, name: &'static str) -> Result<String, BadField> {
    optional(fields, name).ok_or(BadField(name))
}

fn number(
    fields: &HashMap<String, String>,
    name: &'static str,
    default: i32,
) -> Result<i32, BadField> {
    match optional(fields, name) {
        None => Ok(default),
        Some(text) => text.parse().map_err(|_| BadField(name)),
    }
}

fn bad_field(name: &str) -> Response<Full<Bytes>> {
    plain(
        StatusCode::BAD_REQUEST,
        format!("missing or bad field: {name}"),
    )
}

fn unauthorized(reason: &str) -> Response<Full<Bytes>> {
    let mut response = plain(StatusCode::UNAUTHORIZED, format!("{reason}\n"));
    response.headers_mut().insert(
        hyper::header::WWW_AUTHENTICATE,
        hyper::header::HeaderValue::from_static("Basic realm=\"ferromq\""),
    );
    response
}

fn html(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    with_type(status, "text/html; charset=utf-8", body)
}

fn plain(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    with_type(status, "text/plain; charset=utf-8", body)
}

fn with_type(
    status: StatusCode,
    content_type: &'static str,
    body: String,
) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static(content_type),
    );
    response
}
