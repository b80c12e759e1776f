//! RocketMQ 4.x plain ACL on the wire: the ext fields a signed request carries and the
//! signature over it (Java's `AclClientRPCHook`, `AclUtils.combineRequestContent`,
//! `AclSigner`), shared by the client that signs and the broker that checks.
//!
//! The signed content is the values of the request's ext fields sorted by key (Java's
//! `TreeMap`: `AccessKey`, the optional `SecurityToken` and every custom header field that is
//! set), `Signature` itself left out, concatenated as UTF-8, followed by the body. The
//! signature is HMAC-SHA1 of that content keyed by the secret key, in standard Base64.

use crate::remoting::RemotingCommand;
use base64::Engine;
use hmac::{KeyInit, Mac};

/// Ext field of the access key (`SessionCredentials.ACCESS_KEY`).
pub const ACCESS_KEY: &str = "AccessKey";
/// Ext field of the signature (`SessionCredentials.SIGNATURE`).
pub const SIGNATURE: &str = "Signature";
/// Ext field of the optional security token (`SessionCredentials.SECURITY_TOKEN`).
pub const SECURITY_TOKEN: &str = "SecurityToken";
/// Ext field the broker leaves out of the checked content (`MixAll.UNIQUE_MSG_QUERY_FLAG`).
pub const UNIQUE_MSG_QUERY_FLAG: &str = "_UNIQUE_KEY_QUERY";

/// The ext fields no signature covers: the signature, and the unique-key query flag, which
/// Java's client adds outside the custom header and Java's broker leaves out.
pub const UNSIGNED: [&str; 2] = [SIGNATURE, UNIQUE_MSG_QUERY_FLAG];

/// An account's keys (Java `SessionCredentials`).
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// `accessKey`.
    pub access_key: String,
    /// `secretKey`; never printed.
    pub secret_key: String,
    /// `securityToken`, sent and signed when set.
    pub security_token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Credentials")
            .field("access_key", &self.access_key)
            .finish_non_exhaustive()
    }
}

impl Credentials {
    /// Keys without a security token.
    #[must_use]
    pub fn new(access_key: &str, secret_key: &str) -> Credentials {
        Credentials {
            access_key: access_key.to_owned(),
            secret_key: secret_key.to_owned(),
            security_token: None,
        }
    }

    /// Adds `AccessKey` (and `SecurityToken`) to `request` and signs it, as Java's
    /// `AclClientRPCHook.doBeforeRequest` does; call it on the request as it will be sent.
    pub fn sign(&self, request: &mut RemotingCommand) {
        let fields = request.ext_fields.get_or_insert_with(Default::default);
        fields.remove(SIGNATURE);
        fields.insert(ACCESS_KEY, self.access_key.as_str());
        if let Some(token) = &self.security_token {
            fields.insert(SECURITY_TOKEN, token.as_str());
        }
        let content = signed_content(request, &UNSIGNED);
        let signature = signature(&content, &self.secret_key);
        let fields = request.ext_fields.get_or_insert_with(Default::default);
        fields.insert(SIGNATURE, signature);
    }
}

/// The content a signature covers: the values of `request`'s ext fields by key order,
/// except the keys in `skip`, then the body.
#[must_use]
pub fn signed_content(request: &RemotingCommand, skip: &[&str]) -> Vec<u8> {
    let mut fields: Vec<(&str, &str)> = request
        .ext_fields
        .iter()
        .flat_map(|fields| fields.iter())
        .filter(|(key, _)| !skip.contains(key))
        .collect();
    // Java's TreeMap orders by UTF-16 code units; for the ASCII keys of RocketMQ headers
    // that is byte order. A key sent twice keeps its last value, as a map does.
    fields.sort_by(|a, b| java_string_order(a.0, b.0));
    fields.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            earlier.1 = later.1;
        }
        same
    });
    let mut content: Vec<u8> = fields.iter().flat_map(|(_, v)| v.bytes()).collect();
    content.extend_from_slice(&request.body);
    content
}

/// HMAC-SHA1 of `content` keyed by `secret_key`, Base64 (Java's `AclSigner.calSignature`).
#[must_use]
pub fn signature(content: &[u8], secret_key: &str) -> String {
    let mut mac = hmac::Hmac::<sha1::Sha1>::new_from_slice(secret_key.as_bytes())
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(content);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

/// `String.compareTo`: by UTF-16 code units.
fn java_string_order(a: &str, b: &str) -> std::cmp::Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remoting::RequestCode;

    #[test]
    fn signing_covers_sorted_values_and_the_body() {
        let mut request = RemotingCommand::request(RequestCode::SEND_MESSAGE_V2);
        let fields = request.ext_fields.get_or_insert_with(Default::default);
        fields.insert("b", "TopicA");
        fields.insert("a", "group");
        request.body = b"body".to_vec();
        let credentials = Credentials::new("RocketMQ", "12345678");
        credentials.sign(&mut request);
        // AccessKey < a < b in Java's order (upper case first).
        request
            .ext_fields
            .as_mut()
            .unwrap()
            .insert(UNIQUE_MSG_QUERY_FLAG, "true");
        let content = signed_content(&request, &UNSIGNED);
        assert_eq!(content, b"RocketMQgroupTopicAbody");
        let signature = request.ext("Signature").unwrap().to_owned();
        assert_eq!(
            signature,
            super::signature(b"RocketMQgroupTopicAbody", "12345678")
        );
        // Signing again replaces the signature, it does not sign the old one.
        credentials.sign(&mut request);
        assert_eq!(request.ext("Signature"), Some(signature.as_str()));
    }

    #[test]
    fn hmac_sha1_base64_matches_a_known_value() {
        // RFC 2202 test case 2: key "Jefe", data "what do ya want for nothing?".
        let signature = signature(b"what do ya want for nothing?", "Jefe");
        assert_eq!(signature, "7/zfauXrL6LSdBbV8YTfnCWafHk=");
    }
}
