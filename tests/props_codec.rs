//! Property tests of the remoting codec.
//!
//! Method: proptest generates inputs; every failure prints a seed that proptest replays from
//! `proptest-regressions/`. Properties:
//! - every typed header, filled from its schema with arbitrary values, survives a trip through
//!   a frame in both header serializations and decodes to the same header;
//! - any byte stream, split into any chunks, fed to the streaming decoder never panics, never
//!   buffers much more than the frame limit, and fails as soon as a length prefix is out of
//!   range;
//! - every strict prefix of a valid frame decodes as incomplete, never as an error.

use ferromq::remoting::codec::{check_frame, decode_frame, encode_to_vec, FrameDecoder};
use ferromq::remoting::header::{CommandHeader, ValueKind};
use ferromq::remoting::{
    DecodeError, ExtFields, LanguageCode, RemotingCommand, RequestCode, SerializeType,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};

/// Text Java would send: any UTF-8 except the empty string (which the binary form maps to
/// null, so it cannot round-trip by design).
fn text() -> impl Strategy<Value = String> {
    "\\PC{1,24}"
}

fn value(kind: ValueKind) -> BoxedStrategy<String> {
    match kind {
        ValueKind::Text => text().boxed(),
        ValueKind::Int => any::<i32>().prop_map(|v| v.to_string()).boxed(),
        ValueKind::Long => any::<i64>().prop_map(|v| v.to_string()).boxed(),
        ValueKind::Bool => any::<bool>().prop_map(|v| v.to_string()).boxed(),
        ValueKind::Double => (-1.0e9f64..1.0e9).prop_map(|v| v.to_string()).boxed(),
    }
}

/// Arbitrary extFields for `H`: every required field, each optional one maybe.
fn fields_of<H: CommandHeader>() -> BoxedStrategy<Vec<(String, String)>> {
    let parts: Vec<BoxedStrategy<Option<(String, String)>>> = H::FIELDS
        .iter()
        .map(|info| {
            let key = info.key.to_owned();
            let entry = value(info.kind).prop_map(move |v| (key.clone(), v));
            if info.required {
                entry.prop_map(Some).boxed()
            } else {
                proptest::option::of(entry).boxed()
            }
        })
        .collect();
    parts
        .prop_map(|entries| entries.into_iter().flatten().collect())
        .boxed()
}

fn header_round_trips<H: CommandHeader + PartialEq + std::fmt::Debug>() {
    let config = Config {
        cases: 64,
        source_file: Some(file!()),
        ..Config::default()
    };
    let mut runner = TestRunner::new(config);
    let strategy = (fields_of::<H>(), any::<i32>(), proptest::option::of(text()));
    runner
        .run(&strategy, |(entries, opaque, remark)| {
            let fields: ExtFields = entries.into_iter().collect();
            let header = H::read_from(&fields).expect("required fields present");
            for serialize_type in [SerializeType::Json, SerializeType::RocketMq] {
                let mut command = RemotingCommand::request_with_header(RequestCode(17), &header);
                command.serialize_type = serialize_type;
                command.opaque = opaque;
                command.remark = remark.clone();
                command.language = LanguageCode::RUST;
                let frame = encode_to_vec(&command);
                let mut decoded = decode_frame(&frame).expect("own frame decodes");
                // The binary form cannot tell an empty map from none (Java reads both as null).
                if serialize_type == SerializeType::RocketMq && decoded.ext_fields.is_none() {
                    decoded.ext_fields = Some(ExtFields::new());
                }
                prop_assert_eq!(&decoded, &command);
                let again: H = decoded.decode_header().expect("own header decodes");
                prop_assert_eq!(&again, &header);
            }
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{}: {e}", std::any::type_name::<H>()));
}

macro_rules! all_headers_round_trip {
    ($($header:ty,)*) => {
        #[test]
        fn every_typed_header_round_trips_in_both_serializations() {
            let mut count = 0;
            $(header_round_trips::<$header>(); count += 1;)*
            assert!(count >= 50, "{count} headers");
        }
    };
}

ferromq_protocol::for_each_header!(all_headers_round_trip);

/// A valid frame of either serialization, with arbitrary fields and body.
fn any_frame() -> impl Strategy<Value = Vec<u8>> {
    (
        any::<i16>(),
        any::<i32>(),
        0i32..4,
        proptest::option::of(text()),
        proptest::collection::vec((text(), text()), 0..5),
        proptest::collection::vec(any::<u8>(), 0..64),
        any::<bool>(),
    )
        .prop_map(|(code, opaque, flag, remark, ext, body, binary)| {
            let mut command = RemotingCommand::request(RequestCode(i32::from(code)));
            command.opaque = opaque;
            command.flag = flag;
            command.remark = remark;
            command.ext_fields = Some(ext.into_iter().collect());
            command.body = body;
            command.serialize_type = if binary {
                SerializeType::RocketMq
            } else {
                SerializeType::Json
            };
            encode_to_vec(&command)
        })
}

const SMALL_LIMIT: usize = 4096;

/// Feeds `stream` in chunks of the given sizes; returns how many commands decoded before the
/// first error (if any), checking the buffer bound after every chunk.
fn feed(stream: &[u8], chunk_sizes: &[usize]) -> Result<usize, DecodeError> {
    let mut decoder = FrameDecoder::new(SMALL_LIMIT);
    let mut decoded = 0;
    let mut at = 0;
    let mut sizes = chunk_sizes.iter().cycle();
    while at < stream.len() {
        let size = (*sizes.next().unwrap()).clamp(1, stream.len() - at);
        decoder.extend(&stream[at..at + size]);
        at += size;
        while decoder.next_command()?.is_some() {
            decoded += 1;
        }
        assert!(
            decoder.buffered() < SMALL_LIMIT + size,
            "buffered {}",
            decoder.buffered()
        );
    }
    Ok(decoded)
}

proptest! {
    #![proptest_config(Config { cases: 512, ..Config::default() })]

    #[test]
    fn arbitrary_bytes_in_any_chunking_never_panic(
        stream in proptest::collection::vec(any::<u8>(), 0..8192),
        chunks in proptest::collection::vec(1usize..700, 1..8),
    ) {
        let _ = feed(&stream, &chunks);
    }

    #[test]
    fn mutated_frames_never_panic(
        frames in proptest::collection::vec(any_frame(), 1..4),
        flips in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 0..6),
        chunks in proptest::collection::vec(1usize..300, 1..5),
    ) {
        let mut stream: Vec<u8> = frames.concat();
        for (index, byte) in flips {
            let at = index.index(stream.len());
            stream[at] ^= byte;
        }
        let _ = feed(&stream, &chunks);
    }

    #[test]
    fn valid_frames_in_any_chunking_all_decode(
        frames in proptest::collection::vec(any_frame(), 1..6),
        chunks in proptest::collection::vec(1usize..300, 1..5),
    ) {
        let stream: Vec<u8> = frames.concat();
        prop_assert_eq!(feed(&stream, &chunks), Ok(frames.len()));
    }

    #[test]
    fn strict_prefix_of_frame_is_incomplete(frame in any_frame()) {
        for cut in 0..frame.len() {
            prop_assert_eq!(check_frame(&frame[..cut], 1 << 24), Ok(None));
        }
    }

    #[test]
    fn length_prefix_over_limit_fails_before_the_frame_arrives(len in (SMALL_LIMIT as i32 - 3)..i32::MAX) {
        let error = feed(&len.to_be_bytes(), &[4]).unwrap_err();
        let is_too_large = matches!(error, DecodeError::FrameTooLarge { .. });
        prop_assert!(is_too_large);
    }
}
