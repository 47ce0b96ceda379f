variable "hcloud_token" {
  description = "Hetzner Cloud API token (read/write) of the project the dev cluster lives in. Put it in credentials.auto.tfvars (git-ignored) or TF_VAR_hcloud_token."
  type        = string
  sensitive   = true
}

variable "name" {
  description = "Prefix of every resource's name (servers, network, SSH key)."
  type        = string
  default     = "hcloud-ccm-dev"
}

variable "worker_count" {
  description = "Number of worker servers besides the control plane."
  type        = number
  default     = 1

  validation {
    condition     = var.worker_count >= 0 && var.worker_count <= 10
    error_message = "worker_count must be between 0 and 10."
  }
}

variable "location" {
  description = "Location of the servers (fsn1, nbg1, hel1, ...). Its network zone must be network_zone."
  type        = string
  default     = "fsn1"
}

variable "network_zone" {
  description = "Network zone of the cloud subnet; must contain location (eu-central for fsn1/nbg1/hel1)."
  type        = string
  default     = "eu-central"
}

variable "server_type" {
  description = "Server type of every node (check `hcloud server-type list` for what is available in location)."
  type        = string
  default     = "cpx22"
}

variable "image" {
  description = "OS image of every node."
  type        = string
  default     = "ubuntu-24.04"
}

variable "k3s_channel" {
  description = "k3s release channel (a Kubernetes minor the CCM supports)."
  type        = string
  default     = "v1.33"
}

variable "cilium_version" {
  description = "Cilium Helm chart version."
  type        = string
  default     = "1.17.6"
}
