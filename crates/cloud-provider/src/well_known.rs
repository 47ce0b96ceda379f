//! Well-known taints, labels, annotations and finalizers (upstream `api/well_known_*.go`).

/// Taint kubelets started with `--cloud-provider=external` carry until the cloud-node
/// controller initialized the node.
pub const TAINT_EXTERNAL_CLOUD_PROVIDER: &str = "node.cloudprovider.kubernetes.io/uninitialized";

/// Taint the node-lifecycle controller puts on nodes whose instance is shut down.
pub const TAINT_NODE_SHUTDOWN: &str = "node.cloudprovider.kubernetes.io/shutdown";

/// Node annotation with the IP(s) the kubelet was started with (`--node-ip`).
pub const ANNOTATION_PROVIDED_NODE_IP: &str = "alpha.kubernetes.io/provided-node-ip";

/// Finalizer the service controller puts on LoadBalancer services.
pub const FINALIZER_LOAD_BALANCER_CLEANUP: &str = "service.kubernetes.io/load-balancer-cleanup";

/// GA instance-type label.
pub const LABEL_INSTANCE_TYPE: &str = "node.kubernetes.io/instance-type";
/// Deprecated (beta) instance-type label.
pub const LABEL_INSTANCE_TYPE_BETA: &str = "beta.kubernetes.io/instance-type";
/// GA zone label.
pub const LABEL_ZONE: &str = "topology.kubernetes.io/zone";
/// Deprecated (beta) zone label.
pub const LABEL_ZONE_BETA: &str = "failure-domain.beta.kubernetes.io/zone";
/// GA region label.
pub const LABEL_REGION: &str = "topology.kubernetes.io/region";
/// Deprecated (beta) region label.
pub const LABEL_REGION_BETA: &str = "failure-domain.beta.kubernetes.io/region";

/// Label that excludes a node from load balancer backends.
pub const LABEL_EXCLUDE_FROM_EXTERNAL_LB: &str = "node.kubernetes.io/exclude-from-external-load-balancers";

/// Taint the cluster autoscaler puts on nodes it is about to remove.
pub const TAINT_TO_BE_DELETED_BY_CLUSTER_AUTOSCALER: &str = "ToBeDeletedByClusterAutoscaler";
