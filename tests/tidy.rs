//! Lints that run as a test (TigerBeetle's `tidy.zig`, glommio's `tests/linters.rs`).
//!
//! Method: walk the Rust sources of every crate in the repository and check, line by line:
//! - lines are at most 100 columns;
//! - no `FIXME` and no `dbg!` in library code;
//! - every file opens with a `//!` header saying what it is;
//! - no `.unwrap()` in library code outside its `#[cfg(test)]` module;
//! - every `unsafe` block is preceded by a `// SAFETY:` comment;
//! - no file reaches across layers (ARCHITECTURE.md, "Layers"): the protocol crate names no
//!   runtime and no other ferromq crate, the client crate never the broker's, the store never
//!   the remoting protocol or the servers above it.

use std::path::{Path, PathBuf};

const ROOT: &str = env!("CARGO_MANIFEST_DIR");
const LIBRARY_DIRS: &[&str] = &[
    "src",
    "protocol/src",
    "client/src",
    "shards/src",
    "uring/src",
    "bench/src",
];
const ALL_DIRS: &[&str] = &[
    "src",
    "protocol/src",
    "client/src",
    "client/examples",
    "examples",
    "shards/src",
    "shards/tests",
    "uring/src",
    "bench/src",
    "tests",
    "fuzz/fuzz_targets",
];

fn rust_files(dir: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut stack = vec![Path::new(ROOT).join(dir)];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

fn relative(path: &Path) -> String {
    path.strip_prefix(ROOT).unwrap().display().to_string()
}

#[test]
fn every_line_fits_in_100_columns() {
    let mut long = Vec::new();
    for dir in LIBRARY_DIRS {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (index, line) in text.lines().enumerate() {
                if line.chars().count() > 100 {
                    long.push(format!("{}:{}", relative(&file), index + 1));
                }
            }
        }
    }
    assert!(long.is_empty(), "lines over 100 columns: {long:#?}");
}

#[test]
fn every_file_starts_with_a_module_doc() {
    let mut missing = Vec::new();
    for dir in ALL_DIRS {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            if !text.trim_start().starts_with("//!") {
                missing.push(relative(&file));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "files without a //! header: {missing:#?}"
    );
}

#[test]
fn library_code_has_no_fixme_dbg_or_unwrap() {
    let mut found = Vec::new();
    for dir in LIBRARY_DIRS {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (index, line) in text.lines().enumerate() {
                if line.trim() == "#[cfg(test)]" {
                    break; // Tests sit at the bottom of a file.
                }
                let code = line.split("//").next().unwrap_or("");
                let fixme = ["FIX", "ME"].concat();
                let dbg = ["dbg", "!("].concat();
                let unwrap = [".unwrap", "()"].concat();
                for needle in [&fixme, &dbg, &unwrap] {
                    let haystack = if needle == &fixme { line } else { code };
                    if haystack.contains(needle.as_str()) {
                        found.push(format!("{}:{}: {needle}", relative(&file), index + 1));
                    }
                }
            }
        }
    }
    assert!(found.is_empty(), "forbidden in library code: {found:#?}");
}

#[test]
fn every_unsafe_block_says_why_it_is_sound() {
    let mut unexplained = Vec::new();
    for dir in ALL_DIRS {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (index, line) in lines.iter().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if !code.contains(&["unsafe", " {"].concat()) {
                    continue;
                }
                let window = &lines[index.saturating_sub(3)..index];
                if !window.iter().any(|l| l.contains("SAFETY:")) {
                    unexplained.push(format!("{}:{}", relative(&file), index + 1));
                }
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "unsafe without // SAFETY: {unexplained:#?}"
    );
}

/// What each layer's code may not name: (directory, forbidden path prefixes, why).
const LAYERS: &[(&str, &[&str], &str)] = &[
    (
        "protocol/src",
        &[
            "tokio",
            "glommio",
            "futures",
            "ferromq_",
            "ferromq::",
            "std::net::Tcp",
        ],
        "the protocol crate is bytes and types: no runtime, no I/O, no other ferromq crate",
    ),
    (
        "client/src",
        &[
            "glommio",
            "io_uring",
            "ferromq_shards",
            "ferromq_uring",
            "ferromq::",
        ],
        "the client crate builds on the protocol crate and tokio only",
    ),
    (
        "client/examples",
        &["ferromq::", "ferromq_shards", "ferromq_uring"],
        "the client's examples show what a user of the client crate alone writes",
    ),
    (
        "src/store",
        &[
            "crate::remoting",
            "ferromq_protocol::remoting",
            "crate::broker",
            "crate::namesrv",
            "crate::client",
            "ferromq_client",
            "crate::admin",
        ],
        "the store knows records and files, not the wire or the servers above it",
    ),
];

#[test]
fn no_file_reaches_across_layers() {
    let mut crossings = Vec::new();
    for (dir, forbidden, why) in LAYERS {
        for file in rust_files(dir) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (index, line) in text.lines().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                let named = |prefix: &&&str| {
                    code.match_indices(**prefix).any(|(at, _)| {
                        let before = code[..at].chars().next_back();
                        !before.is_some_and(|c| c.is_alphanumeric() || c == '_')
                    })
                };
                if let Some(prefix) = forbidden.iter().find(named) {
                    let at = format!("{}:{}", relative(&file), index + 1);
                    crossings.push(format!("{at}: {prefix} ({why})"));
                }
            }
        }
    }
    assert!(crossings.is_empty(), "layer crossings: {crossings:#?}");
}
