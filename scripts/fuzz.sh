#!/usr/bin/env bash
# Runs the frame-decoding fuzz target for a number of seconds (default 600), seeded with the
# Java 4.9.8 wire captures. Needs cargo-fuzz (`cargo install cargo-fuzz`); works on stable
# Rust with --sanitizer none.
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds="${1:-600}"
corpus="$(mktemp -d)"
trap 'rm -rf "$corpus"' EXIT
fixtures="${FERROMQ_FIXTURES:-../../shared/fixtures/java-4.9.8}"
index=0
while IFS= read -r -d '' frame; do
    index=$((index + 1))
    { printf '\x07'; cat "$frame"; } > "$corpus/seed-$index"
done < <(find "$fixtures/wire" -name '*.bin' -print0)
cargo fuzz run --sanitizer none frame_decode "$corpus" -- \
    -max_total_time="$seconds" -rss_limit_mb=2048
