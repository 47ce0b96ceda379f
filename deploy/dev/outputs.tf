output "kubeconfig" {
  description = "Path of the dev cluster's kubeconfig (export KUBECONFIG=...)."
  value       = abspath(local.kubeconfig_path)
}

output "ssh" {
  description = "SSH into the control-plane server."
  value       = "ssh -i ${abspath(local.ssh_key_path)} root@${hcloud_server.control.ipv4_address}"
}

output "network_id" {
  description = "ID of the private network (also in the `hcloud` Secret)."
  value       = hcloud_network.cluster.id
}

output "cluster_cidr" {
  description = "Pod CIDR: the chart's networking.clusterCIDR."
  value       = local.cluster_cidr
}
