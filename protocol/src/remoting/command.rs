//! `RemotingCommand`: one request or response, the unit every RocketMQ peer exchanges.
//!
//! Mirrors `RemotingCommand` (`remoting/.../protocol/RemotingCommand.java`). A command is a
//! header (code, language, version, opaque, flag, remark, extFields) plus an opaque body. The
//! header travels in one of two serializations, JSON or the binary "ROCKETMQ" form
//! (`reference/remoting.md` §4); a command remembers which one it arrived in so that the answer
//! goes back in the same one, as a 4.9.x server does.
//!
//! Invariants:
//! - A response echoes the request's `opaque` and has flag bit 0 set; ferromq tags its own
//!   commands `JAVA` with [`CURRENT_VERSION`], as the Java servers do.
//! - `extFields` keeps insertion order, so a decoded binary header re-encodes byte for byte.

use super::header::{CommandHeader, HeaderError};
use super::{RequestCode, ResponseCode};

/// Flag bit 0: the command is a response (`RPC_TYPE`).
pub const FLAG_RESPONSE: i32 = 0x1;
/// Flag bit 1: the request is oneway; the receiver sends no response (`RPC_ONEWAY`).
pub const FLAG_ONEWAY: i32 = 0x2;

/// The `version` ferromq stamps on the commands it creates: the ordinal of RocketMQ 5.3.3
/// (`MQVersion.Version.V5_3_3`), because ferromq answers with 5.x shapes.
pub const CURRENT_VERSION: i32 = 479;

/// Header serialization of a frame: the top byte of the header-length word.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum SerializeType {
    /// Type 0: the header is one UTF-8 JSON object.
    #[default]
    Json,
    /// Type 1: the compact binary header of `RocketMQSerializable`.
    RocketMq,
}

impl SerializeType {
    /// The wire byte of this serialization.
    #[must_use]
    pub fn code(self) -> u8 {
        match self {
            SerializeType::Json => 0,
            SerializeType::RocketMq => 1,
        }
    }

    /// The serialization for a wire byte, if it is one RocketMQ defines.
    #[must_use]
    pub fn from_code(code: u8) -> Option<SerializeType> {
        match code {
            0 => Some(SerializeType::Json),
            1 => Some(SerializeType::RocketMq),
            _ => None,
        }
    }

    /// The Java enum name, as written in `serializeTypeCurrentRPC`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            SerializeType::Json => "JSON",
            SerializeType::RocketMq => "ROCKETMQ",
        }
    }
}

/// The sender's implementation language (`LanguageCode` in Java).
///
/// Kept as the wire byte so that codes ferromq does not know survive a round trip.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct LanguageCode(pub u8);

impl LanguageCode {
    /// Java, the language ferromq reports for its own commands.
    pub const JAVA: LanguageCode = LanguageCode(0);
    /// Fallback for a JSON `language` name ferromq does not know.
    pub const OTHER: LanguageCode = LanguageCode(7);
    /// Go.
    pub const GO: LanguageCode = LanguageCode(9);
    /// Rust.
    pub const RUST: LanguageCode = LanguageCode(12);

    const NAMES: [&'static str; 14] = [
        "JAVA", "CPP", "DOTNET", "PYTHON", "DELPHI", "ERLANG", "RUBY", "OTHER", "HTTP", "GO",
        "PHP", "OMS", "RUST", "NODE_JS",
    ];

    /// The Java enum name, or `None` for a code no RocketMQ release defines.
    #[must_use]
    pub fn name(self) -> Option<&'static str> {
        Self::NAMES.get(usize::from(self.0)).copied()
    }

    /// The code for a Java enum name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<LanguageCode> {
        let index = Self::NAMES.iter().position(|known| *known == name)?;
        Some(LanguageCode(
            u8::try_from(index).expect("fewer than 256 language names"),
        ))
    }
}

impl std::fmt::Debug for LanguageCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.name() {
            Some(name) => f.write_str(name),
            None => write!(f, "LanguageCode({})", self.0),
        }
    }
}

/// The custom-header map of a command: string keys to string values, in insertion order.
///
/// Java keeps a `HashMap`; order matters only for byte-exact binary re-encoding, which this
/// type preserves. Lookups are linear: headers hold a handful of entries. Keys and values
/// live back to back in one string (a header is decoded for every request: one allocation
/// for its text, one for its entries, instead of two per entry).
#[derive(Clone, Default)]
pub struct ExtFields {
    text: String,
    entries: Vec<Entry>,
}

/// Where one entry's key and value are in [`ExtFields::text`]: byte ranges.
#[derive(Clone, Copy, Debug)]
struct Entry {
    key: (usize, usize),
    value: (usize, usize),
}

impl ExtFields {
    /// An empty map (no allocation).
    pub const EMPTY: ExtFields = ExtFields {
        text: String::new(),
        entries: Vec::new(),
    };

    /// An empty map.
    #[must_use]
    pub fn new() -> ExtFields {
        ExtFields::EMPTY
    }

    /// An empty map with room for `capacity` entries.
    #[must_use]
    pub fn with_capacity(capacity: usize) -> ExtFields {
        ExtFields {
            text: String::with_capacity(capacity * 24),
            entries: Vec::with_capacity(capacity),
        }
    }

    fn slice(&self, (start, end): (usize, usize)) -> &str {
        &self.text[start..end]
    }

    fn append(&mut self, text: &str) -> (usize, usize) {
        let start = self.text.len();
        self.text.push_str(text);
        (start, self.text.len())
    }

    /// The value of `key`; for a key present twice (possible in binary headers) the last one
    /// wins, as in Java's decoder.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<&str> {
        self.entries
            .iter()
            .rev()
            .find(|entry| self.slice(entry.key) == key)
            .map(|entry| self.slice(entry.value))
    }

    /// Sets `key` to `value`, replacing an existing entry in place.
    pub fn insert(&mut self, key: impl Into<String>, value: impl Into<String>) {
        let key = key.into();
        let value = value.into();
        let found = self
            .entries
            .iter()
            .position(|entry| self.slice(entry.key) == key);
        match found {
            Some(index) => self.entries[index].value = self.append(&value),
            None => self.push_str(&key, &value),
        }
    }

    /// Appends an entry without looking for an existing key (decoders use this to keep the
    /// wire order and duplicates).
    pub fn push(&mut self, key: String, value: String) {
        self.push_str(&key, &value);
    }

    /// [`ExtFields::push`] from borrowed text.
    pub fn push_str(&mut self, key: &str, value: &str) {
        let key = self.append(key);
        let value = self.append(value);
        self.entries.push(Entry { key, value });
    }

    /// Appends an entry whose key and value the caller has just appended to the text with
    /// [`ExtFields::text_mut`], as the byte ranges given.
    pub(crate) fn push_appended(&mut self, key: (usize, usize), value: (usize, usize)) {
        self.entries.push(Entry { key, value });
    }

    /// The text entries point into, for decoders that append a key and value in place.
    pub(crate) fn text_mut(&mut self) -> &mut String {
        &mut self.text
    }

    /// Removes `key`, returning its last value.
    pub fn remove(&mut self, key: &str) -> Option<String> {
        let removed = self.get(key).map(str::to_owned);
        let text = &self.text;
        self.entries
            .retain(|entry| &text[entry.key.0..entry.key.1] != key);
        removed
    }

    /// The entries in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &str)> {
        self.entries
            .iter()
            .map(|entry| (self.slice(entry.key), self.slice(entry.value)))
    }

    /// Number of entries.
    #[must_use]
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the map has no entries.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

impl PartialEq for ExtFields {
    fn eq(&self, other: &ExtFields) -> bool {
        self.iter().eq(other.iter())
    }
}

impl Eq for ExtFields {}

impl std::fmt::Debug for ExtFields {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map().entries(self.iter()).finish()
    }
}

impl<K: Into<String>, V: Into<String>> FromIterator<(K, V)> for ExtFields {
    fn from_iter<I: IntoIterator<Item = (K, V)>>(iter: I) -> Self {
        let mut fields = ExtFields::new();
        for (k, v) in iter {
            fields.insert(k, v);
        }
        fields
    }
}

/// One remoting command: a request or a response.
#[derive(Clone, Debug, PartialEq)]
pub struct RemotingCommand {
    /// Request code for requests, response code for responses.
    pub code: i32,
    /// Sender's language.
    pub language: LanguageCode,
    /// Sender's `MQVersion` ordinal.
    pub version: i32,
    /// Request id; a response carries its request's value.
    pub opaque: i32,
    /// Bit 0 response, bit 1 oneway.
    pub flag: i32,
    /// Error text, if any.
    pub remark: Option<String>,
    /// The custom header. `None` and empty differ only in the JSON form (`extFields` absent or
    /// `{}`), which Java produces for commands without and with a custom header.
    pub ext_fields: Option<ExtFields>,
    /// The header serialization this command arrived in or will be sent in.
    pub serialize_type: SerializeType,
    /// The body bytes, possibly empty.
    pub body: Vec<u8>,
    /// More body, sent after `body` as it is, without being copied into the frame (a pull
    /// answer's records, slices of the mapped CommitLog). Always empty in a decoded command.
    pub body_parts: Vec<bytes::Bytes>,
}

impl RemotingCommand {
    /// A request with `code`, no header and no body; opaque 0 until a client assigns one.
    #[must_use]
    pub fn request(code: RequestCode) -> RemotingCommand {
        RemotingCommand {
            code: code.0,
            language: LanguageCode::JAVA,
            version: CURRENT_VERSION,
            opaque: 0,
            flag: 0,
            remark: None,
            ext_fields: None,
            serialize_type: SerializeType::Json,
            body: Vec::new(),
            body_parts: Vec::new(),
        }
    }

    /// A request carrying a typed custom header.
    #[must_use]
    pub fn request_with_header(code: RequestCode, header: &impl CommandHeader) -> RemotingCommand {
        let mut command = RemotingCommand::request(code);
        command.set_header(header);
        command
    }

    /// The response to `request` with `code` and `remark`: same opaque and serialization,
    /// flag bit 0 set.
    #[must_use]
    pub fn response_to(
        request: &RemotingCommand,
        code: ResponseCode,
        remark: Option<String>,
    ) -> RemotingCommand {
        RemotingCommand {
            code: code.0,
            language: LanguageCode::JAVA,
            version: CURRENT_VERSION,
            opaque: request.opaque,
            flag: FLAG_RESPONSE,
            remark,
            ext_fields: None,
            serialize_type: request.serialize_type,
            body: Vec::new(),
            body_parts: Vec::new(),
        }
    }

    /// A SUCCESS response to `request` with no header and no body.
    #[must_use]
    pub fn success_to(request: &RemotingCommand) -> RemotingCommand {
        RemotingCommand::response_to(request, ResponseCode::SUCCESS, None)
    }

    /// Replaces the custom header with `header`'s fields (the map exists even when every field
    /// is null, as Java's `makeCustomHeaderToNet` leaves it).
    pub fn set_header(&mut self, header: &impl CommandHeader) {
        let mut fields = ExtFields::new();
        header.write_to(&mut fields);
        self.ext_fields = Some(fields);
    }

    /// Decodes the custom header as `H`.
    ///
    /// # Errors
    /// [`HeaderError`] when a required field is missing or unparsable.
    pub fn decode_header<H: CommandHeader>(&self) -> Result<H, HeaderError> {
        static EMPTY: ExtFields = ExtFields::EMPTY;
        H::read_from(self.ext_fields.as_ref().unwrap_or(&EMPTY))
    }

    /// Decodes a header Java decodes by hand (`FastCodesHeader`), with every number that is
    /// present checked ([`super::header::read_strict`]).
    ///
    /// # Errors
    /// [`HeaderError`] when a required field is missing or a number does not parse.
    pub fn decode_header_strict<H: super::header::FastCodesHeader>(
        &self,
    ) -> Result<H, HeaderError> {
        static EMPTY: ExtFields = ExtFields::EMPTY;
        super::header::read_strict(self.ext_fields.as_ref().unwrap_or(&EMPTY))
    }

    /// One extFields value.
    #[must_use]
    pub fn ext(&self, key: &str) -> Option<&str> {
        self.ext_fields.as_ref()?.get(key)
    }

    /// Whether flag bit 0 (response) is set.
    #[must_use]
    pub fn is_response(&self) -> bool {
        self.flag & FLAG_RESPONSE != 0
    }

    /// Whether flag bit 1 (oneway) is set.
    #[must_use]
    pub fn is_oneway(&self) -> bool {
        self.flag & FLAG_ONEWAY != 0
    }

    /// Sets the oneway bit.
    pub fn mark_oneway(&mut self) {
        self.flag |= FLAG_ONEWAY;
    }

    /// The code as a request code.
    #[must_use]
    pub fn request_code(&self) -> RequestCode {
        RequestCode(self.code)
    }

    /// The code as a response code.
    #[must_use]
    pub fn response_code(&self) -> ResponseCode {
        ResponseCode(self.code)
    }

    /// Builder-style body setter.
    #[must_use]
    pub fn with_body(mut self, body: Vec<u8>) -> RemotingCommand {
        self.body = body;
        self
    }
}

#[cfg(test)]
mod tests {
    use super::ExtFields;

    #[test]
    fn ext_fields_keep_order_replace_in_place_and_read_the_last_duplicate() {
        let mut fields = ExtFields::new();
        fields.push_str("topic", "T");
        fields.push("queueId".to_owned(), "1".to_owned());
        fields.push_str("topic", "U");
        assert_eq!(fields.get("topic"), Some("U"));
        assert_eq!(fields.len(), 3);
        fields.insert("queueId", "22");
        assert_eq!(fields.get("queueId"), Some("22"));
        fields.insert("new", "n");
        let order: Vec<_> = fields.iter().collect();
        assert_eq!(
            order,
            [
                ("topic", "T"),
                ("queueId", "22"),
                ("topic", "U"),
                ("new", "n")
            ]
        );
        assert_eq!(fields.remove("topic").as_deref(), Some("U"));
        assert_eq!(fields.get("topic"), None);
        // Equal by entries, whatever text replaced values left behind.
        let same: ExtFields = [("queueId", "22"), ("new", "n")].into_iter().collect();
        assert_eq!(fields, same);
        assert_ne!(fields, ExtFields::EMPTY);
        assert!(ExtFields::EMPTY.is_empty());
        assert_eq!(format!("{same:?}"), r#"{"queueId": "22", "new": "n"}"#);
    }
}
