//! Helpers shared by the integration tests.
#![allow(dead_code)]

pub mod fake_model;
pub mod providers;
pub mod python;
