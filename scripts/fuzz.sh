#!/usr/bin/env bash
# Runs a fuzz target for a number of seconds (default 600), seeded from the Java 4.9.8
# fixtures, and prints the fuzzer's CPU time at the end.
#
#   scripts/fuzz.sh TARGET [SECONDS]
#
# TARGET is one of fuzz/fuzz_targets: frame_decode (the wire captures), typed_headers (the
# ext fields of the captured JSON requests), bodies (captured bodies and properties),
# store_bytes (CommitLog records of the fixture stores) or peer_streams (CommitLog bytes cut
# into HA frames, and ACL files). FUZZ_CORPUS=DIR keeps the corpus there (default: a
# temporary one). Needs cargo-fuzz (`cargo install cargo-fuzz`); with a nightly toolchain it
# runs under AddressSanitizer, on stable with --sanitizer none.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
target="${1:-frame_decode}"
seconds="${2:-600}"
if [[ ! -f "fuzz_targets/$target.rs" ]]; then
    echo "unknown fuzz target: $target ($(ls fuzz_targets | sed 's/\.rs$//' | tr '\n' ' '))" >&2
    exit 2
fi
if [[ -n "${FUZZ_CORPUS:-}" ]]; then
    corpus="$FUZZ_CORPUS"
    mkdir -p "$corpus"
else
    corpus="$(mktemp -d)"
    trap 'rm -rf "$corpus"' EXIT
fi
fixtures="${FERROMQ_FIXTURES:-../tests/fixtures/java-4.9.8}"
python3 - "$target" "$fixtures" "$corpus" <<'EOF'
import glob, json, os, struct, sys

target, fixtures, corpus = sys.argv[1:]
seeds = []

def frames(kind="*"):
    """(path, header bytes, body bytes, is_json) of every captured frame."""
    for path in sorted(glob.glob(f"{fixtures}/wire/{kind}/**/*.bin", recursive=True)):
        data = open(path, "rb").read()
        if len(data) < 8:
            continue
        mark = struct.unpack(">I", data[4:8])[0]
        length = mark & 0xFFFFFF
        yield path, data, data[8:8 + length], data[8 + length:], mark >> 24 == 0

def segments():
    return sorted(glob.glob(f"{fixtures}/store/*/commitlog/*"))

if target == "frame_decode":
    # The first byte picks the chunk size the stream is fed in.
    seeds = [b"\x07" + data for _, data, _, _, _ in frames()]
elif target == "typed_headers":
    # Key=value pairs, split on 0xff.
    for _, _, header, _, is_json in frames("json"):
        try:
            fields = json.loads(header).get("extFields") or {}
        except ValueError:
            continue
        if fields:
            pairs = (f"{k}={v}".encode() for k, v in fields.items())
            seeds.append(b"\xff".join(pairs))
elif target == "bodies":
    # The first byte picks the decoder: 0 batch, 1 registration, 2 heartbeat or route JSON,
    # 3 properties, 4 record, 5 tag expression.
    for path, _, header, body, is_json in frames():
        name = os.path.basename(path)
        if body:
            pick = 0 if name.endswith("req320.bin") else 1 if name.endswith("req103.bin") else 2
            seeds.append(bytes([pick]) + body)
        if is_json:
            try:
                fields = json.loads(header).get("extFields") or {}
            except ValueError:
                fields = {}
            for key in ("properties", "i", "subString"):
                if key in fields:
                    seeds.append(bytes([3 if key != "subString" else 5]) + fields[key].encode())
    for segment in segments():
        seeds.append(b"\x04" + open(segment, "rb").read(4096))
elif target == "store_bytes":
    # The first byte picks the record decoder (with and without the CRC check); then the
    # start of each CommitLog segment, whole records first.
    for segment in segments():
        head = open(segment, "rb").read(4096)
        seeds += [b"\x00" + head, b"\x01" + head]
elif target == "peer_streams":
    # Even first byte: the HA stream, frames of (length byte + 1) bytes; odd: an ACL file.
    for segment in segments():
        head = open(segment, "rb").read(8192)
        for size in (256, 100, 7):
            framed = b"".join(bytes([size - 1]) + head[i:i + size] for i in range(0, len(head), size))
            seeds.append(b"\x00" + framed)
    seeds.append(b"\x01" + b"""globalWhiteRemoteAddresses:
  - 10.10.103.*
  - 2::ac5:78:1-200
  - fe80::*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress: 1:2:3:4:5:6:1-200:*
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - topicA=DENY
      - topicB=PUB|SUB
    groupPerms:
      - groupA=DENY
  - accessKey: rocketmq2
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.{1,2,3}
    admin: true
""")
for index, seed in enumerate(seeds):
    with open(f"{corpus}/seed-{index}", "wb") as out:
        out.write(seed)
print(f"{len(seeds)} seeds in {corpus}", file=sys.stderr)
EOF
if rustup toolchain list 2>/dev/null | grep -q '^nightly'; then
    fuzz=(cargo +nightly fuzz) options=(-O)
else
    fuzz=(cargo fuzz) options=(-O --sanitizer none)
fi
"${fuzz[@]}" build "${options[@]}" "$target" # before the clock starts
TIMEFORMAT="$target: %R s wall, %U s user + %S s system CPU"
time "${fuzz[@]}" run "${options[@]}" "$target" "$corpus" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1
