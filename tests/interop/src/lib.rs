//! Interop tests of ferromq with the crates.io RocketMQ client (`rocketmq-client-rust`).
//!
//! The tests live in `tests/`; their shared harness is `tests/common/mod.rs`: a name server
//! and a broker started in the test's own process through the ferromq library, and the
//! client's runtime set up as its examples do. This library is empty: it exists because a
//! package needs a target, and it keeps the client out of the main package's dependencies.
