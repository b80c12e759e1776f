//! One module per workload.

pub mod route;
