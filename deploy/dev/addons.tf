# Cilium as CNI in native routing (no tunnel): pod traffic between nodes leaves through the
# private network, which routes each node's pod CIDR to the node because the CCM's routes
# controller created those routes. And the `hcloud` Secret the chart reads.

# The kubeconfig exists only after k3sup ran; providers cannot depend on resources, so this
# data source carries the dependency (the tutorial pointed it at a non-existent resource).
data "local_sensitive_file" "kubeconfig" {
  depends_on = [null_resource.k3sup_control]
  filename   = local.kubeconfig_path
}

provider "helm" {
  kubernetes {
    config_path = data.local_sensitive_file.kubeconfig.filename
  }
}

provider "kubernetes" {
  config_path = data.local_sensitive_file.kubeconfig.filename
}

resource "helm_release" "cilium" {
  name       = "cilium"
  repository = "https://helm.cilium.io"
  chart      = "cilium"
  version    = var.cilium_version
  namespace  = "kube-system"

  # Pod CIDRs come from the Node objects (k3s's node IPAM with --cluster-cidr), the same ones
  # the routes controller routes.
  set {
    name  = "ipam.mode"
    value = "kubernetes"
  }
  set {
    name  = "routingMode"
    value = "native"
  }
  set {
    name  = "ipv4NativeRoutingCIDR"
    value = hcloud_network.cluster.ip_range
  }
  # Hetzner's network is routed (gateway 10.0.0.1), not one L2 segment: no direct node routes.
  set {
    name  = "autoDirectNodeRoutes"
    value = "false"
  }
  # Talk to the API server directly: the Service IP is not reachable before Cilium runs.
  set {
    name  = "k8sServiceHost"
    value = hcloud_server_network.control.ip
  }
  set {
    name  = "k8sServicePort"
    value = "6443"
  }
  # Cilium must run on nodes the CCM has not initialized yet.
  set {
    name  = "operator.replicas"
    value = "1"
  }
}

resource "kubernetes_secret_v1" "hcloud" {
  metadata {
    name      = "hcloud"
    namespace = "kube-system"
  }

  data = {
    token   = var.hcloud_token
    network = tostring(hcloud_network.cluster.id)
  }

  depends_on = [null_resource.k3sup_control]
}
