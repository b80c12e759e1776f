#!/usr/bin/env bash
# Runs a fuzz target for a number of seconds (default 600), seeded from the Java 4.9.8
# fixtures: `frame_decode` with the wire captures, `store_bytes` with CommitLog records of
# the fixture stores. Usage: scripts/fuzz.sh [frame_decode|store_bytes] [SECONDS].
# Needs cargo-fuzz (`cargo install cargo-fuzz`); works on stable Rust with --sanitizer none.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
target="${1:-frame_decode}"
seconds="${2:-600}"
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
fixtures="${FERROMQ_FIXTURES:-../../shared/fixtures/java-4.9.8}"
index=0
case "$target" in
frame_decode)
    while IFS= read -r -d '' frame; do
        index=$((index + 1))
        { printf '\x07'; cat "$frame"; } > "$corpus/seed-$index"
    done < <(find "$fixtures/wire" -name '*.bin' -print0)
    ;;
store_bytes)
    # The first byte picks the record decoder (with and without the CRC check); then the
    # start of each CommitLog segment, whole records first.
    while IFS= read -r -d '' segment; do
        for pick in 0 1; do
            index=$((index + 1))
            { printf "\\x0$pick"; head -c 4096 "$segment"; } > "$corpus/seed-$index"
        done
    done < <(find "$fixtures/store" -path '*commitlog*' -type f -print0)
    ;;
*)
    echo "unknown fuzz target: $target (frame_decode or store_bytes)" >&2
    exit 2
    ;;
esac
cargo fuzz run --sanitizer none "$target" "$corpus" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048
