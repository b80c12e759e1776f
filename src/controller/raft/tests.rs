//! Unit tests of the raft store and the peers list.

use super::*;

#[test]
fn parse_peers_reads_java_format_and_refuses_bad_entries() {
    let peers = parse_peers("n0-127.0.0.1:9878;n1-127.0.0.1:9868; n2-127.0.0.1:9858;").unwrap();
    let names: Vec<_> = peers.iter().map(|p| p.name.as_str()).collect();
    assert_eq!(names, ["n0", "n1", "n2"]);
    assert_eq!(peers[2].addr, "127.0.0.1:9858");
    assert!(parse_peers("n0:127.0.0.1:9878").is_err());
    assert!(parse_peers("n0-127.0.0.1:1;n0-127.0.0.1:2").is_err());
    assert!(parse_peers("").unwrap().is_empty());
}
