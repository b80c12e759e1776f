//! The remoting protocol as the broker and name server use it: the bytes and types of
//! `ferromq-protocol` (re-exported here under their old paths), the serving half on glommio
//! shards ([`server`]) and, for the broker's own requests to name servers, the requesting
//! half of `ferromq-client` ([`client`]).

pub use ferromq_client::remoting as client;
pub use ferromq_protocol::remoting::*;
pub mod server;
pub mod tls;
