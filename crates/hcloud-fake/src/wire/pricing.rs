//! `GET /pricing`: the prices of everything, in one object (`pricing` schema).

use serde::{Deserialize, Serialize};

use super::common::{Price, PricePerTime};

/// A price per GB and month (images, volumes).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PricePerGbMonth {
    /// The price.
    pub price_per_gb_month: Price,
}

/// A monthly price (the deprecated project-wide Floating IP price).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonthlyPrice {
    /// The price.
    pub price_monthly: Price,
}

/// A monthly price in a location (Floating IPs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocationMonthlyPrice {
    /// Location name.
    pub location: String,
    /// The price.
    pub price_monthly: Price,
}

/// Floating IP prices of one type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FloatingIpTypePricing {
    /// `ipv4` or `ipv6`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Per location.
    pub prices: Vec<LocationMonthlyPrice>,
}

/// An hourly and monthly price in a location (Primary IPs).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocationPrice {
    /// Location name.
    pub location: String,
    /// Hourly price.
    pub price_hourly: Price,
    /// Monthly price.
    pub price_monthly: Price,
}

/// Primary IP prices of one type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PrimaryIpTypePricing {
    /// `ipv4` or `ipv6`.
    #[serde(rename = "type")]
    pub kind: String,
    /// Per location.
    pub prices: Vec<LocationPrice>,
}

/// The prices of a server or load balancer type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TypePricing {
    /// The type's id.
    pub id: u64,
    /// The type's name.
    pub name: String,
    /// Per location.
    pub prices: Vec<PricePerTime>,
}

/// Backup prices: a share of the server's price.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ServerBackupPricing {
    /// Percentage of the server's price, e.g. `20.00`.
    pub percentage: String,
}

/// `pricing` schema.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pricing {
    /// Currency code, `EUR`.
    pub currency: String,
    /// VAT rate in percent, e.g. `19.00`.
    pub vat_rate: String,
    /// Snapshots and backups.
    pub image: PricePerGbMonth,
    /// Deprecated project-wide Floating IP price.
    pub floating_ip: MonthlyPrice,
    /// Floating IPs per type and location.
    pub floating_ips: Vec<FloatingIpTypePricing>,
    /// Primary IPs per type and location.
    pub primary_ips: Vec<PrimaryIpTypePricing>,
    /// Backups.
    pub server_backup: ServerBackupPricing,
    /// Server types (the same prices as `GET /server_types`).
    pub server_types: Vec<TypePricing>,
    /// Load balancer types (the same prices as `GET /load_balancer_types`).
    pub load_balancer_types: Vec<TypePricing>,
    /// Volumes.
    pub volume: PricePerGbMonth,
}
