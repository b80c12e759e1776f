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
# The store is DIR/store, or /dev/shm when DIR's filesystem is 85 % full or more (see
# store_dir), or $PEER_STORE_DIR when set. The ports used are NS, BROKER, BROKER+1 (HA) and
# BROKER-2 (the broker's fast listener).
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
    local port="$1" deadline=$((SECONDS + 60))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        if ((SECONDS > deadline)); then
            echo "nothing listens on 127.0.0.1:$port after 60 s" >&2
            return 1
        fi
        sleep 0.2
    done
}

# Percent of a filesystem the broker counts as used: (total - available) / total, where
# "available" excludes blocks reserved for root, so it can be well above what df prints.
used_percent() {
    local blocks avail
    read -r blocks avail < <(stat -f -c '%b %a' "$1")
    echo $(((blocks - avail) * 100 / blocks))  # rounded down
}

# The broker's store health check marks the store "disk full" (not writable) when that ratio
# exceeds diskSpaceWarningLevelRatio (90 %, and the broker clamps it to at most 90 %); start-up
# then fails its readiness check (message_store_writable) and rolls back with only
# "core.service.failed: Service lifecycle operation failed". Above 85 % it also deletes
# commit-log files forcibly. So the store goes under DIR only while that filesystem is below
# 85 %, else onto tmpfs (/dev/shm), unless PEER_STORE_DIR names a folder.
store_dir() {
    local dir="$1" shm
    if [[ -n "${PEER_STORE_DIR:-}" ]]; then
        echo "$PEER_STORE_DIR"
    elif (($(used_percent "$dir") < 85)); then
        echo "$dir/store"
    else
        shm="/dev/shm/ferromq-peer-$(realpath "$dir" | md5sum | cut -c1-12)"
        if [[ ! -d /dev/shm ]] || (($(used_percent /dev/shm) >= 85)); then
            echo "the filesystems of $dir and /dev/shm are 85 % full or more;" \
                "the rocketmq-rust broker would refuse writes (set PEER_STORE_DIR)" >&2
            return 1
        fi
        echo "$shm/store"
    fi
}

start() {
    local dir="$1" ports="${2:-19876:20911}"
    local ns_port="${ports%%:*}" broker_port="${ports##*:}" store
    mkdir -p "$dir/home"
    dir="$(realpath "$dir")"
    store="$(store_dir "$dir")"
    mkdir -p "$store"
    echo "$store" > "$dir/store.path"
    [[ -n "${PEER_STORE_DIR:-}" || "$store" == "$dir/store" ]] ||
        echo "rocketmq-rust: $dir is $(used_percent "$dir") % used (broker refuses > 90 %), store in $store" >&2
    export ROCKETMQ_HOME="$dir/home"
    # A Java-style properties file (the broker converts it to its TOML schema and writes the
    # mapping to broker.conversion.json; commitLogMicroBatchEnabled maps to
    # store.commitLogMicroBatchEnabled). Both servers bind 127.0.0.1.
    cat > "$dir/broker.properties" <<PROPS
brokerClusterName=PeerCluster
brokerName=peer-broker-a
brokerId=0
namesrvAddr=127.0.0.1:$ns_port
brokerIP1=127.0.0.1
listenPort=$broker_port
haListenPort=$((broker_port + 1))
storePathRootDir=$store
flushDiskType=${PEER_FLUSH_DISK_TYPE:-ASYNC_FLUSH}
commitLogMicroBatchEnabled=false
PROPS
    "$bin/rocketmq-namesrv-rust" --bindAddress 127.0.0.1 --listenPort "$ns_port" \
        > "$dir/namesrv.log" 2>&1 &
    echo $! > "$dir/namesrv.pid"
    wait_port "$ns_port"
    "$bin/rocketmq-broker-rust" -c "$dir/broker.properties" > "$dir/broker.log" 2>&1 &
    echo $! > "$dir/broker.pid"
    # The broker listens before its start-up can still fail and roll back: wait for its
    # "started successfully" line, not for the port.
    local pid deadline=$((SECONDS + 60))
    pid="$(cat "$dir/broker.pid")"
    until grep -qs "started successfully" "$dir/broker.log"; do
        if ! kill -0 "$pid" 2>/dev/null || ((SECONDS > deadline)); then
            echo "rocketmq-rust broker did not start; tail of $dir/broker.log:" >&2
            tail -n 5 "$dir/broker.log" >&2
            stop "$dir"
            return 1
        fi
        sleep 0.2
    done
    wait_port "$broker_port"
    echo "rocketmq-rust: namesrv 127.0.0.1:$ns_port, broker 127.0.0.1:$broker_port, store $store"
}

stop() {
    local dir="$1" pid pids=() store
    for name in broker namesrv; do
        if [[ -f "$dir/$name.pid" ]]; then
            pid="$(cat "$dir/$name.pid")"
            kill "$pid" 2>/dev/null && pids+=("$pid")
            rm -f "$dir/$name.pid"
        fi
    done
    for pid in "${pids[@]}"; do # wait up to 10 s for each to exit (ports, store files)
        for _ in $(seq 1 50); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.2
        done
    done
    # A store on tmpfs holds memory: remove it once the broker has exited.
    if [[ -f "$dir/store.path" ]]; then
        store="$(cat "$dir/store.path")"
        if [[ "$store" == /dev/shm/ferromq-peer-*/store ]]; then
            rm -rf "${store%/store}"
        fi
        rm -f "$dir/store.path"
    fi
}

case "${1:-}" in
    install) install ;;
    start) start "${2:?data dir}" "${3:-}" ;;
    stop) stop "${2:?data dir}" ;;
    *) echo "usage: $0 install | start DIR [NS_PORT:BROKER_PORT] | stop DIR" >&2; exit 2 ;;
esac
