#!/usr/bin/env bash
# One ferromq-bench workload against two RocketMQ-protocol brokers, in alternation in one run
# (A, B, A, B, ... ROUNDS times each), then both reports and the ratio B/A of produce msgs/s,
# produce p50, p99, p99.9 and max, consume msgs/s, and for e2e the end-to-end p50, p99, p99.9
# and max (each side's figure is the mean over its rounds).
#
#   scripts/compare.sh [--ferromq NS:BROKER] [--peer NS:BROKER] WORKLOAD "ARGS" A B [ROUNDS]
#
# WORKLOAD is produce, consume or e2e. produce and consume both run `produce ARGS` and then
# `consume --drain` of what it stored (the consume rate of a backlog); e2e runs `e2e ARGS`.
# Each round uses its own topic (created on every master with --create-topic), so do not put
# --topic or --create-topic into ARGS.
#
# A and B are name server addresses (host:port), or one of two words that start a broker here
# (stopped again at the end):
#   ferromq        target/release/ferromq standalone, fresh data dir, ports from --ferromq
#                  (default 29876:30911)
#   rocketmq-rust  scripts/rocketmq-rust.sh start, fresh data dir, ports from --peer
#                  (default 19876:20911); needs `scripts/rocketmq-rust.sh install` done
#   ferromq-direct the same with commitLogPageCacheWrites=false: the CommitLog written with
#                  O_DIRECT and ASYNC_FLUSH puts answered after the device write (ferromq
#                  before issue 23), for before/after runs
#   ferromq-copy   the same with pullMappedMemoryMax=0: pulls read into buffers, not sent
#                  from mapped CommitLog windows
#   java           the Java 4.9.8 kit's name server and broker (FERROMQ_JAVA_KIT, else
#                  target/java-kit/4.9.8, built by scripts/java-kit), fresh store, ports from --peer;
#                  FERROMQ_JAVA_KIT=target/java-kit/5.5.0 (`scripts/java-kit 5.5.0 DIR` builds it)
#                  runs the Java 5.x broker instead (its report shows version code 513)
# or ferromq=NS:BROKER / java=NS:BROKER / ... with the ports inline (two ferromq sides).
# FERROMQ_BIN_A=path (or _B) runs that ferromq binary on side A (or B) instead of
# target/release/ferromq, for before/after runs of two builds.
# FLUSH=SYNC_FLUSH in the environment runs every broker started here with that flushDiskType
# (default ASYNC_FLUSH). HA=SYNC_MASTER (or ASYNC_MASTER) makes each ferromq or java side a
# broker group: the master in that role and a slave of the same kind (brokerId=1, listening
# on the broker port + 10), given a few seconds to connect before the run.
# CONSUME_ARGS="..." adds options to each consume run (e.g. --sql hit=1 after a produce with
# --hit-one-in 10, to time a filtered drain).
# BROKER_CONF="key=value\n..." adds those lines to the config of every broker started here
# (e.g. mapedFileSizeCommitLog=67108864 to roll segments often).
# REPORTS=DIR keeps each run's JSON report and SVG chart (latency percentiles, and p50, p99
# and max per 100 ms, where a stall shows at its time) in DIR, named SIDE-ROUND-WORKLOAD.
#
# With --idle-connections N in ARGS (a connection-load run), each produce run of a side started
# here also gets --server-pid of its broker, and the summary adds the idle connections still
# answering and the broker's memory per idle connection.
#
#   scripts/compare.sh produce "--threads 16 --duration 10 --size 1024" ferromq rocketmq-rust
#   scripts/compare.sh produce "--threads 200 --connections 200 --idle-connections 10000 \
#       --duration 20" ferromq java 1
#   scripts/compare.sh e2e "--rate 5000 --duration 20" 127.0.0.1:9876 10.0.0.2:9876 3
set -euo pipefail
cd "$(dirname "$0")/.."

ferromq_ports="29876:30911"
peer_ports="19876:20911"
while [[ "${1:-}" == --* ]]; do
    case "$1" in
        --ferromq) ferromq_ports="$2"; shift 2 ;;
        --peer) peer_ports="$2"; shift 2 ;;
        *) echo "unknown option $1" >&2; exit 2 ;;
    esac
done
if (($# < 4)); then
    sed -n '2,/^set /{/^#/p}' "$0" | sed 's/^# \{0,1\}//' >&2
    exit 2
fi
workload="$1"
args="$2"
side_a="$3"
side_b="$4"
rounds="${5:-2}"
flush="${FLUSH:-ASYNC_FLUSH}"
ha="${HA:-}"
case "$workload" in
    produce | consume | e2e) ;;
    *) echo "WORKLOAD must be produce, consume or e2e, not $workload" >&2; exit 2 ;;
esac
bench=target/release/ferromq-bench
[[ -x "$bench" ]] || { echo "build first: cargo build --release -p ferromq -p ferromq-bench" >&2; exit 1; }
work="$(mktemp -d)"
pids=()
peer_dirs=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
    for dir in "${peer_dirs[@]}"; do scripts/rocketmq-rust.sh stop "$dir" || true; done
    rm -rf "$work"
}
trap cleanup EXIT

wait_port() { # port: bounded wait until something listens on 127.0.0.1:port
    local port="$1" deadline=$((SECONDS + 30))
    until (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; do
        ((SECONDS <= deadline)) || { echo "nothing listens on 127.0.0.1:$port" >&2; return 1; }
        sleep 0.2
    done
}

resolve() { # side label: prints the name server address, starting a broker if asked
    local side="${1%%=*}" label="$2" ports=""
    # HA_A / HA_B set the group of one side only (SYNC_MASTER against ASYNC_MASTER).
    local ha_var="HA_${label^^}"
    local ha="${!ha_var:-$ha}"
    # FERROMQ_BIN_A / FERROMQ_BIN_B run another ferromq build on one side (before vs after).
    local bin_var="FERROMQ_BIN_${label^^}"
    local bin="${!bin_var:-target/release/ferromq}"
    [[ "$1" == *=* ]] && ports="${1#*=}"
    case "$side" in
        ferromq | ferromq-direct | ferromq-copy)
            ports="${ports:-$ferromq_ports}"
            local ns="${ports%%:*}" broker="${ports##*:}"
            [[ -x "$bin" ]] || { echo "no $bin" >&2; exit 1; }
            {
                echo "flushDiskType=$flush"
                [[ "$side" == ferromq-direct ]] && echo "commitLogPageCacheWrites=false"
                [[ "$side" == ferromq-copy ]] && echo "pullMappedMemoryMax=0"
                [[ -n "$ha" ]] && printf 'brokerName=broker-a\nbrokerRole=%s\n' "$ha"
                [[ -n "${BROKER_CONF:-}" ]] && printf '%s\n' "$BROKER_CONF"
            } > "$work/$label-ferromq.conf"
            "$bin" standalone --data "$work/$label-data" \
                -c "$work/$label-ferromq.conf" \
                --namesrv-listen "127.0.0.1:$ns" --broker-listen "127.0.0.1:$broker" \
                > /dev/null 2> "$work/$label-ferromq.log" &
            pids+=("$!")
            echo "$!" > "$work/$label.pid"
            wait_port "$ns" >&2 && wait_port "$broker" >&2
            if [[ -n "$ha" ]]; then
                cat > "$work/$label-slave.conf" <<CONF
namesrvAddr=127.0.0.1:$ns
brokerIP1=127.0.0.1
brokerName=broker-a
brokerId=1
brokerRole=SLAVE
flushDiskType=$flush
CONF
                "$bin" broker -c "$work/$label-slave.conf" \
                    --listen "127.0.0.1:$((broker + 10))" --store "$work/$label-slave" \
                    > /dev/null 2> "$work/$label-slave.log" &
                pids+=("$!")
                wait_port "$((broker + 10))" >&2
                sleep 6
            fi
            echo "127.0.0.1:$ns"
            ;;
        java)
            ports="${ports:-$peer_ports}"
            local ns="${ports%%:*}" broker="${ports##*:}"
            local kit=${FERROMQ_JAVA_KIT:-target/java-kit/4.9.8}
            [[ -n ${FERROMQ_JAVA_KIT:-} ]] || bash scripts/java-kit 4.9.8 "$kit" >&2
            [[ -x "$kit/bin/broker" ]] || { echo "no Java kit at $kit" >&2; exit 1; }
            mkdir -p "$work/$label-java-ns" "$work/$label-java-broker"
            bash "$kit/bin/namesrv" "$ns" "$work/$label-java-ns" > "$work/$label-java-ns.log" 2>&1 &
            pids+=("$!")
            wait_port "$ns" >&2
            cat > "$work/$label-java.conf" <<CONF
brokerClusterName=DefaultCluster
brokerName=broker-a
brokerId=0
brokerRole=${ha:-ASYNC_MASTER}
flushDiskType=$flush
namesrvAddr=127.0.0.1:$ns
listenPort=$broker
storePathRootDir=$work/$label-java-store
autoCreateTopicEnable=true
autoCreateSubscriptionGroup=true
${BROKER_CONF:-}
CONF
            bash "$kit/bin/broker" "$work/$label-java.conf" "$work/$label-java-broker" \
                > "$work/$label-java-broker.log" 2>&1 &
            pids+=("$!")
            echo "$!" > "$work/$label.pid" # bin/broker execs the JVM
            local deadline=$((SECONDS + 60))
            until grep -q "boot success" "$work/$label-java-broker.log"; do
                ((SECONDS <= deadline)) || { echo "the Java broker did not start" >&2; exit 1; }
                sleep 0.5
            done
            if [[ -n "$ha" ]]; then
                mkdir -p "$work/$label-java-slave"
                sed -e "s/^brokerId=0/brokerId=1/" -e "s/^brokerRole=.*/brokerRole=SLAVE/" \
                    -e "s/^listenPort=.*/listenPort=$((broker + 10))/" \
                    -e "s#^storePathRootDir=.*#storePathRootDir=$work/$label-java-slave-store#" \
                    "$work/$label-java.conf" > "$work/$label-java-slave.conf"
                echo "haMasterAddress=127.0.0.1:$((broker + 1))" >> "$work/$label-java-slave.conf"
                bash "$kit/bin/broker" "$work/$label-java-slave.conf" "$work/$label-java-slave" \
                    > "$work/$label-java-slave.log" 2>&1 &
                pids+=("$!")
                deadline=$((SECONDS + 60))
                until grep -q "boot success" "$work/$label-java-slave.log"; do
                    ((SECONDS <= deadline)) || { echo "the Java slave did not start" >&2; exit 1; }
                    sleep 0.5
                done
                sleep 6
            fi
            echo "127.0.0.1:$ns"
            ;;
        rocketmq-rust)
            ports="${ports:-$peer_ports}"
            peer_dirs+=("$work/$label-peer")
            scripts/rocketmq-rust.sh start "$work/$label-peer" "$ports" >&2
            echo "127.0.0.1:${ports%%:*}"
            ;;
        *) echo "$1" ;;
    esac
}

# Redirected, not in $(...): a subshell would lose the pid and dir lists.
resolve "$side_a" a > "$work/a.addr"
resolve "$side_b" b > "$work/b.addr"
addr_a="$(tail -n 1 "$work/a.addr")"
addr_b="$(tail -n 1 "$work/b.addr")"
echo "A = $side_a (name server $addr_a)"
echo "B = $side_b (name server $addr_b)"
echo "workload $workload, args: $args, $rounds round(s) each, alternating"
echo

bench_run() { # name workload args...: one bench run, its JSON in $work/name.json
    local name="$1"
    shift
    if ! "$bench" "$@" --json "$work/$name.json" --plot "$work/$name.svg" \
        2> "$work/$name.err"; then
        echo "ferromq-bench $* failed:" >&2
        tail -n 5 "$work/$name.err" >&2
        exit 1
    fi
    if [[ -n "${REPORTS:-}" ]]; then
        mkdir -p "$REPORTS"
        cp "$work/$name.json" "$work/$name.svg" "$REPORTS/"
    fi
}

# shellcheck disable=SC2086 # ARGS is a list of options on purpose
run_side() { # side addr round
    local side="$1" addr="$2" round="$3" topic="BenchCompare_${3}_${1}_$$"
    echo "=== round $round, side ${side^^} ($addr)"
    if [[ "$workload" == e2e ]]; then
        bench_run "$side-$round-e2e" e2e -n "$addr" --topic "$topic" --create-topic $args
    else
        local pid_args=""
        if [[ "$args" == *--idle-connections* && -s "$work/$side.pid" ]]; then
            pid_args="--server-pid $(cat "$work/$side.pid")"
        fi
        bench_run "$side-$round-produce" produce -n "$addr" --topic "$topic" --create-topic \
            $args $pid_args
        bench_run "$side-$round-consume" consume -n "$addr" --topic "$topic" --create-topic \
            --drain --from first --duration 300 ${CONSUME_ARGS:-}
    fi
    echo
}

for round in $(seq 1 "$rounds"); do
    run_side a "$addr_a" "$round"
    run_side b "$addr_b" "$round"
done

python3 - "$work" "$rounds" "$workload" "$side_a" "$side_b" <<'PY'
import json, sys
work, rounds, workload, name_a, name_b = sys.argv[1], int(sys.argv[2]), sys.argv[3], *sys.argv[4:]

# The latency figures of a side's report: ferromq-bench's `latency_us` keys and their labels.
LATENCIES = (("p50", "p50"), ("p99", "p99"), ("p999", "p99.9"), ("max", "max"))

def figures(side):
    runs = {"produce msg/s": [], "consume msg/s": []}
    def latencies(what, summary):
        for key, label in LATENCIES:
            runs.setdefault(f"{what} {label} µs", []).append(summary["latency_us"][key])
    for r in range(1, rounds + 1):
        if workload == "e2e":
            report = json.load(open(f"{work}/{side}-{r}-e2e.json"))
            runs["produce msg/s"].append(report["produce"]["msgs_per_sec"])
            latencies("produce", report["produce"])
            runs["consume msg/s"].append(report["consume"]["msgs_per_sec"])
            latencies("e2e", report["consume"])
        else:
            report = json.load(open(f"{work}/{side}-{r}-produce.json"))
            runs["produce msg/s"].append(report["produce"]["msgs_per_sec"])
            latencies("produce", report["produce"])
            drained = json.load(open(f"{work}/{side}-{r}-consume.json"))
            runs["consume msg/s"].append(drained["consume"]["msgs_per_sec"])
    figures = {key: sum(xs) / len(xs) for key, xs in runs.items()}
    figures["runs"] = runs
    return figures

a, b = figures("a"), figures("b")
print(f"summary over {rounds} round(s) each (mean of rounds):")
print(f"{'':18} {'A = ' + name_a:>22} {'B = ' + name_b:>22} {'ratio B/A':>10}")
keys = ["produce msg/s"] + [f"produce {label} µs" for _, label in LATENCIES] + ["consume msg/s"]
if workload == "e2e":
    keys += [f"e2e {label} µs" for _, label in LATENCIES]
for key in keys:
    ratio = b[key] / a[key] if a[key] else float("nan")
    print(f"{key:18} {a[key]:>22.0f} {b[key]:>22.0f} {ratio:>10.2f}")
print("(latency: a ratio below 1 means B is faster; msg/s: above 1 means B is faster)")
for label, side in (("A", a), ("B", b)):
    for r in range(1, rounds + 1):
        if workload == "e2e":
            break
        idle = json.load(open(f"{work}/{label.lower()}-{r}-produce.json")).get("idle")
        if idle:
            per = idle["kib_per_connection"]
            rss = idle["server_rss_kib"]
            print(f"{label} round {r}: {idle['opened']} idle connections, "
                  f"{idle['answering_at_end']} answering at the end; broker RssAnon KiB "
                  f"before/open/end {rss}, "
                  + (f"{per:.1f} KiB per idle connection" if per is not None else "no pid"))
for label, side in (("A", a), ("B", b)):
    runs = side["runs"]
    print(f"{label} per round: produce msg/s {[round(x) for x in runs['produce msg/s']]}, "
          f"p99 µs {runs['produce p99 µs']}, p99.9 µs {runs['produce p99.9 µs']}, "
          f"max µs {runs['produce max µs']}, "
          f"consume msg/s {[round(x) for x in runs['consume msg/s']]}")
PY
