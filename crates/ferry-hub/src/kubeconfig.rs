//! Kubeconfig files the hub writes (admin.kubeconfig).
