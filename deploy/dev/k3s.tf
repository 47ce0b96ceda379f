# k3s through k3sup (run locally; needs `k3sup` on PATH). The cluster runs without k3s's own
# cloud controller, with kubelets waiting for an external one, and without flannel, servicelb
# (the CCM provides Load Balancers), traefik and local-storage. --node-ip is the private IP, so
# the node's InternalIP is in the network and the routes controller can use it as gateway.

locals {
  k3s_server_args = join(" ", [
    "--disable-cloud-controller",
    "--kubelet-arg cloud-provider=external",
    "--cluster-cidr ${local.cluster_cidr}",
    "--flannel-backend=none",
    "--disable-network-policy",
    "--disable=traefik",
    "--disable=servicelb",
    "--disable=local-storage",
    "--node-ip ${hcloud_server_network.control.ip}",
    "--node-external-ip ${hcloud_server.control.ipv4_address}",
  ])
}

resource "null_resource" "k3sup_control" {
  triggers = {
    id = hcloud_server.control.id
    # Waits for the network attachment.
    ip = hcloud_server_network.control.ip
  }

  provisioner "local-exec" {
    command = <<-EOT
      k3sup install --print-config=false \
        --ssh-key "${local_sensitive_file.ssh.filename}" \
        --ip "${hcloud_server.control.ipv4_address}" \
        --k3s-channel "${var.k3s_channel}" \
        --k3s-extra-args "${local.k3s_server_args}" \
        --local-path "${local.kubeconfig_path}"
    EOT
  }
}

resource "null_resource" "k3sup_worker" {
  count = var.worker_count

  triggers = {
    id         = hcloud_server.worker[count.index].id
    ip         = hcloud_server_network.worker[count.index].ip
    control_id = null_resource.k3sup_control.id
  }

  # (The tutorial used `self.ipv4_address`, which a null_resource does not have, and ended the
  # command with a dangling backslash.)
  provisioner "local-exec" {
    command = <<-EOT
      k3sup join \
        --ssh-key "${local_sensitive_file.ssh.filename}" \
        --ip "${hcloud_server.worker[count.index].ipv4_address}" \
        --server-ip "${hcloud_server.control.ipv4_address}" \
        --k3s-channel "${var.k3s_channel}" \
        --k3s-extra-args "--kubelet-arg cloud-provider=external --node-ip ${hcloud_server_network.worker[count.index].ip} --node-external-ip ${hcloud_server.worker[count.index].ipv4_address}"
    EOT
  }
}
