//! Pure helpers shared by controllers and providers.

pub mod address;
pub mod taints;
