#!/usr/bin/env bash
# Everything a change must pass before it lands: formatting, clippy with warnings denied, and
# the test suite (which includes the tidy lints in tests/tidy.rs).
set -euo pipefail
cd "$(dirname "$0")/.."
cargo fmt --all --check
cargo clippy --workspace --all-targets -- --deny warnings
cargo nextest run --workspace
