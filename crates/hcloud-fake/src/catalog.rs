//! The fixed catalogue: locations, server types, load balancer types, system images and the
//! pricing.
//!
//! Ids come from their own ranges so that an id of one kind used as another is caught:
//! locations 1–6 (the real ids), server types use the real-ish ids (22–120),
//! load balancer types 201–204, images 900001–.

use std::sync::LazyLock;

use crate::time::{now_unix, rfc3339};
use crate::wire::request::IdOrName;
use crate::wire::{
    Architecture, DeprecationInfo, FloatingIpTypePricing, Image, LoadBalancerType, Location, LocationMonthlyPrice,
    LocationPrice, MonthlyPrice, Price, PricePerGbMonth, PricePerTime, Pricing, PrimaryIpTypePricing, Protection,
    ServerBackupPricing, ServerType, ServerTypeLocation, TypePricing,
};

/// One TB in bytes.
const TB: u64 = 1_099_511_627_776;

/// The static catalogue.
#[derive(Debug)]
pub(crate) struct Catalog {
    /// Locations, sorted by id.
    pub locations: Vec<Location>,
    /// Server types, sorted by id.
    pub server_types: Vec<ServerType>,
    /// Load balancer types, sorted by id.
    pub load_balancer_types: Vec<LoadBalancerType>,
    /// System images, sorted by id.
    pub images: Vec<Image>,
    /// `GET /pricing`: the types' prices above and made-up ones for the rest.
    pub pricing: Pricing,
}

static CATALOG: LazyLock<Catalog> = LazyLock::new(build);

/// The process-wide catalogue.
pub(crate) fn catalog() -> &'static Catalog {
    &CATALOG
}

/// Network zones known to the catalogue.
pub(crate) const NETWORK_ZONES: [&str; 4] = ["eu-central", "us-east", "us-west", "ap-southeast"];

fn matches_ref(id: u64, name: &str, r: &IdOrName) -> bool {
    match r {
        IdOrName::Id(i) => *i == id,
        IdOrName::Name(n) => n == name || n.parse::<u64>().ok() == Some(id),
    }
}

impl Catalog {
    /// Location by id or name.
    pub fn location(&self, r: &IdOrName) -> Option<&Location> {
        self.locations.iter().find(|l| matches_ref(l.id, &l.name, r))
    }

    /// Location by id.
    pub fn location_by_id(&self, id: u64) -> Option<&Location> {
        self.locations.iter().find(|l| l.id == id)
    }

    /// First location of a network zone.
    pub fn location_in_zone(&self, zone: &str) -> Option<&Location> {
        self.locations.iter().find(|l| l.network_zone == zone)
    }

    /// Server type by id or name.
    pub fn server_type(&self, r: &IdOrName) -> Option<&ServerType> {
        self.server_types.iter().find(|t| matches_ref(t.id, &t.name, r))
    }

    /// Server type by id.
    pub fn server_type_by_id(&self, id: u64) -> Option<&ServerType> {
        self.server_types.iter().find(|t| t.id == id)
    }

    /// Load balancer type by id or name.
    pub fn load_balancer_type(&self, r: &IdOrName) -> Option<&LoadBalancerType> {
        self.load_balancer_types.iter().find(|t| matches_ref(t.id, &t.name, r))
    }

    /// Load balancer type by id.
    pub fn load_balancer_type_by_id(&self, id: u64) -> Option<&LoadBalancerType> {
        self.load_balancer_types.iter().find(|t| t.id == id)
    }

    /// Image by id, or by name for the given architecture.
    pub fn image(&self, r: &IdOrName, arch: Architecture) -> Option<&Image> {
        match r {
            IdOrName::Id(id) => self.image_by_id(*id),
            IdOrName::Name(n) => match n.parse::<u64>() {
                Ok(id) => self.image_by_id(id),
                Err(_) => self.images.iter().find(|i| i.name.as_deref() == Some(n.as_str()) && i.architecture == arch),
            },
        }
    }

    /// Image by id.
    pub fn image_by_id(&self, id: u64) -> Option<&Image> {
        self.images.iter().find(|i| i.id == id)
    }

    /// Included traffic of a load balancer type in a location.
    pub fn lb_included_traffic(&self, lb_type: &LoadBalancerType, location: &str) -> u64 {
        lb_type.prices.iter().find(|p| p.location == location).map_or(20 * TB, |p| p.included_traffic)
    }

    /// Included traffic of a server type in a location.
    pub fn server_included_traffic(&self, server_type: &ServerType, location: &str) -> u64 {
        server_type.prices.iter().find(|p| p.location == location).map_or(20 * TB, |p| p.included_traffic)
    }
}

fn price(net: f64) -> Price {
    Price { net: format!("{net:.10}"), gross: format!("{:.10}", net * 1.19) }
}

fn price_per_time(location: &str, monthly: f64, included_tb: u64) -> PricePerTime {
    PricePerTime {
        location: location.to_owned(),
        price_hourly: price((monthly / 730.0 * 10_000.0).round() / 10_000.0),
        price_monthly: price(monthly),
        included_traffic: included_tb * TB,
        price_per_tb_traffic: price(1.0),
    }
}

#[allow(clippy::too_many_arguments)]
fn location(
    id: u64,
    name: &str,
    description: &str,
    country: &str,
    city: &str,
    lat: f64,
    lon: f64,
    zone: &str,
) -> Location {
    Location {
        id,
        name: name.to_owned(),
        description: description.to_owned(),
        country: country.to_owned(),
        city: city.to_owned(),
        latitude: lat,
        longitude: lon,
        network_zone: zone.to_owned(),
    }
}

const EU: &[&str] = &["fsn1", "nbg1", "hel1"];
const ALL: &[&str] = &["fsn1", "nbg1", "hel1", "ash", "hil", "sin"];

struct TypeSpec {
    id: u64,
    name: &'static str,
    cores: u32,
    memory: f64,
    disk: u64,
    cpu_type: &'static str,
    arch: Architecture,
    category: &'static str,
    monthly: f64,
    locations: &'static [&'static str],
    deprecated: bool,
}

#[rustfmt::skip]
const SERVER_TYPES: &[TypeSpec] = &[
    TypeSpec { id: 22, name: "cpx11", cores: 2, memory: 2.0, disk: 40, cpu_type: "shared", arch: Architecture::X86, category: "regular_purpose", monthly: 4.35, locations: ALL, deprecated: false },
    TypeSpec { id: 23, name: "cpx21", cores: 3, memory: 4.0, disk: 80, cpu_type: "shared", arch: Architecture::X86, category: "regular_purpose", monthly: 7.55, locations: ALL, deprecated: false },
    TypeSpec { id: 45, name: "cax11", cores: 2, memory: 4.0, disk: 40, cpu_type: "shared", arch: Architecture::Arm, category: "cost_optimized", monthly: 3.79, locations: EU, deprecated: false },
    TypeSpec { id: 93, name: "cax21", cores: 4, memory: 8.0, disk: 80, cpu_type: "shared", arch: Architecture::Arm, category: "cost_optimized", monthly: 6.49, locations: EU, deprecated: false },
    TypeSpec { id: 94, name: "cax31", cores: 8, memory: 16.0, disk: 160, cpu_type: "shared", arch: Architecture::Arm, category: "cost_optimized", monthly: 12.49, locations: EU, deprecated: false },
    TypeSpec { id: 96, name: "ccx13", cores: 2, memory: 8.0, disk: 80, cpu_type: "dedicated", arch: Architecture::X86, category: "general_purpose", monthly: 12.49, locations: ALL, deprecated: false },
    TypeSpec { id: 97, name: "ccx23", cores: 4, memory: 16.0, disk: 160, cpu_type: "dedicated", arch: Architecture::X86, category: "general_purpose", monthly: 24.49, locations: ALL, deprecated: false },
    TypeSpec { id: 98, name: "ccx33", cores: 8, memory: 32.0, disk: 240, cpu_type: "dedicated", arch: Architecture::X86, category: "general_purpose", monthly: 48.49, locations: ALL, deprecated: false },
    TypeSpec { id: 104, name: "cx22", cores: 2, memory: 4.0, disk: 40, cpu_type: "shared", arch: Architecture::X86, category: "cost_optimized", monthly: 3.79, locations: EU, deprecated: true },
    TypeSpec { id: 114, name: "cx23", cores: 2, memory: 4.0, disk: 40, cpu_type: "shared", arch: Architecture::X86, category: "cost_optimized", monthly: 3.49, locations: EU, deprecated: false },
    TypeSpec { id: 115, name: "cx33", cores: 4, memory: 8.0, disk: 80, cpu_type: "shared", arch: Architecture::X86, category: "cost_optimized", monthly: 5.49, locations: EU, deprecated: false },
    TypeSpec { id: 116, name: "cx43", cores: 8, memory: 16.0, disk: 160, cpu_type: "shared", arch: Architecture::X86, category: "cost_optimized", monthly: 9.49, locations: EU, deprecated: false },
    TypeSpec { id: 117, name: "cx53", cores: 16, memory: 32.0, disk: 320, cpu_type: "shared", arch: Architecture::X86, category: "cost_optimized", monthly: 17.49, locations: EU, deprecated: false },
    TypeSpec { id: 118, name: "cpx22", cores: 2, memory: 4.0, disk: 80, cpu_type: "shared", arch: Architecture::X86, category: "regular_purpose", monthly: 7.99, locations: ALL, deprecated: false },
    TypeSpec { id: 119, name: "cpx32", cores: 4, memory: 8.0, disk: 160, cpu_type: "shared", arch: Architecture::X86, category: "regular_purpose", monthly: 13.99, locations: ALL, deprecated: false },
    TypeSpec { id: 120, name: "cpx42", cores: 8, memory: 16.0, disk: 320, cpu_type: "shared", arch: Architecture::X86, category: "regular_purpose", monthly: 25.49, locations: ALL, deprecated: false },
];

/// `unavailable_after` of every deprecated type: 2026-12-31T00:00:00Z.
const UNAVAILABLE_AFTER_UNIX: i64 = 1_798_675_200;

fn deprecation() -> DeprecationInfo {
    DeprecationInfo {
        announced: "2025-10-16T06:00:00+00:00".to_owned(),
        unavailable_after: rfc3339(UNAVAILABLE_AFTER_UNIX),
    }
}

fn included_tb(location: &str) -> u64 {
    if EU.contains(&location) { 20 } else { 1 }
}

fn server_type(spec: &TypeSpec, locations: &[Location]) -> ServerType {
    let dep = spec.deprecated.then(deprecation);
    let arch = match spec.arch {
        Architecture::X86 => "x86",
        Architecture::Arm => "Arm64",
    };
    ServerType {
        id: spec.id,
        name: spec.name.to_owned(),
        description: format!("{} ({}, {} vCPU, {} GB RAM)", spec.name.to_uppercase(), arch, spec.cores, spec.memory),
        category: Some(spec.category.to_owned()),
        cores: spec.cores,
        memory: spec.memory,
        disk: spec.disk,
        cpu_type: spec.cpu_type.to_owned(),
        storage_type: "local".to_owned(),
        architecture: spec.arch,
        deprecated: Some(spec.deprecated),
        deprecation: dep.clone(),
        prices: spec.locations.iter().map(|l| price_per_time(l, spec.monthly, included_tb(l))).collect(),
        locations: locations
            .iter()
            .filter(|l| spec.locations.contains(&l.name.as_str()))
            .map(|l| ServerTypeLocation {
                id: l.id,
                name: l.name.clone(),
                deprecation: dep.clone(),
                // A deprecated type can still be ordered until `unavailable_after`; it is
                // never recommended.
                available: !spec.deprecated || now_unix() < UNAVAILABLE_AFTER_UNIX,
                recommended: !spec.deprecated,
            })
            .collect(),
    }
}

#[allow(clippy::too_many_arguments)]
fn lb_type(
    id: u64,
    name: &str,
    max_targets: u64,
    max_services: u64,
    max_connections: u64,
    max_certs: u64,
    monthly: f64,
    tb: u64,
    deprecated: bool,
) -> LoadBalancerType {
    let dep = deprecated.then(deprecation);
    LoadBalancerType {
        id,
        name: name.to_owned(),
        description: name.to_uppercase(),
        max_connections,
        max_services,
        max_targets,
        max_assigned_certificates: max_certs,
        deprecated: dep.as_ref().map(|d| d.announced.clone()),
        deprecation: dep,
        prices: ALL.iter().map(|l| price_per_time(l, monthly, if EU.contains(l) { tb } else { 1 })).collect(),
    }
}

fn image(id: u64, name: &str, flavor: &str, version: &str, arch: Architecture, deprecated: Option<&str>) -> Image {
    let mut description = flavor[..1].to_uppercase();
    description.push_str(&flavor[1..]);
    description.push(' ');
    description.push_str(version);
    Image {
        id,
        kind: "system".to_owned(),
        status: "available".to_owned(),
        name: Some(name.to_owned()),
        description,
        image_size: None,
        disk_size: 5.0,
        created: "2024-04-25T12:00:00+00:00".to_owned(),
        created_from: None,
        bound_to: None,
        os_flavor: flavor.to_owned(),
        os_version: Some(version.to_owned()),
        rapid_deploy: true,
        protection: Protection::default(),
        deprecated: deprecated.map(str::to_owned),
        deleted: None,
        labels: Default::default(),
        architecture: arch,
    }
}

fn build() -> Catalog {
    let locations = vec![
        location(1, "fsn1", "Falkenstein DC Park 1", "DE", "Falkenstein", 50.47612, 12.370071, "eu-central"),
        location(2, "nbg1", "Nuremberg DC Park 1", "DE", "Nuremberg", 49.452102, 11.076665, "eu-central"),
        location(3, "hel1", "Helsinki DC Park 1", "FI", "Helsinki", 60.169855, 24.938379, "eu-central"),
        location(4, "ash", "Ashburn, VA", "US", "Ashburn, VA", 39.045821, -77.487073, "us-east"),
        location(5, "hil", "Hillsboro, OR", "US", "Hillsboro, OR", 45.54222, -122.951924, "us-west"),
        location(6, "sin", "Singapore", "SG", "Singapore", 1.283333, 103.833333, "ap-southeast"),
    ];
    let server_types: Vec<ServerType> = SERVER_TYPES.iter().map(|s| server_type(s, &locations)).collect();
    let load_balancer_types = vec![
        lb_type(201, "lb11", 25, 5, 10_000, 10, 5.39, 20, false),
        lb_type(202, "lb21", 75, 15, 20_000, 25, 16.40, 25, false),
        lb_type(203, "lb31", 150, 30, 40_000, 50, 32.90, 30, false),
        lb_type(204, "lb-legacy", 25, 5, 10_000, 10, 5.39, 20, true),
    ];
    let mut images = Vec::new();
    let mut id = 900_001;
    // The last one is deprecated: `GET /images` leaves it out unless `include_deprecated`.
    for (name, flavor, version, deprecated) in [
        ("ubuntu-24.04", "ubuntu", "24.04", None),
        ("ubuntu-22.04", "ubuntu", "22.04", None),
        ("debian-12", "debian", "12", None),
        ("debian-13", "debian", "13", None),
        ("rocky-9", "rocky", "9", None),
        ("alma-9", "alma", "9", None),
        ("fedora-42", "fedora", "42", None),
        ("ubuntu-20.04", "ubuntu", "20.04", Some("2025-06-01T00:00:00+00:00")),
    ] {
        for arch in [Architecture::X86, Architecture::Arm] {
            images.push(image(id, name, flavor, version, arch, deprecated));
            id += 1;
        }
    }
    let pricing = pricing(&server_types, &load_balancer_types);
    Catalog { locations, server_types, load_balancer_types, images, pricing }
}

/// The pricing: the types' own prices; IPs, images, backups and volumes at fixed prices.
fn pricing(server_types: &[ServerType], load_balancer_types: &[LoadBalancerType]) -> Pricing {
    let per_location = |net: f64| {
        ALL.iter()
            .map(|l| LocationPrice {
                location: (*l).to_owned(),
                price_hourly: price((net / 730.0 * 10_000.0).round() / 10_000.0),
                price_monthly: price(net),
            })
            .collect::<Vec<_>>()
    };
    let floating = |net: f64| {
        ALL.iter().map(|l| LocationMonthlyPrice { location: (*l).to_owned(), price_monthly: price(net) }).collect()
    };
    Pricing {
        currency: "EUR".to_owned(),
        vat_rate: "19.00".to_owned(),
        image: PricePerGbMonth { price_per_gb_month: price(0.011) },
        floating_ip: MonthlyPrice { price_monthly: price(3.0) },
        floating_ips: vec![
            FloatingIpTypePricing { kind: "ipv4".to_owned(), prices: floating(3.0) },
            FloatingIpTypePricing { kind: "ipv6".to_owned(), prices: floating(3.0) },
        ],
        primary_ips: vec![
            PrimaryIpTypePricing { kind: "ipv4".to_owned(), prices: per_location(0.5) },
            PrimaryIpTypePricing { kind: "ipv6".to_owned(), prices: per_location(0.0) },
        ],
        server_backup: ServerBackupPricing { percentage: "20.00".to_owned() },
        server_types: server_types
            .iter()
            .map(|t| TypePricing { id: t.id, name: t.name.clone(), prices: t.prices.clone() })
            .collect(),
        load_balancer_types: load_balancer_types
            .iter()
            .map(|t| TypePricing { id: t.id, name: t.name.clone(), prices: t.prices.clone() })
            .collect(),
        volume: PricePerGbMonth { price_per_gb_month: price(0.044) },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lookups() {
        let c = catalog();
        assert_eq!(c.location(&"fsn1".into()).map(|l| l.id), Some(1));
        assert_eq!(c.location(&IdOrName::Id(6)).map(|l| l.name.as_str()), Some("sin"));
        assert_eq!(c.server_type(&"cpx11".into()).map(|t| t.cores), Some(2));
        assert_eq!(c.load_balancer_type(&"lb21".into()).map(|t| t.max_targets), Some(75));
        let img = c.image(&"ubuntu-24.04".into(), Architecture::Arm);
        assert_eq!(img.map(|i| i.architecture), Some(Architecture::Arm));
        assert!(c.image(&"nope".into(), Architecture::X86).is_none());
    }
}
