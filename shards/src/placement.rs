//! Placement: which shards exist, which CPU each runs on, and which roles each plays.
//!
//! A placement is written on the command line as `--shards` (or `shards=` in a config file):
//!
//! ```text
//! 0:writer,net,control;1:dispatch,net     two shards on CPUs 0 and 1
//! *:writer,dispatch,net,control           one unpinned shard
//! 3                                       Placement::auto(3)
//! ```
//!
//! Shards are numbered `shard-00`, `shard-01`, ... in the order written. The CPU is used only
//! when the runtime pins executors (`RuntimeConfig::pin_to_cpus`); `*` means "never pin".
//!
//! Validity rules, checked once here so the runtime can rely on them:
//!
//! | role | how many shards | why |
//! | --- | --- | --- |
//! | writer | exactly one | it owns the `CommitLog` and queue offsets, which need a single owner |
//! | control | exactly one | timers and config persistence must not run twice |
//! | dispatch | at least one | someone must build `ConsumeQueue` and index entries |
//! | net | at least one | someone must accept connections |
//!
//! A placement restricted with [`Placement::only_roles`] keeps these rules for the roles it still
//! has, and only for those.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use crate::shard_id::{ShardId, SHARD_COUNT_MAX};

/// A job a shard performs; a shard may have several.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Role {
    /// Owns the `CommitLog`, the per-queue offset counters and the flush policy (exactly one).
    Writer,
    /// Turns committed records into `ConsumeQueue` units and index entries (one or more).
    Dispatch,
    /// Accepts connections, decodes frames and runs request processors (one or more).
    Net,
    /// Runs timers, registration and config persistence (exactly one).
    Control,
}

/// A set of [`Role`]s, stored as a bit set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RoleSet(u8);

/// One shard of a [`Placement`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShardSpec {
    /// The shard's index in its placement.
    pub id: ShardId,
    /// The CPU to pin the shard's executor to, if pinning is enabled; `None` means never pin.
    pub cpu: Option<usize>,
    /// What the shard does; never empty.
    pub roles: RoleSet,
}

/// The validated list of shards a process runs.
///
/// Invariants: at least one shard; ids are dense from `shard-00` in order; no two shards name the
/// same CPU; every role that appears satisfies the rule in the module docs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Placement {
    shards: Vec<ShardSpec>,
}

/// Why a placement text or shard list was rejected; each message says what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlacementError {
    /// The placement text was blank.
    #[error(
        "empty shard placement: write a shard count such as `2`, \
         or shards such as `0:writer,net,control;1:dispatch,net`"
    )]
    Empty,
    /// A bare shard count of zero.
    #[error("a shard count of 0 runs nothing: write `1` or more")]
    ZeroShards,
    /// More shards than [`SHARD_COUNT_MAX`].
    #[error("{count} shards exceed the limit of {max}: write at most {max} shards")]
    TooManyShards {
        /// How many shards were asked for.
        count: usize,
        /// The limit, [`SHARD_COUNT_MAX`].
        max: usize,
    },
    /// A shard entry without the `CPU:roles` shape.
    #[error("shard `{text}` is not `CPU:roles`: write e.g. `0:writer,net` or `*:net`")]
    BadShard {
        /// The offending shard entry.
        text: String,
    },
    /// A CPU that is neither a number nor `*`.
    #[error("cpu `{text}` is not a CPU number: write e.g. `0`, or `*` for an unpinned shard")]
    BadCpu {
        /// The offending CPU text.
        text: String,
    },
    /// The same CPU named by two shards.
    #[error("cpu {cpu} is given to two shards: give each shard its own cpu, or write `*`")]
    DuplicateCpu {
        /// The repeated CPU.
        cpu: usize,
    },
    /// A shard entry with nothing after the colon.
    #[error("shard `{text}` has no roles: write at least one of writer, dispatch, net, control")]
    NoRoles {
        /// The offending shard entry.
        text: String,
    },
    /// A role name that is not one of the four.
    #[error("unknown role `{name}`: write one of writer, dispatch, net, control")]
    UnknownRole {
        /// The offending role name.
        name: String,
    },
    /// A required role that no shard has.
    #[error("no shard has the `{role}` role: add `{role}` to one shard, e.g. `0:net,{role}`")]
    MissingRole {
        /// The missing role.
        role: Role,
    },
    /// A single-owner role given to two shards.
    #[error(
        "the `{role}` role is on both {first} and {second} (shards count from 0 in the order \
         written): keep `{role}` on exactly one shard"
    )]
    DuplicateRole {
        /// The role that must have one owner.
        role: Role,
        /// The first shard that has it.
        first: ShardId,
        /// The second shard that has it.
        second: ShardId,
    },
}

impl Role {
    /// Every role, in display order.
    pub const ALL: [Role; 4] = [Role::Writer, Role::Dispatch, Role::Net, Role::Control];

    /// The lowercase name used on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Role::Writer => "writer",
            Role::Dispatch => "dispatch",
            Role::Net => "net",
            Role::Control => "control",
        }
    }

    /// Whether a valid placement has exactly one shard with this role (rather than one or more).
    pub fn has_single_owner(self) -> bool {
        matches!(self, Role::Writer | Role::Control)
    }

    const fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Role {
    type Err = PlacementError;

    /// Parses a role name, ignoring ASCII case and surrounding whitespace.
    fn from_str(text: &str) -> Result<Role, PlacementError> {
        let name = text.trim();
        Role::ALL
            .into_iter()
            .find(|role| role.name().eq_ignore_ascii_case(name))
            .ok_or_else(|| PlacementError::UnknownRole {
                name: name.to_owned(),
            })
    }
}

impl RoleSet {
    /// The empty set.
    pub const EMPTY: RoleSet = RoleSet(0);

    /// All four roles.
    pub const ALL: RoleSet = RoleSet::EMPTY
        .with(Role::Writer)
        .with(Role::Dispatch)
        .with(Role::Net)
        .with(Role::Control);

    /// This set plus `role`; usable in constants.
    #[must_use]
    pub const fn with(self, role: Role) -> RoleSet {
        RoleSet(self.0 | role.bit())
    }

    /// Whether `role` is in the set.
    pub fn contains(self, role: Role) -> bool {
        self.0 & role.bit() != 0
    }

    /// Adds `role` to the set.
    pub fn insert(&mut self, role: Role) {
        self.0 |= role.bit();
    }

    /// Removes `role` from the set.
    pub fn remove(&mut self, role: Role) {
        self.0 &= !role.bit();
    }

    /// Whether the set has no roles.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The number of roles in the set.
    pub fn len(self) -> usize {
        self.0.count_ones() as usize
    }

    /// The roles in both sets.
    #[must_use]
    pub fn intersection(self, other: RoleSet) -> RoleSet {
        RoleSet(self.0 & other.0)
    }

    /// The roles in either set.
    #[must_use]
    pub fn union(self, other: RoleSet) -> RoleSet {
        RoleSet(self.0 | other.0)
    }

    /// The roles in the set, in [`Role::ALL`] order.
    pub fn iter(self) -> impl Iterator<Item = Role> {
        Role::ALL
            .into_iter()
            .filter(move |role| self.contains(*role))
    }
}

impl From<Role> for RoleSet {
    fn from(role: Role) -> RoleSet {
        RoleSet::EMPTY.with(role)
    }
}

impl FromIterator<Role> for RoleSet {
    fn from_iter<I: IntoIterator<Item = Role>>(roles: I) -> RoleSet {
        let mut set = RoleSet::EMPTY;
        for role in roles {
            set.insert(role);
        }
        set
    }
}

impl fmt::Display for RoleSet {
    /// Writes the roles joined by `+` (`writer+net`), or `none` for the empty set.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        write_roles(f, *self, "+")
    }
}

impl Placement {
    /// The default layout for `cores` cores, with shard `i` on CPU `i`.
    ///
    /// - 1 core: `shard-00` = writer+dispatch+net+control.
    /// - 2 cores: `shard-00` = writer+net+control, `shard-01` = dispatch+net.
    /// - n >= 3: `shard-00` = net+control, `shard-01` = writer+net, `shard-02` = dispatch+net,
    ///   the rest net.
    ///
    /// Every shard serves the network, so connections spread over all cores. `cores` is clamped
    /// to `1..=SHARD_COUNT_MAX`, because a machine with no detected cores still has one and a
    /// machine with more than the limit is served by the limit.
    pub fn auto(cores: usize) -> Placement {
        let count = cores.clamp(1, SHARD_COUNT_MAX);
        let net = RoleSet::from(Role::Net);
        let shards = (0..count)
            .map(|index| {
                let roles = match (count, index) {
                    (1, _) => RoleSet::ALL,
                    (2, 0) => net.with(Role::Writer).with(Role::Control),
                    (2, _) => net.with(Role::Dispatch),
                    (_, 0) => net.with(Role::Control),
                    (_, 1) => net.with(Role::Writer),
                    (_, 2) => net.with(Role::Dispatch),
                    _ => net,
                };
                ShardSpec {
                    id: ShardId::new(index),
                    cpu: Some(index),
                    roles,
                }
            })
            .collect();
        Placement::validated(shards, RoleSet::ALL)
    }

    /// [`Placement::auto`] for the cores this process may use
    /// (`std::thread::available_parallelism`, at least 1).
    pub fn detect() -> Placement {
        let cores = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
        Placement::auto(cores)
    }

    /// Parses `--shards` text: a bare shard count (`3`, meaning [`Placement::auto`]) or shards
    /// separated by `;`, each `CPU:role,role` with `*` for an unpinned CPU.
    ///
    /// # Errors
    ///
    /// Returns a [`PlacementError`] naming the first problem and what to write instead: blank
    /// text, a zero or excessive count, a malformed entry or CPU, a repeated CPU, an unknown
    /// role, or a role rule broken (see the module docs).
    pub fn parse(spec: &str) -> Result<Placement, PlacementError> {
        let spec = spec.trim();
        if spec.is_empty() {
            return Err(PlacementError::Empty);
        }
        if spec.bytes().all(|byte| byte.is_ascii_digit()) {
            return parse_count(spec);
        }
        let mut shards = Vec::new();
        let mut cpus_seen = HashSet::new();
        for text in spec
            .split(';')
            .map(str::trim)
            .filter(|text| !text.is_empty())
        {
            let (cpu_text, roles_text) =
                text.split_once(':')
                    .ok_or_else(|| PlacementError::BadShard {
                        text: text.to_owned(),
                    })?;
            let cpu = parse_cpu(cpu_text.trim())?;
            if let Some(cpu) = cpu {
                if !cpus_seen.insert(cpu) {
                    return Err(PlacementError::DuplicateCpu { cpu });
                }
            }
            let mut roles = RoleSet::EMPTY;
            for name in roles_text
                .split(',')
                .map(str::trim)
                .filter(|name| !name.is_empty())
            {
                roles.insert(name.parse()?);
            }
            if roles.is_empty() {
                return Err(PlacementError::NoRoles {
                    text: text.to_owned(),
                });
            }
            if shards.len() == SHARD_COUNT_MAX {
                let count = spec
                    .split(';')
                    .filter(|text| !text.trim().is_empty())
                    .count();
                return Err(PlacementError::TooManyShards {
                    count,
                    max: SHARD_COUNT_MAX,
                });
            }
            shards.push(ShardSpec {
                id: ShardId::new(shards.len()),
                cpu,
                roles,
            });
        }
        if shards.is_empty() {
            return Err(PlacementError::Empty);
        }
        validate(&shards, RoleSet::ALL)?;
        Ok(Placement { shards })
    }

    /// The shards, in id order.
    pub fn shards(&self) -> &[ShardSpec] {
        &self.shards
    }

    /// The shard with id `id`, if the placement has it.
    pub fn shard(&self, id: ShardId) -> Option<&ShardSpec> {
        self.shards.get(id.index())
    }

    /// How many shards the placement has; at least 1.
    pub fn len(&self) -> usize {
        self.shards.len()
    }

    /// Always false: a placement has at least one shard.
    pub fn is_empty(&self) -> bool {
        self.shards.is_empty()
    }

    /// Every role some shard has.
    pub fn roles(&self) -> RoleSet {
        self.shards
            .iter()
            .fold(RoleSet::EMPTY, |set, spec| set.union(spec.roles))
    }

    /// The shards that have `role`, in id order.
    pub fn shards_with(&self, role: Role) -> impl Iterator<Item = ShardId> + '_ {
        self.shards
            .iter()
            .filter(move |spec| spec.roles.contains(role))
            .map(|spec| spec.id)
    }

    /// The first shard with `role`, or `None` if no shard has it (possible only after
    /// [`Placement::only_roles`]).
    pub fn try_owner_of(&self, role: Role) -> Option<ShardId> {
        self.shards_with(role).next()
    }

    /// The first shard with `role`: for writer and control, the one owner.
    ///
    /// # Panics
    ///
    /// Panics if no shard has `role`. Full placements have every role, so this can only happen
    /// on a placement from [`Placement::only_roles`] that dropped `role`; use
    /// [`Placement::try_owner_of`] there.
    pub fn owner_of(&self, role: Role) -> ShardId {
        self.try_owner_of(role)
            .unwrap_or_else(|| panic!("no shard has the {role} role in placement `{self}`"))
    }

    /// The same shards restricted to the roles in `keep`: shards left with no role are dropped
    /// and the rest renumbered densely from `shard-00`, keeping their CPUs.
    ///
    /// The name server uses this to keep only net and control. The result satisfies the role
    /// rules for every role it still has.
    ///
    /// # Panics
    ///
    /// Panics if `keep` shares no role with this placement, since that would leave no shard.
    #[must_use]
    pub fn only_roles(&self, keep: RoleSet) -> Placement {
        let kept = keep.intersection(self.roles());
        assert!(
            !kept.is_empty(),
            "only_roles({keep}) leaves no shard of placement `{self}`"
        );
        let shards: Vec<ShardSpec> = self
            .shards
            .iter()
            .map(|spec| (spec.cpu, spec.roles.intersection(kept)))
            .filter(|(_, roles)| !roles.is_empty())
            .enumerate()
            .map(|(index, (cpu, roles))| ShardSpec {
                id: ShardId::new(index),
                cpu,
                roles,
            })
            .collect();
        Placement::validated(shards, kept)
    }

    /// Wraps shards that must already satisfy the rules for `required`.
    fn validated(shards: Vec<ShardSpec>, required: RoleSet) -> Placement {
        if let Err(error) = validate(&shards, required) {
            panic!("invariant: a derived placement is valid, but: {error}");
        }
        Placement { shards }
    }
}

impl FromStr for Placement {
    type Err = PlacementError;

    fn from_str(spec: &str) -> Result<Placement, PlacementError> {
        Placement::parse(spec)
    }
}

impl fmt::Display for Placement {
    /// Writes the `CPU:role,role;...` form, which [`Placement::parse`] reads back unchanged.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (index, spec) in self.shards.iter().enumerate() {
            if index > 0 {
                f.write_str(";")?;
            }
            match spec.cpu {
                Some(cpu) => write!(f, "{cpu}:")?,
                None => f.write_str("*:")?,
            }
            write_roles(f, spec.roles, ",")?;
        }
        Ok(())
    }
}

fn parse_count(spec: &str) -> Result<Placement, PlacementError> {
    // Digits that overflow usize are certainly too many shards.
    let count = spec.parse::<usize>().unwrap_or(usize::MAX);
    if count == 0 {
        return Err(PlacementError::ZeroShards);
    }
    if count > SHARD_COUNT_MAX {
        return Err(PlacementError::TooManyShards {
            count,
            max: SHARD_COUNT_MAX,
        });
    }
    Ok(Placement::auto(count))
}

fn parse_cpu(text: &str) -> Result<Option<usize>, PlacementError> {
    if text == "*" {
        return Ok(None);
    }
    let is_number = !text.is_empty() && text.bytes().all(|byte| byte.is_ascii_digit());
    match text.parse::<usize>() {
        Ok(cpu) if is_number => Ok(Some(cpu)),
        _ => Err(PlacementError::BadCpu {
            text: text.to_owned(),
        }),
    }
}

/// Checks the role rules for every role in `required`, plus the structural invariants.
fn validate(shards: &[ShardSpec], required: RoleSet) -> Result<(), PlacementError> {
    if shards.is_empty() {
        return Err(PlacementError::Empty);
    }
    if shards.len() > SHARD_COUNT_MAX {
        return Err(PlacementError::TooManyShards {
            count: shards.len(),
            max: SHARD_COUNT_MAX,
        });
    }
    for (index, spec) in shards.iter().enumerate() {
        assert_eq!(spec.id.index(), index, "shard ids are dense and in order");
        assert!(!spec.roles.is_empty(), "{} has no roles", spec.id);
    }
    for role in required.iter() {
        let mut owners = shards.iter().filter(|spec| spec.roles.contains(role));
        let first = owners.next().ok_or(PlacementError::MissingRole { role })?;
        if role.has_single_owner() {
            if let Some(second) = owners.next() {
                return Err(PlacementError::DuplicateRole {
                    role,
                    first: first.id,
                    second: second.id,
                });
            }
        }
    }
    Ok(())
}

fn write_roles(f: &mut fmt::Formatter<'_>, roles: RoleSet, separator: &str) -> fmt::Result {
    for (index, role) in roles.iter().enumerate() {
        if index > 0 {
            f.write_str(separator)?;
        }
        f.write_str(role.name())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roles(list: &[Role]) -> RoleSet {
        list.iter().copied().collect()
    }

    /// Asserts the rules from the module docs for a full placement.
    fn assert_full_placement_valid(placement: &Placement) {
        assert_eq!(placement.shards_with(Role::Writer).count(), 1);
        assert_eq!(placement.shards_with(Role::Control).count(), 1);
        assert!(placement.shards_with(Role::Dispatch).count() >= 1);
        assert!(placement.shards_with(Role::Net).count() >= 1);
        for (index, spec) in placement.shards().iter().enumerate() {
            assert_eq!(spec.id, ShardId::new(index));
        }
    }

    #[test]
    fn auto_one_core_puts_every_role_on_shard_zero() {
        let placement = Placement::auto(1);
        assert_full_placement_valid(&placement);
        assert_eq!(placement.len(), 1);
        assert_eq!(placement.shards()[0].roles, RoleSet::ALL);
        assert_eq!(placement.shards()[0].cpu, Some(0));
    }

    #[test]
    fn auto_two_cores_splits_writer_and_dispatch() {
        let placement = Placement::auto(2);
        assert_full_placement_valid(&placement);
        assert_eq!(
            placement.shards()[0].roles,
            roles(&[Role::Writer, Role::Net, Role::Control])
        );
        assert_eq!(
            placement.shards()[1].roles,
            roles(&[Role::Dispatch, Role::Net])
        );
        assert_eq!(placement.to_string(), "0:writer,net,control;1:dispatch,net");
    }

    #[test]
    fn auto_eight_cores_gives_each_core_net() {
        let placement = Placement::auto(8);
        assert_full_placement_valid(&placement);
        assert_eq!(placement.len(), 8);
        assert_eq!(placement.owner_of(Role::Control), ShardId(0));
        assert_eq!(placement.owner_of(Role::Writer), ShardId(1));
        assert_eq!(
            placement.shards_with(Role::Dispatch).collect::<Vec<_>>(),
            [ShardId(2)]
        );
        assert_eq!(placement.shards_with(Role::Net).count(), 8);
        for spec in &placement.shards()[3..] {
            assert_eq!(spec.roles, RoleSet::from(Role::Net));
        }
    }

    #[test]
    fn auto_zero_cores_is_clamped_to_one() {
        assert_eq!(Placement::auto(0), Placement::auto(1));
    }

    #[test]
    fn auto_beyond_limit_is_clamped_to_limit() {
        assert_eq!(Placement::auto(SHARD_COUNT_MAX + 5).len(), SHARD_COUNT_MAX);
    }

    #[test]
    fn detect_is_valid_and_nonempty() {
        let placement = Placement::detect();
        assert_full_placement_valid(&placement);
        assert!(!placement.is_empty());
    }

    #[test]
    fn parse_bare_count_is_auto() {
        assert_eq!(Placement::parse("3"), Ok(Placement::auto(3)));
        assert_eq!(Placement::parse(" 1 "), Ok(Placement::auto(1)));
    }

    #[test]
    fn parse_display_round_trips() {
        let texts = [
            "0:writer,control;1:net,dispatch",
            "*:writer,dispatch,net,control",
            "4:control,net;0:writer;2:dispatch;*:net;*:net,dispatch",
            "7",
        ];
        for text in texts {
            let placement = Placement::parse(text).expect("valid placement text");
            let shown = placement.to_string();
            assert_eq!(
                Placement::parse(&shown),
                Ok(placement.clone()),
                "{text} -> {shown}"
            );
            assert_eq!(
                shown.parse::<Placement>().expect("reparse").to_string(),
                shown
            );
        }
    }

    #[test]
    fn parse_mixed_case_whitespace_and_trailing_separator_is_accepted() {
        let placement = Placement::parse(" 0 : Writer , NET, control ; 1:dispatch,net ;")
            .expect("tolerant parse");
        assert_eq!(placement, Placement::auto(2));
    }

    #[test]
    fn parse_star_cpu_is_unpinned() {
        let placement = Placement::parse("*:writer,dispatch,net,control").expect("valid");
        assert_eq!(placement.shards()[0].cpu, None);
        assert_eq!(placement.to_string(), "*:writer,dispatch,net,control");
    }

    #[test]
    fn parse_unknown_role_is_error() {
        let error = Placement::parse("0:writer,net,control,dispatcher").expect_err("bad role");
        assert_eq!(
            error,
            PlacementError::UnknownRole {
                name: "dispatcher".to_owned()
            }
        );
        assert!(error
            .to_string()
            .contains("write one of writer, dispatch, net, control"));
    }

    #[test]
    fn parse_missing_writer_is_error() {
        let error = Placement::parse("0:net,control;1:dispatch").expect_err("no writer");
        assert_eq!(error, PlacementError::MissingRole { role: Role::Writer });
        assert!(error.to_string().contains("add `writer` to one shard"));
    }

    #[test]
    fn parse_missing_control_is_error() {
        let error = Placement::parse("0:writer,net;1:dispatch").expect_err("no control");
        assert_eq!(
            error,
            PlacementError::MissingRole {
                role: Role::Control
            }
        );
    }

    #[test]
    fn parse_missing_dispatch_is_error() {
        let error = Placement::parse("0:writer,net,control").expect_err("no dispatch");
        assert_eq!(
            error,
            PlacementError::MissingRole {
                role: Role::Dispatch
            }
        );
    }

    #[test]
    fn parse_missing_net_is_error() {
        let error = Placement::parse("0:writer,control;1:dispatch").expect_err("no net");
        assert_eq!(error, PlacementError::MissingRole { role: Role::Net });
    }

    #[test]
    fn parse_duplicate_writer_is_error() {
        let error =
            Placement::parse("0:writer,net,control;1:writer,dispatch").expect_err("two writers");
        assert_eq!(
            error,
            PlacementError::DuplicateRole {
                role: Role::Writer,
                first: ShardId(0),
                second: ShardId(1)
            }
        );
        assert!(error
            .to_string()
            .contains("keep `writer` on exactly one shard"));
    }

    #[test]
    fn parse_duplicate_control_is_error() {
        let error = Placement::parse("0:writer,net,control;1:control,dispatch;2:control")
            .expect_err("two controls");
        assert_eq!(
            error,
            PlacementError::DuplicateRole {
                role: Role::Control,
                first: ShardId(0),
                second: ShardId(1)
            }
        );
    }

    #[test]
    fn parse_empty_spec_is_error() {
        assert_eq!(Placement::parse(""), Err(PlacementError::Empty));
        assert_eq!(Placement::parse("  ; ;"), Err(PlacementError::Empty));
        assert!(PlacementError::Empty
            .to_string()
            .contains("write a shard count"));
    }

    #[test]
    fn parse_duplicate_cpu_is_error() {
        let error =
            Placement::parse("0:writer,net,control;0:dispatch,net").expect_err("cpu 0 twice");
        assert_eq!(error, PlacementError::DuplicateCpu { cpu: 0 });
        assert!(error.to_string().contains("give each shard its own cpu"));
    }

    #[test]
    fn parse_duplicate_star_cpu_is_accepted() {
        let placement = Placement::parse("*:writer,net,control;*:dispatch,net").expect("valid");
        assert_eq!(placement.len(), 2);
    }

    #[test]
    fn parse_bad_cpu_is_error() {
        for (text, cpu) in [
            ("x:net", "x"),
            ("-1:net", "-1"),
            (":net", ""),
            ("+1:net", "+1"),
        ] {
            assert_eq!(
                Placement::parse(text),
                Err(PlacementError::BadCpu {
                    text: cpu.to_owned()
                }),
                "{text}"
            );
        }
    }

    #[test]
    fn parse_entry_without_colon_is_error() {
        let error = Placement::parse("0:writer,net,control;dispatch").expect_err("no colon");
        assert_eq!(
            error,
            PlacementError::BadShard {
                text: "dispatch".to_owned()
            }
        );
    }

    #[test]
    fn parse_entry_without_roles_is_error() {
        let error = Placement::parse("0:writer,net,control,dispatch;1: , ").expect_err("no roles");
        assert_eq!(
            error,
            PlacementError::NoRoles {
                text: "1: ,".to_owned()
            }
        );
    }

    #[test]
    fn parse_zero_count_is_error() {
        assert_eq!(Placement::parse("0"), Err(PlacementError::ZeroShards));
    }

    #[test]
    fn parse_count_beyond_limit_is_error() {
        let max = SHARD_COUNT_MAX;
        let too_many = (max + 1).to_string();
        assert_eq!(
            Placement::parse(&too_many),
            Err(PlacementError::TooManyShards {
                count: max + 1,
                max
            })
        );
        let huge = "99999999999999999999999999";
        assert_eq!(
            Placement::parse(huge),
            Err(PlacementError::TooManyShards {
                count: usize::MAX,
                max
            })
        );
    }

    #[test]
    fn parse_list_beyond_limit_is_error() {
        let mut text = String::from("*:writer,dispatch,net,control");
        for _ in 0..SHARD_COUNT_MAX {
            text.push_str(";*:net");
        }
        assert_eq!(
            Placement::parse(&text),
            Err(PlacementError::TooManyShards {
                count: SHARD_COUNT_MAX + 1,
                max: SHARD_COUNT_MAX
            })
        );
    }

    #[test]
    fn only_roles_net_control_on_two_cores_keeps_both_shards() {
        let keep = roles(&[Role::Net, Role::Control]);
        let namesrv = Placement::auto(2).only_roles(keep);
        assert_eq!(namesrv.to_string(), "0:net,control;1:net");
        assert_eq!(namesrv.owner_of(Role::Control), ShardId(0));
        assert_eq!(namesrv.try_owner_of(Role::Writer), None);
        assert_eq!(namesrv.roles(), keep);
    }

    #[test]
    fn only_roles_drops_emptied_shards_and_renumbers() {
        let placement = Placement::parse("0:writer;1:dispatch;2:net;3:control,net").expect("ok");
        let kept = placement.only_roles(roles(&[Role::Net, Role::Control]));
        assert_eq!(kept.len(), 2);
        assert_eq!(
            kept.shards()[0],
            ShardSpec {
                id: ShardId(0),
                cpu: Some(2),
                roles: Role::Net.into()
            }
        );
        assert_eq!(kept.shards()[1].id, ShardId(1));
        assert_eq!(kept.shards()[1].cpu, Some(3));
        assert_eq!(kept.owner_of(Role::Control), ShardId(1));
    }

    #[test]
    fn only_roles_output_round_trips_through_parse_when_roles_complete() {
        let placement = Placement::auto(8);
        assert_eq!(placement.only_roles(RoleSet::ALL), placement);
    }

    #[test]
    fn only_roles_role_absent_from_source_is_ignored() {
        let namesrv = Placement::auto(1).only_roles(roles(&[Role::Net, Role::Control]));
        let again = namesrv.only_roles(roles(&[Role::Net, Role::Writer]));
        assert_eq!(again.to_string(), "0:net");
    }

    #[test]
    fn role_from_str_and_display_agree() {
        for role in Role::ALL {
            assert_eq!(role.to_string().parse::<Role>(), Ok(role));
        }
        assert_eq!("CONTROL".parse::<Role>(), Ok(Role::Control));
    }

    #[test]
    fn role_set_display_joins_with_plus() {
        assert_eq!(roles(&[Role::Net, Role::Writer]).to_string(), "writer+net");
        assert_eq!(RoleSet::EMPTY.to_string(), "none");
        assert_eq!(RoleSet::ALL.to_string(), "writer+dispatch+net+control");
    }

    #[test]
    fn role_set_insert_remove_contains() {
        let mut set = RoleSet::default();
        assert!(set.is_empty());
        set.insert(Role::Dispatch);
        set.insert(Role::Dispatch);
        assert!(set.contains(Role::Dispatch));
        assert!(!set.contains(Role::Net));
        assert_eq!(set.len(), 1);
        set.remove(Role::Dispatch);
        assert!(set.is_empty());
        assert_eq!(RoleSet::ALL.iter().collect::<Vec<_>>(), Role::ALL);
    }
}
