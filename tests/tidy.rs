//! Lints that run as a test (TigerBeetle's `tidy.zig`, glommio's `tests/linters.rs`).
//!
//! Method: walk the Rust sources of every crate in the repository and check, line by line:
//! - lines are at most 100 columns;
//! - no `FIXME` and no `dbg!` in library code;
//! - every file opens with a `//!` header saying what it is;
//! - no `.unwrap()` in library code outside its `#[cfg(test)]` module;
//! - every `unsafe` (block, `fn`, `impl`, `trait`, test code too) is in `uring/` and is
//!   preceded by a `// SAFETY:` comment;
//! - no file reaches across layers (ARCHITECTURE.md, "Layers"): the protocol crate names no
//!   runtime and no other ferromq crate, the client crate never the broker's, the store never
//!   the remoting protocol or the servers above it;
//! - inside `src/broker/` and `src/store/`: no circle of files importing each other, no file
//!   over 800 lines, and the broker's layers (ARCHITECTURE.md, "Broker"): `state` names no
//!   processor or service, a service names no processor.

use std::collections::{BTreeMap, BTreeSet};
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

/// Whether `file` is a `tests.rs` that its module declares `#[cfg(test)] mod tests;`: a
/// file of tests alone, as the bottom of a file is.
fn is_test_module_file(file: &Path) -> bool {
    if file.file_name().is_none_or(|name| name != "tests.rs") {
        return false;
    }
    let parent = file.with_file_name("mod.rs");
    let declared = std::fs::read_to_string(parent).unwrap_or_default();
    declared.contains("#[cfg(test)]\nmod tests;")
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
            let test_module = is_test_module_file(&file);
            for (index, line) in text.lines().enumerate() {
                if line.trim() == "#[cfg(test)]" || test_module {
                    break; // Tests sit at the bottom of a file, or in a file of their own.
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

/// Whether `code` (a line without its comment) uses the `unsafe` keyword: a block, an
/// `unsafe fn`, `unsafe impl` or `unsafe trait`, or the word alone at the end of a line
/// with its block on the next.
fn uses_unsafe(code: &str) -> bool {
    let word = ["un", "safe"].concat();
    code.match_indices(word.as_str()).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + word.len()..].chars().next();
        let is_ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        let in_string = code[..at].matches('"').count() % 2 == 1;
        !is_ident(before) && !is_ident(after) && !in_string
    })
}

#[test]
fn every_unsafe_says_why_it_is_sound_and_lives_in_uring() {
    let mut unexplained = Vec::new();
    let mut outside = Vec::new();
    for dir in ALL_DIRS {
        for file in rust_files(dir) {
            if file.ends_with("tests/tidy.rs") {
                continue; // names the keyword to look for it
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let lines: Vec<&str> = text.lines().collect();
            for (index, line) in lines.iter().enumerate() {
                let code = line.split("//").next().unwrap_or("");
                if !uses_unsafe(code) {
                    continue;
                }
                let at = format!("{}:{}", relative(&file), index + 1);
                if !dir.starts_with("uring/") {
                    outside.push(at.clone());
                }
                let window = &lines[index.saturating_sub(3)..index];
                if !window.iter().any(|l| l.contains("SAFETY:")) {
                    unexplained.push(at);
                }
            }
        }
    }
    assert!(outside.is_empty(), "unsafe outside uring/: {outside:#?}");
    assert!(
        unexplained.is_empty(),
        "unsafe without // SAFETY: {unexplained:#?}"
    );
}

#[test]
fn the_unsafe_check_sees_every_form() {
    let word = ["un", "safe"].concat();
    for form in [
        format!("let x = {word} {{ f() }};"),
        format!("pub {word} fn f() {{}}"),
        format!("{word} impl Send for X {{}}"),
        format!("let map = {word}"),
        format!("#[allow(clippy::{word})] {word} fn g() {{}}"),
    ] {
        assert!(uses_unsafe(&form), "{form}");
    }
    for form in [
        format!("let {word}_count = 1;"),
        format!("fn is_{word}() {{}}"),
        format!("let s = \"{word}\";"),
    ] {
        assert!(!uses_unsafe(&form), "{form}");
    }
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

/// The areas whose files are checked as a graph: (directory, crate path of its root).
const GRAPHS: &[(&str, &str)] = &[("src/broker", "broker"), ("src/store", "store")];

/// Most lines a file of those areas may have.
const FILE_LINES_MAX: usize = 800;

/// A module path inside an area ("" for its root, "processors::send") of a file there.
fn module_of(area_dir: &Path, file: &Path) -> String {
    let relative = file.strip_prefix(area_dir).unwrap().with_extension("");
    let mut parts: Vec<String> = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|last| last == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The modules of the area that `file` (module `module`) names through `super::` or
/// `crate::<area>::` paths, outside its `#[cfg(test)]` tail.
fn named_modules(text: &str, module: &str, area: &str, modules: &BTreeSet<String>) -> Vec<String> {
    let code: String = text
        .lines()
        .take_while(|line| line.trim() != "#[cfg(test)]")
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n");
    let parent = |m: &str| {
        m.rsplit_once("::")
            .map_or(String::new(), |(p, _)| p.to_owned())
    };
    // `super::` names the parent of the file's module, a mod.rs's included.
    let super_base = parent(module);
    let crate_prefix = format!("crate::{area}::");
    let mut named = Vec::new();
    for (prefix, base) in [
        (crate_prefix.as_str(), String::new()),
        ("super::", super_base),
    ] {
        for (at, _) in code.match_indices(prefix) {
            let before = code[..at].chars().next_back();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let rest = &code[at + prefix.len()..];
            let path: Vec<&str> = rest
                .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .next()
                .unwrap_or("")
                .split("::")
                .filter(|p| !p.is_empty())
                .collect();
            // The longest module the path names.
            let mut target = base.clone();
            for part in path {
                let next = if target.is_empty() {
                    part.to_owned()
                } else {
                    format!("{target}::{part}")
                };
                if modules.contains(&next) {
                    target = next;
                } else {
                    break;
                }
            }
            if target != module && modules.contains(&target) {
                named.push(target);
            }
        }
    }
    named
}

/// Each area's modules and the modules each names.
fn module_graphs() -> Vec<(&'static str, BTreeMap<String, BTreeSet<String>>)> {
    let mut graphs = Vec::new();
    for (dir, area) in GRAPHS {
        let area_dir = Path::new(ROOT).join(dir);
        let files = rust_files(dir);
        let modules: BTreeSet<String> = files.iter().map(|f| module_of(&area_dir, f)).collect();
        let mut edges = BTreeMap::new();
        for file in &files {
            let module = module_of(&area_dir, file);
            let text = std::fs::read_to_string(file).unwrap();
            let named = named_modules(&text, &module, area, &modules);
            edges.insert(module, named.into_iter().collect());
        }
        graphs.push((*dir, edges));
    }
    graphs
}

/// The strongly connected components of more than one module (Tarjan's algorithm).
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        found: Vec<Vec<String>>,
    }
    impl<'a> Walk<'a> {
        fn visit(&mut self, node: &'a str) {
            let at = self.index.len();
            self.index.insert(node, at);
            self.low.insert(node, at);
            self.stack.push(node);
            for next in self.edges.get(node).into_iter().flatten() {
                if !self.index.contains_key(next.as_str()) {
                    self.visit(next);
                    let low = self.low[node].min(self.low[next.as_str()]);
                    self.low.insert(node, low);
                } else if self.stack.contains(&next.as_str()) {
                    let low = self.low[node].min(self.index[next.as_str()]);
                    self.low.insert(node, low);
                }
            }
            if self.low[node] == self.index[node] {
                let mut component = Vec::new();
                while let Some(top) = self.stack.pop() {
                    component.push(top.to_owned());
                    if top == node {
                        break;
                    }
                }
                if component.len() > 1 {
                    component.sort();
                    self.found.push(component);
                }
            }
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            walk.visit(node);
        }
    }
    walk.found
}

#[test]
fn no_circle_of_files_in_the_broker_or_the_store() {
    let mut found = Vec::new();
    for (dir, edges) in module_graphs() {
        for circle in circles(&edges) {
            found.push(format!("{dir}: {}", circle.join(" <-> ")));
        }
    }
    assert!(
        found.is_empty(),
        "files importing each other in a circle: {found:#?}"
    );
}

#[test]
fn the_circle_check_finds_a_circle() {
    let mut edges = BTreeMap::new();
    let link = |to: &[&str]| to.iter().map(|t| (*t).to_owned()).collect::<BTreeSet<_>>();
    edges.insert("a".to_owned(), link(&["b"]));
    edges.insert("b".to_owned(), link(&["c"]));
    edges.insert("c".to_owned(), link(&["a"]));
    edges.insert("d".to_owned(), link(&["a"]));
    assert_eq!(circles(&edges), [["a", "b", "c"]]);
    let modules: BTreeSet<String> = ["", "state", "processors", "processors::send"]
        .iter()
        .map(|m| (*m).to_owned())
        .collect();
    let text = "use super::Context;\nuse crate::broker::state::BrokerState;\n";
    let named = named_modules(text, "processors::send", "broker", &modules);
    assert_eq!(named, ["state", "processors"]);
}

#[test]
fn no_file_of_the_broker_or_the_store_is_over_800_lines() {
    let mut long = Vec::new();
    for (dir, _) in GRAPHS {
        for file in rust_files(dir) {
            let lines = std::fs::read_to_string(&file).unwrap().lines().count();
            if lines > FILE_LINES_MAX {
                long.push(format!("{}: {lines} lines", relative(&file)));
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {FILE_LINES_MAX} lines: {long:#?}"
    );
}

/// The broker's layers: (modules, modules they may not name, why).
const BROKER_LAYERS: &[(&str, &[&str], &str)] = &[
    (
        "state",
        &["processors", "services"],
        "state is changed by processors and services, and knows neither",
    ),
    (
        "services",
        &["processors"],
        "a service shares with processors only what lives below both",
    ),
];

#[test]
fn the_broker_layers_point_down() {
    let mut crossings = Vec::new();
    for (dir, edges) in module_graphs() {
        if dir != "src/broker" {
            continue;
        }
        for (module, named) in &edges {
            for (layer, forbidden, why) in BROKER_LAYERS {
                let inside = module == layer || module.starts_with(&format!("{layer}::"));
                if !inside {
                    continue;
                }
                for target in named {
                    let top = target.split("::").next().unwrap_or("");
                    if forbidden.contains(&top) {
                        crossings.push(format!("{module} names {target} ({why})"));
                    }
                }
            }
        }
    }
    assert!(
        crossings.is_empty(),
        "broker layer crossings: {crossings:#?}"
    );
}
