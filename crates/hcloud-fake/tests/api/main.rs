//! Integration tests: the fake over real HTTP (127.0.0.1 only).
#![allow(clippy::unwrap_used, clippy::expect_used, missing_docs)]

mod action_lists;
mod certificates;
mod common;
mod faults;
mod images;
mod lists;
mod load_balancers;
mod networks;
mod pipeline;
mod primary_ip_actions;
mod projects;
mod robot;
mod servers;
mod today;
