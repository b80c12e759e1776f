//! The messages and the `MessagingService` server trait generated from `messaging.proto`
//! (package `apache.rocketmq.v2`) by the build script: prost structs and enums, and tonic's
//! `messaging_service_server` (and `messaging_service_client`, which the tests call the
//! endpoint with), plus the well-known `Duration` and `Timestamp` they use.

#![allow(missing_docs, missing_debug_implementations, clippy::pedantic)]
#![allow(clippy::all)]

pub use prost_types::{Duration, Timestamp};

include!(concat!(env!("OUT_DIR"), "/apache.rocketmq.v2.rs"));
