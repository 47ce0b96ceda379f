terraform {
  required_version = ">= 1.5.0"

  required_providers {
    hcloud = {
      source = "hetznercloud/hcloud"
      # The API no longer returns `datacenter` for servers (since 2026-07-01): use a current
      # provider release and never the `datacenter` argument (the tutorial's 1.42 predates it).
      version = ">= 1.57.0, < 2.0.0"
    }
    tls = {
      source  = "hashicorp/tls"
      version = "~> 4.0"
    }
    local = {
      source  = "hashicorp/local"
      version = "~> 2.5"
    }
    null = {
      source  = "hashicorp/null"
      version = "~> 3.2"
    }
    helm = {
      source  = "hashicorp/helm"
      version = "~> 2.17"
    }
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = "~> 2.35"
    }
  }
}

provider "hcloud" {
  token = var.hcloud_token
}
