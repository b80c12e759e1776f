#!/usr/bin/env bash
# Route lookups per second on two name servers, measured in alternation in one run, with the
# ratio B/A per connection count. Each side is a `ferromq` binary (started here on a free
# loopback port) or an address of a running name server (host:port).
#
#   scripts/compare-route.sh A B [rounds] [duration-secs]
#   scripts/compare-route.sh /tmp/before/ferromq target/release/ferromq 2 5
set -euo pipefail
cd "$(dirname "$0")/.."
side_a="$1"
side_b="$2"
rounds="${3:-2}"
duration="${4:-5}"
bench=target/release/ferromq-bench
work="$(mktemp -d)"
pids=()
cleanup() {
    for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
    rm -rf "$work"
}
trap cleanup EXIT

start() { # binary label: starts a name server, writes its address to $work/label.addr
    local binary="$1" label="$2"
    printf 'kvConfigPath=%s/%s-kv.json\n' "$work" "$label" > "$work/$label.conf"
    "$binary" namesrv --listen 127.0.0.1:0 -c "$work/$label.conf" --log info \
        > /dev/null 2> "$work/$label.log" &
    pids+=("$!")
    local addr=""
    for _ in $(seq 1 200); do
        addr="$(grep -o 'listening addr=[0-9.:]*' "$work/$label.log" | head -n 1 | cut -d= -f2 || true)"
        [[ -n "$addr" ]] && break
        sleep 0.05
    done
    [[ -n "$addr" ]] || { echo "error: $binary did not start" >&2; exit 1; }
    echo "$addr" > "$work/$label.addr"
}

resolve() { # side label: a binary is started, anything else is taken as an address
    if [[ -x "$1" ]]; then start "$1" "$2"; else echo "$1" > "$work/$2.addr"; fi
}

resolve "$side_a" a
resolve "$side_b" b
addr_a="$(cat "$work/a.addr")"
addr_b="$(cat "$work/b.addr")"
echo "A = $side_a ($addr_a)"
echo "B = $side_b ($addr_b)"
for round in $(seq 1 "$rounds"); do
    for side in a b; do
        addr="addr_$side"
        "$bench" route --namesrv "${!addr}" --register-broker --duration-secs "$duration" \
            --json "$work/$side-$round.json" > /dev/null 2>&1
    done
done
python3 - "$work" "$rounds" <<'PY'
import json, sys
work, rounds = sys.argv[1], int(sys.argv[2])
def load(side):
    runs = [json.load(open(f"{work}/{side}-{r}.json"))["results"] for r in range(1, rounds + 1)]
    by_conn = {}
    for run in runs:
        for res in run:
            by_conn.setdefault(res["connections"], []).append(res)
    return by_conn
a, b = load("a"), load("b")
print(f"{'conn':>5} {'A lookups/s':>12} {'B lookups/s':>12} {'B/A':>6} {'A p99 us':>9} {'B p99 us':>9}")
for conn in sorted(a):
    ra = sum(r["lookups_per_sec"] for r in a[conn]) / len(a[conn])
    rb = sum(r["lookups_per_sec"] for r in b[conn]) / len(b[conn])
    pa = max(r["latency_us"]["p99"] for r in a[conn])
    pb = max(r["latency_us"]["p99"] for r in b[conn])
    print(f"{conn:>5} {ra:>12.0f} {rb:>12.0f} {rb / ra:>6.2f} {pa:>9} {pb:>9}")
PY
