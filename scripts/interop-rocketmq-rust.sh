#!/usr/bin/env bash
# ferromq's client library against a broker we did not write: the crates.io rocketmq-rust
# name server and broker. Installs them into a cache folder (scripts/rocketmq-rust.sh; ~30 min
# cold on 2 cores, a no-op afterwards), starts them on loopback, creates a topic with
# `ferromq admin`, runs client/examples/client_roundtrip.rs (producer → push consumer) and stops them.
#
#   scripts/interop-rocketmq-rust.sh [MESSAGES]
#
# Not part of CI (the cold install is too slow); run by hand.
set -euo pipefail
cd "$(dirname "$0")/.."

messages="${1:-1000}"
ports="${PEER_PORTS:-19876:20911}"
ns="127.0.0.1:${ports%%:*}"
broker="127.0.0.1:${ports##*:}"
data="$(mktemp -d -t ferromq-peer-XXXXXX)"
trap 'scripts/rocketmq-rust.sh stop "$data"; rm -rf "$data"' EXIT

scripts/rocketmq-rust.sh install
cargo build --release --bin ferromq && cargo build --release -p ferromq-client --example client_roundtrip
scripts/rocketmq-rust.sh start "$data" "$ports"

# The broker registers with the name server a moment after it listens.
for _ in $(seq 1 100); do
    if target/release/ferromq admin clusterList -n "$ns" 2>/dev/null | grep -q "$broker"; then
        break
    fi
    sleep 0.2
done
target/release/ferromq admin clusterList -n "$ns"
target/release/ferromq admin updateTopic -n "$ns" -b "$broker" -t RoundTripTopic -r 4 -w 4
for _ in $(seq 1 100); do
    if target/release/ferromq admin topicRoute -n "$ns" -t RoundTripTopic >/dev/null 2>&1; then
        break
    fi
    sleep 0.2
done
target/release/ferromq admin topicRoute -n "$ns" -t RoundTripTopic
time target/release/examples/client_roundtrip --namesrv "$ns" --topic RoundTripTopic \
    --messages "$messages"
target/release/ferromq admin topicStatus -n "$ns" -t RoundTripTopic
echo "interop with rocketmq-rust: OK"
