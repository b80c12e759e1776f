//! One module per workload.

pub mod commitlog;
pub mod route;
