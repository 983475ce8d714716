//! Names of KubeStellar's mailbox workspaces and of what the hub keeps in
//! them: the hub's mailbox, placement and upsync-role controllers write
//! them, and the `ferry` commands (syncer-gen, `ws tree`, the quickstart and
//! benches) find mailboxes and placed objects by them.

/// Annotation on a mailbox workspace: the uid of the SyncTarget it serves.
pub const SYNC_TARGET_UID_ANNOTATION: &str = "edge.kubestellar.io/sync-target-uid";
/// Annotation on a mailbox workspace: the logical cluster of the inventory
/// workspace holding its SyncTarget.
pub const INVENTORY_CLUSTER_ANNOTATION: &str = "edge.kubestellar.io/inventory-cluster";

/// The mailbox workspace's name, `<inventory-workspace-cluster>-mb-<synctarget-uid>`.
pub fn mailbox_name(inventory_cluster: &str, sync_target_uid: &str) -> String {
    format!("{inventory_cluster}-mb-{sync_target_uid}")
}

/// Label on everything the placement translator put in a mailbox (value `true`).
pub const PLACED_LABEL: &str = "ferry.dev/placed";

/// The ClusterRole the hub keeps in each workspace with SyncerConfigs: what a
/// syncer may write there to upsync.
pub const UPSYNC_ROLE: &str = "kubestellar-syncer-upsync";

#[cfg(test)]
mod tests {
    #[test]
    fn a_mailbox_is_named_after_its_inventory_cluster_and_sync_target() {
        assert_eq!(super::mailbox_name("2abc", "u-1"), "2abc-mb-u-1");
    }
}
