//! Pure helpers shared by controllers and providers.

pub mod address;
pub mod go_syntax;
pub mod label_selector;
pub mod service;
pub mod taints;
