//! Controller names, aliases and the `--controllers` selection (upstream `names/` and
//! controller-manager's `IsControllerEnabled`).

use std::collections::BTreeSet;

/// `cloud-node-controller`.
pub const CLOUD_NODE: &str = cloud_controllers::node::CONTROLLER_NAME;
/// `cloud-node-lifecycle-controller`.
pub const CLOUD_NODE_LIFECYCLE: &str = cloud_controllers::lifecycle::CONTROLLER_NAME;
/// `service-lb-controller`.
pub const SERVICE_LB: &str = cloud_controllers::service::CONTROLLER_NAME;
/// `node-route-controller`.
pub const NODE_ROUTE: &str = cloud_controllers::route::CONTROLLER_NAME;
/// `node-ipam-controller`.
pub const NODE_IPAM: &str = cloud_controllers::ipam::CONTROLLER_NAME;

/// Every controller, in start order.
pub const ALL: [&str; 5] = [CLOUD_NODE, NODE_IPAM, CLOUD_NODE_LIFECYCLE, SERVICE_LB, NODE_ROUTE];

/// Controllers `*` does not enable (upstream `ControllersDisabledByDefault`): node IPAM is
/// usually kube-controller-manager's, and two allocators must never run at once.
pub const DISABLED_BY_DEFAULT: [&str; 1] = [NODE_IPAM];

/// Upstream's aliases (`nodeipam` is kube-controller-manager's).
pub const ALIASES: [(&str, &str); 5] = [
    ("cloud-node", CLOUD_NODE),
    ("service", SERVICE_LB),
    ("route", NODE_ROUTE),
    ("cloud-node-lifecycle", CLOUD_NODE_LIFECYCLE),
    ("nodeipam", NODE_IPAM),
];

/// Resolves aliases in a `--controllers` list (keeping `-` prefixes and `*`) and rejects
/// unknown names.
pub fn resolve(list: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut unknown = Vec::new();
    for item in list.iter().map(|s| s.trim()).filter(|s| !s.is_empty()) {
        if item == "*" {
            out.push(item.to_owned());
            continue;
        }
        let (prefix, name) = match item.strip_prefix('-') {
            Some(rest) => ("-", rest),
            None => ("", item),
        };
        let canonical = ALIASES.iter().find(|(a, _)| *a == name).map(|(_, c)| *c).unwrap_or(name);
        if ALL.contains(&canonical) {
            out.push(format!("{prefix}{canonical}"));
        } else {
            unknown.push(item.to_owned());
        }
    }
    if unknown.is_empty() {
        Ok(out)
    } else {
        Err(format!(
            "--controllers: unknown controller(s) {}; known: {} (aliases: {}), '*' for all, '-name' to disable",
            unknown.join(", "),
            ALL.join(", "),
            ALIASES.iter().map(|(a, _)| *a).collect::<Vec<_>>().join(", ")
        ))
    }
}

/// Upstream `IsControllerEnabled` over a resolved list: named ⇒ on, `-named` ⇒ off,
/// otherwise on iff `*` is present and the controller is not [`DISABLED_BY_DEFAULT`].
pub fn is_enabled(resolved: &[String], name: &str) -> bool {
    if resolved.iter().any(|c| c == name) {
        return true;
    }
    if resolved.iter().any(|c| c.strip_prefix('-') == Some(name)) {
        return false;
    }
    resolved.iter().any(|c| c == "*") && !DISABLED_BY_DEFAULT.contains(&name)
}

/// The controllers a `--controllers` list enables, resolved once: aliases expanded, unknown
/// names refused, then upstream's `IsControllerEnabled` ([`is_enabled`]) applied to each known
/// controller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ControllerSet(BTreeSet<&'static str>);

impl ControllerSet {
    /// Every controller `*` enables (`--controllers=*`, the default): all but
    /// [`DISABLED_BY_DEFAULT`].
    pub fn all() -> Self {
        ControllerSet(ALL.into_iter().filter(|c| !DISABLED_BY_DEFAULT.contains(c)).collect())
    }

    /// The set a `--controllers` list selects; an error names the unknown entries and what is
    /// accepted.
    pub fn from_flag(list: &[String]) -> Result<Self, String> {
        let resolved = resolve(list)?;
        Ok(ControllerSet(ALL.into_iter().filter(|name| is_enabled(&resolved, name)).collect()))
    }

    /// Whether controller `name` (a canonical name such as [`SERVICE_LB`]) is enabled.
    pub fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(v: &[&str]) -> Vec<String> {
        v.iter().map(|x| x.to_string()).collect()
    }

    /// Upstream `TestCloudControllerManagerAliases`, with this project's controller names.
    #[test]
    fn test_cloud_controller_manager_aliases() {
        let resolved = resolve(&s(&["service-lb-controller", "-service", "route", "-cloud-node-lifecycle-controller"]))
            .expect("valid");
        assert_eq!(
            resolved,
            s(&[
                "service-lb-controller",
                "-service-lb-controller",
                "node-route-controller",
                "-cloud-node-lifecycle-controller"
            ])
        );
    }

    /// Upstream `TestCloudControllerNamesConsistency`: names match `^[a-z]([-a-z]*[a-z])?$`
    /// and end in `-controller`.
    #[test]
    fn test_cloud_controller_names_consistency() {
        for name in ALL {
            assert!(name.ends_with("-controller"), "{name}");
            let bytes = name.as_bytes();
            assert!(
                bytes.first().is_some_and(u8::is_ascii_lowercase) && bytes.last().is_some_and(u8::is_ascii_lowercase)
            );
            assert!(name.chars().all(|c| c.is_ascii_lowercase() || c == '-'), "{name}");
        }
    }

    /// Upstream `TestCloudControllerNamesDeclaration`: every alias points at a declared name.
    #[test]
    fn test_cloud_controller_names_declaration() {
        for (alias, name) in ALIASES {
            assert!(ALL.contains(&name), "{alias} -> {name}");
        }
    }

    #[test]
    fn enablement() {
        let all = resolve(&s(&["*"])).expect("valid");
        assert!(ALL.iter().all(|c| is_enabled(&all, c) != DISABLED_BY_DEFAULT.contains(c)));
        // Node IPAM runs only when named (its alias is kube-controller-manager's).
        let ipam = resolve(&s(&["*", "nodeipam"])).expect("valid");
        assert!(ALL.iter().all(|c| is_enabled(&ipam, c)));
        assert!(!is_enabled(&resolve(&s(&["*", "-nodeipam"])).expect("valid"), NODE_IPAM));
        let some = resolve(&s(&["*", "-route", "-service"])).expect("valid");
        assert!(is_enabled(&some, CLOUD_NODE) && is_enabled(&some, CLOUD_NODE_LIFECYCLE));
        assert!(!is_enabled(&some, NODE_ROUTE) && !is_enabled(&some, SERVICE_LB));
        let only = resolve(&s(&["cloud-node"])).expect("valid");
        assert!(is_enabled(&only, CLOUD_NODE) && !is_enabled(&only, CLOUD_NODE_LIFECYCLE));
        let err = resolve(&s(&["*", "nodes", "-bogus"])).unwrap_err();
        assert!(err.contains("nodes, -bogus") && err.contains("cloud-node-controller"), "{err}");
    }

    #[test]
    fn the_controller_set_is_resolved_once_from_the_flag() {
        let set = |v: &[&str]| ControllerSet::from_flag(&s(v));
        assert_eq!(set(&["*"]), Ok(ControllerSet::all()));
        assert!(ALL.iter().all(|c| ControllerSet::all().contains(c) != DISABLED_BY_DEFAULT.contains(c)));
        // `-name` (or its alias) turns one off; the rest follow `*`.
        let some = set(&["*", "-route", "-service-lb-controller"]).expect("valid");
        assert!(some.contains(CLOUD_NODE) && some.contains(CLOUD_NODE_LIFECYCLE));
        assert!(!some.contains(NODE_ROUTE) && !some.contains(SERVICE_LB));
        // Without `*` only the named ones run; a name wins over its `-name`, as upstream.
        let only = set(&["cloud-node", "service", "-service"]).expect("valid");
        assert_eq!(only, ControllerSet([CLOUD_NODE, SERVICE_LB].into_iter().collect()));
        assert_eq!(set(&[]), Ok(ControllerSet(BTreeSet::new())), "an empty list enables nothing");
        assert!(!set(&["-cloud-node"]).expect("valid").contains(CLOUD_NODE));
        // Aliases are canonical names only: asking by alias finds nothing.
        assert!(!ControllerSet::all().contains("route"));
        let err = set(&["*", "nodes"]).unwrap_err();
        assert!(err.starts_with("--controllers: unknown controller(s) nodes; known: cloud-node-controller"), "{err}");
    }
}
