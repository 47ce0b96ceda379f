# Hetzner Cloud resources of the dev cluster: an SSH key, the private network and its cloud
# subnet, one control-plane server and var.worker_count workers, all attached to the network.

locals {
  # Pod CIDR: inside the network (10.0.0.0/8), outside the cloud subnet (10.0.0.0/24). The
  # CCM's routes controller creates one route per node's pod CIDR in the network.
  cluster_cidr    = "10.244.0.0/16"
  kubeconfig_path = "${path.module}/kubeconfig.yaml"
  ssh_key_path    = "${path.module}/.dev-env.ssh"
  labels          = { "managed-by" = "hcloud-ccm-dev-env" }
}

# A key pair for this environment only; the private key is written next to this file
# (git-ignored) for k3sup and `ssh -i`.
resource "tls_private_key" "ssh" {
  algorithm = "ED25519"
}

resource "local_sensitive_file" "ssh" {
  content         = tls_private_key.ssh.private_key_openssh
  filename        = local.ssh_key_path
  file_permission = "0600"
}

resource "hcloud_ssh_key" "default" {
  name       = var.name
  public_key = tls_private_key.ssh.public_key_openssh
  labels     = local.labels
}

resource "hcloud_network" "cluster" {
  name     = var.name
  ip_range = "10.0.0.0/8"
  labels   = local.labels
}

resource "hcloud_network_subnet" "cluster" {
  network_id   = hcloud_network.cluster.id
  type         = "cloud"
  network_zone = var.network_zone
  ip_range     = "10.0.0.0/24"
}

resource "hcloud_server" "control" {
  name        = "${var.name}-control"
  server_type = var.server_type
  # `location`, never `datacenter` (removed from the API).
  location = var.location
  image    = var.image
  ssh_keys = [hcloud_ssh_key.default.id]
  labels   = merge(local.labels, { "role" = "control-plane" })

  connection {
    host        = self.ipv4_address
    user        = "root"
    type        = "ssh"
    private_key = tls_private_key.ssh.private_key_openssh
  }

  # The server is fully booted before k3s is installed.
  provisioner "remote-exec" {
    inline = ["cloud-init status --wait || true"]
  }
}

resource "hcloud_server_network" "control" {
  server_id = hcloud_server.control.id
  subnet_id = hcloud_network_subnet.cluster.id
}

resource "hcloud_server" "worker" {
  count = var.worker_count

  name        = "${var.name}-worker-${count.index}"
  server_type = var.server_type
  location    = var.location
  image       = var.image
  ssh_keys    = [hcloud_ssh_key.default.id]
  labels      = merge(local.labels, { "role" = "worker" })

  connection {
    host        = self.ipv4_address
    user        = "root"
    type        = "ssh"
    private_key = tls_private_key.ssh.private_key_openssh
  }

  provisioner "remote-exec" {
    inline = ["cloud-init status --wait || true"]
  }
}

# (The tutorial named this resource "control" a second time and used `each.id`.)
resource "hcloud_server_network" "worker" {
  count = var.worker_count

  server_id = hcloud_server.worker[count.index].id
  subnet_id = hcloud_network_subnet.cluster.id
}
