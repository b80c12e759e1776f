//! The broker's role and id as they are now: `brokerRole` and `brokerId` of the config at
//! start, changed at run time in controller mode when the controller elects a master (Java's
//! `ReplicasManager.changeToMaster` / `changeToSlave` set both in the live config).
//!
//! Read lock-free on the send path; changed rarely, by the controller-mode thread.

use crate::config::broker::BrokerRole;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU8, Ordering};
use std::sync::Mutex;

/// Role, id and master of the broker now.
#[derive(Debug)]
pub struct RuntimeRole {
    role: AtomicU8,
    broker_id: AtomicI64,
    /// The master epoch of the group, as the controller last told it (0 outside controller
    /// mode).
    master_epoch: AtomicI32,
    /// The group's master's remoting address (`host:port`), when known.
    master_addr: Mutex<Option<String>>,
    /// A change the name servers have not been told of yet.
    announce_due: AtomicBool,
}

impl RuntimeRole {
    /// The role and id of the config.
    #[must_use]
    pub fn new(role: BrokerRole, broker_id: i64) -> RuntimeRole {
        RuntimeRole {
            role: AtomicU8::new(encode(role)),
            broker_id: AtomicI64::new(broker_id),
            master_epoch: AtomicI32::new(0),
            master_addr: Mutex::new(None),
            announce_due: AtomicBool::new(false),
        }
    }

    /// The role now.
    #[must_use]
    pub fn get(&self) -> BrokerRole {
        match self.role.load(Ordering::Acquire) {
            0 => BrokerRole::AsyncMaster,
            1 => BrokerRole::SyncMaster,
            _ => BrokerRole::Slave,
        }
    }

    /// Whether the broker is a slave now.
    #[must_use]
    pub fn is_slave(&self) -> bool {
        self.get() == BrokerRole::Slave
    }

    /// The id the broker registers with name servers now (0: master).
    #[must_use]
    pub fn broker_id(&self) -> i64 {
        self.broker_id.load(Ordering::Acquire)
    }

    /// The master epoch last applied.
    #[must_use]
    pub fn master_epoch(&self) -> i32 {
        self.master_epoch.load(Ordering::Acquire)
    }

    /// The group's master's remoting address, when known.
    #[must_use]
    pub fn master_addr(&self) -> Option<String> {
        self.master_addr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Takes a new master epoch ahead of the role that goes with it: a slave's link to the
    /// master of the old epoch ends on it.
    pub fn set_epoch(&self, epoch: i32) {
        self.master_epoch.store(epoch, Ordering::Release);
    }

    /// Takes a new role, id and master (an election's outcome).
    pub fn set(&self, role: BrokerRole, broker_id: i64, epoch: i32, master: Option<String>) {
        *self
            .master_addr
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = master;
        self.broker_id.store(broker_id, Ordering::Release);
        self.master_epoch.store(epoch, Ordering::Release);
        self.role.store(encode(role), Ordering::Release);
    }

    /// Asks for the role as it is now to be registered with the name servers (once the
    /// broker acts on it: a new master once it takes puts).
    pub fn announce(&self) {
        self.announce_due.store(true, Ordering::Release);
    }

    /// Whether a change waits to be registered with the name servers.
    #[must_use]
    pub fn announce_due(&self) -> bool {
        self.announce_due.load(Ordering::Acquire)
    }

    /// The registration about to go out carries the role as it is now.
    pub fn announced(&self) {
        self.announce_due.store(false, Ordering::Release);
    }
}

fn encode(role: BrokerRole) -> u8 {
    match role {
        BrokerRole::AsyncMaster => 0,
        BrokerRole::SyncMaster => 1,
        BrokerRole::Slave => 2,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_role_change_is_seen_whole() {
        let role = RuntimeRole::new(BrokerRole::Slave, 2);
        assert!(role.is_slave());
        assert_eq!(role.broker_id(), 2);
        role.set(
            BrokerRole::SyncMaster,
            0,
            3,
            Some("127.0.0.1:10911".to_owned()),
        );
        assert_eq!(role.get(), BrokerRole::SyncMaster);
        assert_eq!(role.broker_id(), 0);
        assert_eq!(role.master_epoch(), 3);
        assert_eq!(role.master_addr().as_deref(), Some("127.0.0.1:10911"));
    }
}
