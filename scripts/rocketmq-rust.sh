#!/usr/bin/env bash
# Install and run the crates.io rocketmq-rust name server and broker, a peer RocketMQ-protocol
# broker we did not write. Used by scripts/interop-rocketmq-rust.sh and scripts/compare.sh.
#
#   scripts/rocketmq-rust.sh install          # cargo install into the cache (~30 min cold)
#   scripts/rocketmq-rust.sh start DIR PORTS  # start namesrv + broker, data under DIR
#   scripts/rocketmq-rust.sh stop DIR
#
# PORTS is "NAMESRV_PORT:BROKER_PORT" (default 19876:20911). The cache folder is
# $FERROMQ_PEER_CACHE (default ~/.cache/ferromq/rocketmq-rust); a second install is a no-op.
set -euo pipefail

version="${ROCKETMQ_RUST_VERSION:-1.0.0}"
cache="${FERROMQ_PEER_CACHE:-$HOME/.cache/ferromq/rocketmq-rust}"
bin="$cache/bin"

install() {
    mkdir -p "$cache"
    for crate in rocketmq-namesrv rocketmq-broker; do
        exe="$bin/${crate}-rust"
        if [[ -x "$exe" ]]; then
            echo "$crate: cached at $exe"
            continue
        fi
        echo "$crate $version: cargo install into $cache (tens of minutes on 2 cores)"
        cargo install --locked --version "$version" --root "$cache" "$crate"
    done
}

wait_port() {
    local port="$1" deadline=$((SECONDS + 30))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        if ((SECONDS > deadline)); then
            echo "nothing listens on 127.0.0.1:$port after 30 s" >&2
            return 1
        fi
        sleep 0.2
    done
}

start() {
    local dir="$1" ports="${2:-19876:20911}"
    local ns_port="${ports%%:*}" broker_port="${ports##*:}"
    mkdir -p "$dir/home" "$dir/store"
    export ROCKETMQ_HOME="$dir/home"
    export ROCKETMQ_SECURITY_PROFILE=development-insecure-loopback
    cat > "$dir/broker.toml" <<TOML
[broker]
namesrvAddr = "127.0.0.1:$ns_port"
brokerIp1 = "127.0.0.1"
storePathRootDir = "$dir/store"

[broker.brokerServerConfig]
bindAddress = "127.0.0.1"
listenPort = $broker_port

[broker.brokerIdentity]
brokerName = "peer-broker-a"
brokerClusterName = "PeerCluster"
brokerId = 0

[store]
storeType = "LocalFile"
commitLogMicroBatchEnabled = false
TOML
    "$bin/rocketmq-namesrv-rust" --bindAddress 127.0.0.1 --listenPort "$ns_port" \
        > "$dir/namesrv.log" 2>&1 &
    echo $! > "$dir/namesrv.pid"
    wait_port "$ns_port"
    "$bin/rocketmq-broker-rust" -c "$dir/broker.toml" > "$dir/broker.log" 2>&1 &
    echo $! > "$dir/broker.pid"
    wait_port "$broker_port"
    echo "rocketmq-rust: namesrv 127.0.0.1:$ns_port, broker 127.0.0.1:$broker_port"
}

stop() {
    local dir="$1"
    for name in broker namesrv; do
        if [[ -f "$dir/$name.pid" ]]; then
            kill "$(cat "$dir/$name.pid")" 2>/dev/null || true
            rm -f "$dir/$name.pid"
        fi
    done
}

case "${1:-}" in
    install) install ;;
    start) start "${2:?data dir}" "${3:-}" ;;
    stop) stop "${2:?data dir}" ;;
    *) echo "usage: $0 install | start DIR [NS_PORT:BROKER_PORT] | stop DIR" >&2; exit 2 ;;
esac
