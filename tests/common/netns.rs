//! Hosts for distributed tests: each host is a Linux network namespace with its own address
//! on a bridge, so brokers, controllers and name servers run as separate machines would, and
//! the test can lose a host (kill -9), cut its link, partition two hosts or slow a link.
//!
//! Layout of one [`Network`] (all names carry this process's pid, so a later run can tell a
//! dead run's leftovers from a live one's):
//!
//! ```text
//!   root namespace (the test process)          namespace fmq<pid>-<net>-<host>
//!   bridge fmq<pid>b<net>  10.213.N.1/24  ---  veth fmq<pid>v<seq> <-> eth0 10.213.N.k/24, lo
//! ```
//!
//! - `N` is the first third octet of 10.213.0.0/16 that no interface on the machine uses,
//!   chosen under an exclusive lock on a file in the temp dir, so parallel test processes
//!   (nextest) never share a subnet. The bridge's address is the allocation record: the
//!   kernel forgets it when the bridge goes, so nothing is left to clean.
//! - [`Host::cut`] sets the host's root-side veth down: the host is partitioned from
//!   everyone, the test process included; no RST or FIN crosses, as with a pulled cable.
//! - [`Host::partition_from`] adds `prohibit` routes in both namespaces: TCP between the two
//!   fails at once (EACCES) while both still reach everyone else. No iptables needed.
//! - [`Host::slow`] is `tc netem` and [`Host::throttle`] a `tbf` rate limit, each on the
//!   root-side veth, so traffic toward the host pays it and every round trip through the
//!   host pays it once.
//! - Dropping the [`Network`] (also while a test panics) kills -9 every process left in its
//!   namespaces, deletes the veths, the namespaces and the bridge; [`leftovers`] checks that
//!   nothing of it remains. [`Network::new`] first removes what runs whose pid is gone left.
//!
//! The usual shape of a test (see `tests/netns.rs`):
//!
//! ```text
//! with_network("failover", |network| {
//!     let (ns, b1) = (network.host("ns"), network.host("b1"));
//!     let namesrv = ns.start_namesrv("");
//!     let broker = b1.start_broker(&store, &format!("namesrvAddr={}", namesrv.addr));
//!     b1.cut();   // ... assert what clients see ...
//!     b1.heal();
//! }); // torn down, and asserted that nothing is left
//! ```
//!
//! Hosts reach the test process at [`Network::gateway`]; other programs (a Java broker, a
//! shell) run inside a host through [`Host::command`].
//!
//! Needs root (CAP_SYS_ADMIN and CAP_NET_ADMIN) and iproute2's `ip` and `tc`: without them
//! [`Network::new`] panics with the reason, it never skips. A kernel without the netem qdisc
//! (`CONFIG_NET_SCH_NETEM`) makes [`Host::slow`] return [`NetemUnavailable`];
//! [`Host::throttle`] needs only `tbf`.

use super::{BrokerProcess, NamesrvProcess};
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The port a name server on a host listens on (Java's default).
pub const NAMESRV_PORT: u16 = 9876;
/// The port a broker on a host listens on (Java's default).
pub const BROKER_PORT: u16 = 10911;

/// Every name this harness makes starts with this and the pid of the process that made it.
const NAME_PREFIX: &str = "fmq";
/// Longest interface name Linux takes (IFNAMSIZ − 1).
const INTERFACE_NAME_LENGTH_MAX: usize = 15;
/// Subnets are 10.213.N.0/24.
const SUBNET_PREFIX: [u8; 2] = [10, 213];
/// Host addresses are .2 up to this; .1 is the bridge.
const HOST_OCTET_MAX: u8 = 254;
/// How long teardown waits for killed processes to leave a namespace.
const KILL_DEADLINE: Duration = Duration::from_secs(10);

static NETWORK_COUNT: AtomicU32 = AtomicU32::new(0);
static HOST_COUNT: AtomicU32 = AtomicU32::new(0);

/// A bridge in the root namespace and the hosts attached to it; torn down on drop.
#[derive(Debug)]
pub struct Network {
    inner: Arc<NetworkInner>,
}

/// One host: a network namespace with a veth to the bridge. Cheap to clone; the namespace
/// lives as long as its [`Network`].
#[derive(Clone, Debug)]
pub struct Host {
    name: String,
    netns: String,
    veth: String,
    addr: Ipv4Addr,
    network: Arc<NetworkInner>,
}

/// `tc` has no netem qdisc on this kernel (`CONFIG_NET_SCH_NETEM` unset or not loaded).
#[derive(Debug)]
pub struct NetemUnavailable(pub String);

impl std::fmt::Display for NetemUnavailable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the kernel has no netem qdisc (build it with CONFIG_NET_SCH_NETEM or load \
             sch_netem): {}",
            self.0
        )
    }
}

#[derive(Debug)]
struct NetworkInner {
    test_name: String,
    index: u32,
    bridge: String,
    subnet_octet: u8,
    /// What exists, in the order it was made; teardown undoes it in reverse.
    made: Mutex<Vec<Made>>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Made {
    Link(String),
    Netns(String),
}

impl Network {
    /// A bridge on a free 10.213.N.0/24 with address .1, after removing the leftovers of
    /// runs whose process is gone.
    ///
    /// # Panics
    /// When not root, or `ip` fails: the test cannot run its hosts, and says why.
    pub fn new(test_name: &str) -> Network {
        require_root();
        let index = NETWORK_COUNT.fetch_add(1, Ordering::Relaxed);
        let bridge = format!("{NAME_PREFIX}{}b{index}", std::process::id());
        assert!(
            bridge.len() <= INTERFACE_NAME_LENGTH_MAX,
            "bridge name {bridge} too long"
        );
        let _lock = subnet_lock();
        remove_leftovers();
        let subnet_octet = free_subnet_octet();
        let inner = Arc::new(NetworkInner {
            test_name: test_name.to_owned(),
            index,
            bridge: bridge.clone(),
            subnet_octet,
            made: Mutex::new(Vec::new()),
        });
        let network = Network { inner };
        ip(&["link", "add", &bridge, "type", "bridge"]);
        network.inner.made(Made::Link(bridge.clone()));
        let cidr = format!("{}/24", network.inner.addr_of(1));
        ip(&["addr", "add", &cidr, "dev", &bridge]);
        ip(&["link", "set", &bridge, "up"]);
        eprintln!("[netns] {test_name}: bridge {bridge} {cidr}");
        network
    }

    /// A new host named `name` (lowercase letters and digits): its namespace, loopback up,
    /// a veth to the bridge and the next address of the subnet.
    ///
    /// # Panics
    /// On a bad or repeated name, a full subnet, or a failing `ip`.
    pub fn host(&self, name: &str) -> Host {
        let inner = &self.inner;
        assert!(
            !name.is_empty()
                && name.len() <= 16
                && name
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit()),
            "host name {name:?}: 1 to 16 lowercase letters or digits"
        );
        let pid = std::process::id();
        let netns = format!("{NAME_PREFIX}{pid}-{}-{name}", inner.index);
        let hosts = inner.hosts();
        assert!(!hosts.contains(&netns), "host {name} exists already");
        let octet = u8::try_from(hosts.len() + 2)
            .ok()
            .filter(|octet| *octet <= HOST_OCTET_MAX)
            .expect("at most 253 hosts on one network");
        let sequence = HOST_COUNT.fetch_add(1, Ordering::Relaxed);
        let veth = format!("{NAME_PREFIX}{pid}v{sequence}");
        assert!(
            veth.len() <= INTERFACE_NAME_LENGTH_MAX,
            "veth name {veth} too long"
        );
        let addr = inner.addr_of(octet);

        ip(&["netns", "add", &netns]);
        inner.made(Made::Netns(netns.clone()));
        ip(&[
            "link", "add", &veth, "type", "veth", "peer", "name", "eth0", "netns", &netns,
        ]);
        inner.made(Made::Link(veth.clone()));
        ip(&["link", "set", &veth, "master", &inner.bridge, "up"]);
        let cidr = format!("{addr}/24");
        ip(&["-n", &netns, "addr", "add", &cidr, "dev", "eth0"]);
        ip(&["-n", &netns, "link", "set", "eth0", "up"]);
        ip(&["-n", &netns, "link", "set", "lo", "up"]);
        eprintln!(
            "[netns] {}: host {name} = {netns} {addr} via {veth}",
            inner.test_name
        );
        Host {
            name: name.to_owned(),
            netns,
            veth,
            addr,
            network: Arc::clone(inner),
        }
    }

    /// The address of the bridge: the test process as the hosts see it.
    pub fn gateway(&self) -> IpAddr {
        IpAddr::V4(self.inner.addr_of(1))
    }

    /// Every namespace and interface name this network made, for [`leftovers`].
    pub fn names(&self) -> Vec<String> {
        self.inner
            .made
            .lock()
            .expect("no panic while the list is held")
            .iter()
            .map(|made| match made {
                Made::Link(name) | Made::Netns(name) => name.clone(),
            })
            .collect()
    }
}

impl Drop for Network {
    fn drop(&mut self) {
        let problems = self.inner.teardown();
        if problems.is_empty() {
            eprintln!("[netns] {}: torn down", self.inner.test_name);
        } else if std::thread::panicking() {
            eprintln!("[netns] teardown problems: {problems:#?}");
        } else {
            panic!("network teardown left problems: {problems:#?}");
        }
    }
}

impl Host {
    /// The host's name given to [`Network::host`].
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The host's address on the bridge.
    pub fn addr(&self) -> IpAddr {
        IpAddr::V4(self.addr)
    }

    /// `program` run inside the host's namespace (`ip netns exec NAME program`). `ip`
    /// execs the program, so the child's pid is the program's and `kill` reaches it.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut command = Command::new(tool("ip"));
        command.args(["netns", "exec", &self.netns]).arg(program);
        command
    }

    /// The built `ferromq` binary, run inside the host's namespace.
    pub fn ferromq(&self) -> Command {
        self.command(env!("CARGO_BIN_EXE_ferromq"))
    }

    /// `ferromq namesrv` on this host's address, port [`NAMESRV_PORT`], with
    /// `extra_config` lines in its config file.
    pub fn start_namesrv(&self, extra_config: &str) -> NamesrvProcess {
        let listen = format!("{}:{NAMESRV_PORT}", self.addr);
        NamesrvProcess::start_in(self.ferromq(), extra_config, &listen, &[])
    }

    /// `ferromq broker` over `store` on this host's address, port [`BROKER_PORT`],
    /// registering that address (`brokerIP1`); `config` adds lines (`namesrvAddr`, ...).
    pub fn start_broker(&self, store: &Path, config: &str) -> BrokerProcess {
        let listen = format!("{}:{BROKER_PORT}", self.addr);
        let config = format!("brokerIP1={}\n{config}", self.addr);
        BrokerProcess::start_in(self.ferromq(), store, &config, &listen)
    }

    /// Cuts the host's link: nothing reaches it or leaves it, the test process included.
    pub fn cut(&self) {
        eprintln!("[netns] cut {}", self.name);
        ip(&["link", "set", &self.veth, "down"]);
    }

    /// Restores the link [`Host::cut`] took.
    pub fn heal(&self) {
        eprintln!("[netns] heal {}", self.name);
        ip(&["link", "set", &self.veth, "up"]);
    }

    /// Partitions this host from `other` only: each drops traffic to the other (a
    /// `prohibit` route, so a connect fails at once), both still reach everyone else.
    pub fn partition_from(&self, other: &Host) {
        eprintln!("[netns] partition {} from {}", self.name, other.name);
        self.route("add", other);
        other.route("add", self);
    }

    /// Undoes [`Host::partition_from`].
    pub fn reconnect(&self, other: &Host) {
        eprintln!("[netns] reconnect {} with {}", self.name, other.name);
        self.route("del", other);
        other.route("del", self);
    }

    /// Adds `tc netem` with `netem_args` (e.g. `"delay 100ms"`) on traffic toward the host.
    ///
    /// # Errors
    /// [`NetemUnavailable`] when the kernel has no netem qdisc.
    ///
    /// # Panics
    /// When `tc` fails for another reason (bad arguments, no such link).
    pub fn slow(&self, netem_args: &str) -> Result<(), NetemUnavailable> {
        eprintln!("[netns] slow {}: netem {netem_args}", self.name);
        let mut args = vec!["qdisc", "replace", "dev", &self.veth, "root", "netem"];
        args.extend(netem_args.split_whitespace());
        let output = run(&tool("tc"), &args);
        let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
        if output.status.success() {
            Ok(())
        } else if stderr.contains("qdisc kind is unknown") {
            Err(NetemUnavailable(stderr.trim().to_owned()))
        } else {
            panic!("tc {args:?} failed: {stderr}");
        }
    }

    /// Limits traffic toward the host to `rate` (tc units, e.g. `"64kbit"`) with a token
    /// bucket of one full frame: a slow link by bandwidth, on kernels without netem.
    pub fn throttle(&self, rate: &str) {
        eprintln!("[netns] throttle {} to {rate}", self.name);
        let args = [
            "qdisc", "replace", "dev", &self.veth, "root", "tbf", "rate", rate,
        ];
        let mut args = args.to_vec();
        args.extend(["burst", "1600", "latency", "10s"]);
        check(&tool("tc"), &args, &run(&tool("tc"), &args));
    }

    /// Removes [`Host::slow`] or [`Host::throttle`]; nothing to remove is fine.
    pub fn unslow(&self) {
        eprintln!("[netns] unslow {}", self.name);
        let args = ["qdisc", "del", "dev", &self.veth, "root"];
        let output = run(&tool("tc"), &args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        if !output.status.success() && !stderr.contains("handle of zero") {
            panic!("tc {args:?} failed: {stderr}");
        }
    }

    /// Kills -9 every process in the host's namespace: the host is lost.
    pub fn kill_all(&self) {
        eprintln!("[netns] kill -9 everything on {}", self.name);
        let problems = kill_namespace(&self.netns);
        assert!(problems.is_empty(), "{problems:?}");
    }

    fn route(&self, action: &str, other: &Host) {
        let target = format!("{}/32", other.addr);
        ip(&["-n", &self.netns, "route", action, "prohibit", &target]);
    }
}

/// Runs `body` on a new [`Network`] named `test_name`, tears the network down, and asserts
/// that nothing of it is left on the machine: the usual shape of a test over hosts.
pub fn with_network<T>(test_name: &str, body: impl FnOnce(&Network) -> T) -> T {
    let network = Network::new(test_name);
    let outcome = body(&network);
    let names = network.names();
    drop(network);
    assert_eq!(
        leftovers(&names),
        Vec::<String>::new(),
        "left on the machine"
    );
    outcome
}

/// Names among `names` the machine still has: namespaces (`ip netns list`) and links
/// (`ip link`).
pub fn leftovers(names: &[String]) -> Vec<String> {
    let existing = existing_names();
    names
        .iter()
        .filter(|name| existing.contains(name))
        .cloned()
        .collect()
}

impl NetworkInner {
    fn made(&self, made: Made) {
        self.made
            .lock()
            .expect("no panic while the list is held")
            .push(made);
    }

    fn hosts(&self) -> Vec<String> {
        let made = self.made.lock().expect("no panic while the list is held");
        made.iter()
            .filter_map(|made| match made {
                Made::Netns(name) => Some(name.clone()),
                Made::Link(_) => None,
            })
            .collect()
    }

    fn addr_of(&self, octet: u8) -> Ipv4Addr {
        let [a, b] = SUBNET_PREFIX;
        Ipv4Addr::new(a, b, self.subnet_octet, octet)
    }

    /// Kills what runs in the namespaces, then deletes everything made, newest first; the
    /// problems met, empty when all went.
    fn teardown(&self) -> Vec<String> {
        let made: Vec<Made> = std::mem::take(
            &mut *self
                .made
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner),
        );
        let mut problems = Vec::new();
        for made in &made {
            if let Made::Netns(netns) = made {
                problems.extend(kill_namespace(netns));
            }
        }
        for made in made.iter().rev() {
            let (args, name) = match made {
                Made::Link(name) => (["link", "del", name.as_str()], name),
                Made::Netns(name) => (["netns", "del", name.as_str()], name),
            };
            let output = run(&tool("ip"), &args);
            // A veth goes with its peer's namespace; that is no problem.
            let gone = String::from_utf8_lossy(&output.stderr).contains("Cannot find device");
            if !output.status.success() && !gone {
                problems.push(format!(
                    "ip {args:?} ({name}): {}",
                    String::from_utf8_lossy(&output.stderr).trim()
                ));
            }
        }
        problems
    }
}

/// Panics unless this process runs as root: namespaces and links need it.
fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .expect("a Uid line in /proc/self/status");
    assert!(
        euid == "0",
        "the netns harness needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) to make namespaces, \
         veths and a bridge; this test runs as uid {euid}"
    );
}

/// An exclusive lock held while choosing a subnet and making its bridge.
fn subnet_lock() -> std::fs::File {
    let path = std::env::temp_dir().join("ferromq-netns.lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    file.lock()
        .unwrap_or_else(|e| panic!("lock {}: {e}", path.display()));
    file
}

/// The first N with no address 10.213.N.x on any interface of the machine.
fn free_subnet_octet() -> u8 {
    let output = run(&tool("ip"), &["-o", "-4", "addr", "show"]);
    check(&tool("ip"), &["-o", "-4", "addr", "show"], &output);
    let text = String::from_utf8_lossy(&output.stdout);
    let [a, b] = SUBNET_PREFIX;
    (0..=u8::MAX)
        .find(|n| !text.contains(&format!("inet {a}.{b}.{n}.")))
        .expect("a free /24 in 10.213.0.0/16")
}

/// Removes namespaces and links named by this harness whose pid no longer runs.
fn remove_leftovers() {
    for name in existing_names() {
        let Some(pid) = maker_pid(&name) else {
            continue;
        };
        if Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        eprintln!("[netns] removing {name}, left by dead process {pid}");
        let args: &[&str] = if name.contains('-') {
            let problems = kill_namespace(&name);
            assert!(problems.is_empty(), "{problems:?}");
            &["netns", "del", &name]
        } else {
            &["link", "del", &name]
        };
        let output = run(&tool("ip"), args);
        let stderr = String::from_utf8_lossy(&output.stderr);
        // A veth whose namespace just went is gone with it.
        if !output.status.success() && !stderr.contains("Cannot find device") {
            panic!("ip {args:?} failed: {stderr}");
        }
    }
}

/// The pid in a harness name: `fmq<pid>b..`, `fmq<pid>v..` or `fmq<pid>-..`.
fn maker_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NAME_PREFIX)?;
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    let after = rest.as_bytes().get(digits)?;
    if digits == 0 || !matches!(after, b'b' | b'v' | b'-') {
        return None;
    }
    rest[..digits].parse().ok()
}

/// Names of every network namespace and link of the machine.
fn existing_names() -> Vec<String> {
    let netns = run(&tool("ip"), &["netns", "list"]);
    check(&tool("ip"), &["netns", "list"], &netns);
    let links = run(&tool("ip"), &["-o", "link", "show"]);
    check(&tool("ip"), &["-o", "link", "show"], &links);
    let mut names: Vec<String> = String::from_utf8_lossy(&netns.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect();
    // "4: name@peer: <FLAGS> ..."
    names.extend(
        String::from_utf8_lossy(&links.stdout)
            .lines()
            .filter_map(|line| line.split(": ").nth(1))
            .map(|name| name.split('@').next().unwrap_or(name).to_owned()),
    );
    names
}

/// Kills -9 every process in `netns` and waits (bounded) until none is left; problems met.
fn kill_namespace(netns: &str) -> Vec<String> {
    let deadline = Instant::now() + KILL_DEADLINE;
    loop {
        let output = run(&tool("ip"), &["netns", "pids", netns]);
        if !output.status.success() {
            return vec![format!(
                "ip netns pids {netns}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            )];
        }
        let pids: Vec<String> = String::from_utf8_lossy(&output.stdout)
            .split_whitespace()
            .map(str::to_owned)
            .collect();
        if pids.is_empty() {
            return Vec::new();
        }
        if Instant::now() > deadline {
            return vec![format!("processes {pids:?} still in {netns} after kill -9")];
        }
        eprintln!("[netns] kill -9 {pids:?} in {netns}");
        for pid in &pids {
            // A process that exits meanwhile is fine.
            let _ = run("kill", &["-9", pid]);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// `ip args`, panicking with its stderr when it fails.
fn ip(args: &[&str]) {
    check(&tool("ip"), args, &run(&tool("ip"), args));
}

fn check(program: &str, args: &[&str], output: &Output) {
    assert!(
        output.status.success(),
        "{program} {} failed ({}): {}",
        args.join(" "),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    );
}

fn run(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (iproute2 installed?): {e}"))
}

/// `name` from /usr/sbin or /sbin, where iproute2 lives, else from PATH.
fn tool(name: &str) -> String {
    ["/usr/sbin", "/sbin"]
        .iter()
        .map(|dir| format!("{dir}/{name}"))
        .find(|path| Path::new(path).exists())
        .unwrap_or_else(|| name.to_owned())
}
