//! Pods and everything a PodTemplateSpec embeds: PodSpec, containers,
//! volumes, probes, security contexts, scheduling constraints.
//!
//! Not converted (dropped if sent): the deprecated in-tree volume plugins
//! (gcePersistentDisk, awsElasticBlockStore, gitRepo, iscsi, glusterfs, rbd,
//! flexVolume, cinder, cephfs, flocker, fc, azureFile, vsphereVolume,
//! quobyte, azureDisk, photonPersistentDisk, portworxVolume, scaleIO,
//! storageos), `ephemeral` volumes, the `podCertificate` projection,
//! `fileKeyRef` env sources, `spec.workloadRef`, and Pod status.

use k8s_pb::api::core::v1::{
    Affinity, AppArmorProfile, CSIVolumeSource, Capabilities, ClusterTrustBundleProjection,
    ConfigMapEnvSource, ConfigMapKeySelector, ConfigMapProjection, ConfigMapVolumeSource, Container,
    ContainerPort, ContainerResizePolicy, ContainerRestartRule, ContainerRestartRuleOnExitCodes,
    DownwardAPIProjection, DownwardAPIVolumeFile, DownwardAPIVolumeSource, EmptyDirVolumeSource,
    EnvFromSource, EnvVar, EnvVarSource, EphemeralContainer, ExecAction, GrpcAction, HostAlias,
    HostPathVolumeSource, HttpGetAction, HttpHeader, ImageVolumeSource, KeyToPath, Lifecycle,
    LifecycleHandler, LocalObjectReference, NfsVolumeSource, NodeAffinity, NodeSelector,
    NodeSelectorRequirement, NodeSelectorTerm, ObjectFieldSelector, PersistentVolumeClaimVolumeSource, Pod,
    PodAffinity, PodAffinityTerm, PodAntiAffinity, PodDnsConfig, PodDnsConfigOption, PodOs, PodReadinessGate,
    PodResourceClaim, PodSchedulingGate, PodSecurityContext, PodSpec, PodTemplateSpec,
    PreferredSchedulingTerm, Probe, ProbeHandler, ProjectedVolumeSource, ResourceClaim,
    ResourceFieldSelector, ResourceRequirements, SeLinuxOptions, SeccompProfile, SecretEnvSource,
    SecretKeySelector, SecretProjection, SecretVolumeSource, SecurityContext, ServiceAccountTokenProjection,
    SleepAction, Sysctl, TcpSocketAction, Toleration, TopologySpreadConstraint, Volume, VolumeDevice,
    VolumeMount, VolumeProjection, VolumeSource, WeightedPodAffinityTerm, WindowsSecurityContextOptions,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::{label_selector, object_meta};

pub(super) fn pod(p: &Pod) -> Value {
    Fields::new()
        .message("metadata", &p.metadata, object_meta)
        .message("spec", &p.spec, pod_spec)
        .build()
}

pub(super) fn pod_template_spec(t: &PodTemplateSpec) -> Value {
    Fields::new()
        .message("metadata", &t.metadata, object_meta)
        .message("spec", &t.spec, pod_spec)
        .build()
}

fn pod_spec(s: &PodSpec) -> Value {
    Fields::new()
        .messages("volumes", &s.volumes, volume)
        .messages("initContainers", &s.init_containers, container)
        .messages("containers", &s.containers, container)
        .messages(
            "ephemeralContainers",
            &s.ephemeral_containers,
            ephemeral_container,
        )
        .str("restartPolicy", &s.restart_policy)
        .opt(
            "terminationGracePeriodSeconds",
            s.termination_grace_period_seconds,
        )
        .opt("activeDeadlineSeconds", s.active_deadline_seconds)
        .str("dnsPolicy", &s.dns_policy)
        .string_map("nodeSelector", &s.node_selector)
        .str("serviceAccountName", &s.service_account_name)
        .str("serviceAccount", &s.service_account)
        .opt("automountServiceAccountToken", s.automount_service_account_token)
        .str("nodeName", &s.node_name)
        .nonzero("hostNetwork", s.host_network)
        .nonzero("hostPID", s.host_pid)
        .nonzero("hostIPC", s.host_ipc)
        .opt("shareProcessNamespace", s.share_process_namespace)
        .message("securityContext", &s.security_context, pod_security_context)
        .messages("imagePullSecrets", &s.image_pull_secrets, local_object_reference)
        .str("hostname", &s.hostname)
        .str("subdomain", &s.subdomain)
        .message("affinity", &s.affinity, affinity)
        .str("schedulerName", &s.scheduler_name)
        .messages("tolerations", &s.tolerations, toleration)
        .messages("hostAliases", &s.host_aliases, host_alias)
        .str("priorityClassName", &s.priority_class_name)
        .opt("priority", s.priority)
        .message("dnsConfig", &s.dns_config, pod_dns_config)
        .messages("readinessGates", &s.readiness_gates, pod_readiness_gate)
        .str("runtimeClassName", &s.runtime_class_name)
        .opt("enableServiceLinks", s.enable_service_links)
        .str("preemptionPolicy", &s.preemption_policy)
        .quantities("overhead", &s.overhead)
        .messages(
            "topologySpreadConstraints",
            &s.topology_spread_constraints,
            topology_spread_constraint,
        )
        .opt("setHostnameAsFQDN", s.set_hostname_as_fqdn)
        .message("os", &s.os, pod_os)
        .opt("hostUsers", s.host_users)
        .messages("schedulingGates", &s.scheduling_gates, pod_scheduling_gate)
        .messages("resourceClaims", &s.resource_claims, pod_resource_claim)
        .message("resources", &s.resources, resource_requirements)
        .str("hostnameOverride", &s.hostname_override)
        .build()
}

/// `Container` and `EphemeralContainerCommon` are distinct messages with the
/// same fields.
macro_rules! container_fields {
    ($c:expr) => {
        Fields::new()
            .str("name", &$c.name)
            .str("image", &$c.image)
            .list("command", &$c.command)
            .list("args", &$c.args)
            .str("workingDir", &$c.working_dir)
            .messages("ports", &$c.ports, container_port)
            .messages("envFrom", &$c.env_from, env_from_source)
            .messages("env", &$c.env, env_var)
            .message("resources", &$c.resources, resource_requirements)
            .messages("resizePolicy", &$c.resize_policy, container_resize_policy)
            .str("restartPolicy", &$c.restart_policy)
            .messages(
                "restartPolicyRules",
                &$c.restart_policy_rules,
                container_restart_rule,
            )
            .messages("volumeMounts", &$c.volume_mounts, volume_mount)
            .messages("volumeDevices", &$c.volume_devices, volume_device)
            .message("livenessProbe", &$c.liveness_probe, probe)
            .message("readinessProbe", &$c.readiness_probe, probe)
            .message("startupProbe", &$c.startup_probe, probe)
            .message("lifecycle", &$c.lifecycle, lifecycle)
            .str("terminationMessagePath", &$c.termination_message_path)
            .str("terminationMessagePolicy", &$c.termination_message_policy)
            .str("imagePullPolicy", &$c.image_pull_policy)
            .message("securityContext", &$c.security_context, security_context)
            .nonzero("stdin", $c.stdin)
            .nonzero("stdinOnce", $c.stdin_once)
            .nonzero("tty", $c.tty)
    };
}

fn container(c: &Container) -> Value {
    container_fields!(c).build()
}

fn ephemeral_container(c: &EphemeralContainer) -> Value {
    let common = c
        .ephemeral_container_common
        .as_ref()
        .map(|common| container_fields!(common).build());
    Fields::new()
        .inline(&common, Value::clone)
        .str("targetContainerName", &c.target_container_name)
        .build()
}

fn container_port(p: &ContainerPort) -> Value {
    Fields::new()
        .str("name", &p.name)
        .nonzero("hostPort", p.host_port)
        .opt("containerPort", p.container_port)
        .str("protocol", &p.protocol)
        .str("hostIP", &p.host_ip)
        .build()
}

fn env_var(e: &EnvVar) -> Value {
    Fields::new()
        .str("name", &e.name)
        .str("value", &e.value)
        .message("valueFrom", &e.value_from, env_var_source)
        .build()
}

fn env_var_source(s: &EnvVarSource) -> Value {
    Fields::new()
        .message("fieldRef", &s.field_ref, object_field_selector)
        .message("resourceFieldRef", &s.resource_field_ref, resource_field_selector)
        .message("configMapKeyRef", &s.config_map_key_ref, config_map_key_selector)
        .message("secretKeyRef", &s.secret_key_ref, secret_key_selector)
        .build()
}

fn object_field_selector(s: &ObjectFieldSelector) -> Value {
    Fields::new()
        .str("apiVersion", &s.api_version)
        .str("fieldPath", &s.field_path)
        .build()
}

fn resource_field_selector(s: &ResourceFieldSelector) -> Value {
    Fields::new()
        .str("containerName", &s.container_name)
        .str("resource", &s.resource)
        .quantity("divisor", &s.divisor)
        .build()
}

fn config_map_key_selector(s: &ConfigMapKeySelector) -> Value {
    Fields::new()
        .inline(&s.local_object_reference, local_object_reference)
        .str("key", &s.key)
        .opt("optional", s.optional)
        .build()
}

fn secret_key_selector(s: &SecretKeySelector) -> Value {
    Fields::new()
        .inline(&s.local_object_reference, local_object_reference)
        .str("key", &s.key)
        .opt("optional", s.optional)
        .build()
}

fn env_from_source(s: &EnvFromSource) -> Value {
    Fields::new()
        .str("prefix", &s.prefix)
        .message("configMapRef", &s.config_map_ref, config_map_env_source)
        .message("secretRef", &s.secret_ref, secret_env_source)
        .build()
}

fn config_map_env_source(s: &ConfigMapEnvSource) -> Value {
    Fields::new()
        .inline(&s.local_object_reference, local_object_reference)
        .opt("optional", s.optional)
        .build()
}

fn secret_env_source(s: &SecretEnvSource) -> Value {
    Fields::new()
        .inline(&s.local_object_reference, local_object_reference)
        .opt("optional", s.optional)
        .build()
}

pub(super) fn local_object_reference(r: &LocalObjectReference) -> Value {
    Fields::new().str("name", &r.name).build()
}

pub(super) fn resource_requirements(r: &ResourceRequirements) -> Value {
    Fields::new()
        .quantities("limits", &r.limits)
        .quantities("requests", &r.requests)
        .messages("claims", &r.claims, resource_claim)
        .build()
}

fn resource_claim(c: &ResourceClaim) -> Value {
    Fields::new()
        .str("name", &c.name)
        .str("request", &c.request)
        .build()
}

fn container_resize_policy(p: &ContainerResizePolicy) -> Value {
    Fields::new()
        .str("resourceName", &p.resource_name)
        .str("restartPolicy", &p.restart_policy)
        .build()
}

fn container_restart_rule(r: &ContainerRestartRule) -> Value {
    Fields::new()
        .str("action", &r.action)
        .message("exitCodes", &r.exit_codes, container_restart_rule_on_exit_codes)
        .build()
}

fn container_restart_rule_on_exit_codes(e: &ContainerRestartRuleOnExitCodes) -> Value {
    Fields::new()
        .str("operator", &e.operator)
        .list("values", &e.values)
        .build()
}

fn volume_mount(m: &VolumeMount) -> Value {
    Fields::new()
        .str("name", &m.name)
        .nonzero("readOnly", m.read_only)
        .str("recursiveReadOnly", &m.recursive_read_only)
        .str("mountPath", &m.mount_path)
        .str("subPath", &m.sub_path)
        .str("mountPropagation", &m.mount_propagation)
        .str("subPathExpr", &m.sub_path_expr)
        .build()
}

fn volume_device(d: &VolumeDevice) -> Value {
    Fields::new()
        .str("name", &d.name)
        .str("devicePath", &d.device_path)
        .build()
}

fn probe(p: &Probe) -> Value {
    Fields::new()
        .inline(&p.handler, probe_handler)
        .nonzero("initialDelaySeconds", p.initial_delay_seconds)
        .nonzero("timeoutSeconds", p.timeout_seconds)
        .nonzero("periodSeconds", p.period_seconds)
        .nonzero("successThreshold", p.success_threshold)
        .nonzero("failureThreshold", p.failure_threshold)
        .opt(
            "terminationGracePeriodSeconds",
            p.termination_grace_period_seconds,
        )
        .build()
}

fn probe_handler(h: &ProbeHandler) -> Value {
    Fields::new()
        .message("exec", &h.exec, exec_action)
        .message("httpGet", &h.http_get, http_get_action)
        .message("tcpSocket", &h.tcp_socket, tcp_socket_action)
        .message("grpc", &h.grpc, grpc_action)
        .build()
}

fn lifecycle(l: &Lifecycle) -> Value {
    Fields::new()
        .message("postStart", &l.post_start, lifecycle_handler)
        .message("preStop", &l.pre_stop, lifecycle_handler)
        .str("stopSignal", &l.stop_signal)
        .build()
}

fn lifecycle_handler(h: &LifecycleHandler) -> Value {
    Fields::new()
        .message("exec", &h.exec, exec_action)
        .message("httpGet", &h.http_get, http_get_action)
        .message("tcpSocket", &h.tcp_socket, tcp_socket_action)
        .message("sleep", &h.sleep, sleep_action)
        .build()
}

fn exec_action(a: &ExecAction) -> Value {
    Fields::new().list("command", &a.command).build()
}

fn http_get_action(a: &HttpGetAction) -> Value {
    Fields::new()
        .str("path", &a.path)
        .int_or_string("port", &a.port)
        .str("host", &a.host)
        .str("scheme", &a.scheme)
        .messages("httpHeaders", &a.http_headers, http_header)
        .build()
}

fn http_header(h: &HttpHeader) -> Value {
    // `value` is required and may legitimately be empty.
    Fields::new()
        .str("name", &h.name)
        .opt("value", h.value.clone())
        .build()
}

fn tcp_socket_action(a: &TcpSocketAction) -> Value {
    Fields::new()
        .int_or_string("port", &a.port)
        .str("host", &a.host)
        .build()
}

fn grpc_action(a: &GrpcAction) -> Value {
    Fields::new()
        .opt("port", a.port)
        .str("service", &a.service)
        .build()
}

fn sleep_action(a: &SleepAction) -> Value {
    Fields::new().opt("seconds", a.seconds).build()
}

fn security_context(s: &SecurityContext) -> Value {
    Fields::new()
        .message("capabilities", &s.capabilities, capabilities)
        .opt("privileged", s.privileged)
        .message("seLinuxOptions", &s.se_linux_options, se_linux_options)
        .message(
            "windowsOptions",
            &s.windows_options,
            windows_security_context_options,
        )
        .opt("runAsUser", s.run_as_user)
        .opt("runAsGroup", s.run_as_group)
        .opt("runAsNonRoot", s.run_as_non_root)
        .opt("readOnlyRootFilesystem", s.read_only_root_filesystem)
        .opt("allowPrivilegeEscalation", s.allow_privilege_escalation)
        .str("procMount", &s.proc_mount)
        .message("seccompProfile", &s.seccomp_profile, seccomp_profile)
        .message("appArmorProfile", &s.app_armor_profile, app_armor_profile)
        .build()
}

fn pod_security_context(s: &PodSecurityContext) -> Value {
    Fields::new()
        .message("seLinuxOptions", &s.se_linux_options, se_linux_options)
        .message(
            "windowsOptions",
            &s.windows_options,
            windows_security_context_options,
        )
        .opt("runAsUser", s.run_as_user)
        .opt("runAsGroup", s.run_as_group)
        .opt("runAsNonRoot", s.run_as_non_root)
        .list("supplementalGroups", &s.supplemental_groups)
        .str("supplementalGroupsPolicy", &s.supplemental_groups_policy)
        .opt("fsGroup", s.fs_group)
        .messages("sysctls", &s.sysctls, sysctl)
        .str("fsGroupChangePolicy", &s.fs_group_change_policy)
        .message("seccompProfile", &s.seccomp_profile, seccomp_profile)
        .message("appArmorProfile", &s.app_armor_profile, app_armor_profile)
        .str("seLinuxChangePolicy", &s.se_linux_change_policy)
        .build()
}

fn capabilities(c: &Capabilities) -> Value {
    Fields::new().list("add", &c.add).list("drop", &c.drop).build()
}

fn se_linux_options(o: &SeLinuxOptions) -> Value {
    Fields::new()
        .str("user", &o.user)
        .str("role", &o.role)
        .str("type", &o.r#type)
        .str("level", &o.level)
        .build()
}

fn windows_security_context_options(o: &WindowsSecurityContextOptions) -> Value {
    Fields::new()
        .str("gmsaCredentialSpecName", &o.gmsa_credential_spec_name)
        .str("gmsaCredentialSpec", &o.gmsa_credential_spec)
        .str("runAsUserName", &o.run_as_user_name)
        .opt("hostProcess", o.host_process)
        .build()
}

fn seccomp_profile(p: &SeccompProfile) -> Value {
    Fields::new()
        .str("type", &p.r#type)
        .str("localhostProfile", &p.localhost_profile)
        .build()
}

fn app_armor_profile(p: &AppArmorProfile) -> Value {
    Fields::new()
        .str("type", &p.r#type)
        .str("localhostProfile", &p.localhost_profile)
        .build()
}

fn sysctl(s: &Sysctl) -> Value {
    Fields::new()
        .str("name", &s.name)
        .opt("value", s.value.clone())
        .build()
}

fn volume(v: &Volume) -> Value {
    Fields::new()
        .str("name", &v.name)
        .inline(&v.volume_source, volume_source)
        .build()
}

fn volume_source(s: &VolumeSource) -> Value {
    Fields::new()
        .message("hostPath", &s.host_path, host_path_volume_source)
        .message("emptyDir", &s.empty_dir, empty_dir_volume_source)
        .message("secret", &s.secret, secret_volume_source)
        .message("nfs", &s.nfs, nfs_volume_source)
        .message(
            "persistentVolumeClaim",
            &s.persistent_volume_claim,
            persistent_volume_claim_volume_source,
        )
        .message("downwardAPI", &s.downward_api, downward_api_volume_source)
        .message("configMap", &s.config_map, config_map_volume_source)
        .message("projected", &s.projected, projected_volume_source)
        .message("csi", &s.csi, csi_volume_source)
        .message("image", &s.image, image_volume_source)
        .build()
}

fn host_path_volume_source(s: &HostPathVolumeSource) -> Value {
    Fields::new().str("path", &s.path).str("type", &s.r#type).build()
}

fn empty_dir_volume_source(s: &EmptyDirVolumeSource) -> Value {
    Fields::new()
        .str("medium", &s.medium)
        .quantity("sizeLimit", &s.size_limit)
        .build()
}

fn secret_volume_source(s: &SecretVolumeSource) -> Value {
    Fields::new()
        .str("secretName", &s.secret_name)
        .messages("items", &s.items, key_to_path)
        .opt("defaultMode", s.default_mode)
        .opt("optional", s.optional)
        .build()
}

fn nfs_volume_source(s: &NfsVolumeSource) -> Value {
    Fields::new()
        .str("server", &s.server)
        .str("path", &s.path)
        .nonzero("readOnly", s.read_only)
        .build()
}

fn persistent_volume_claim_volume_source(s: &PersistentVolumeClaimVolumeSource) -> Value {
    Fields::new()
        .str("claimName", &s.claim_name)
        .nonzero("readOnly", s.read_only)
        .build()
}

fn downward_api_volume_source(s: &DownwardAPIVolumeSource) -> Value {
    Fields::new()
        .messages("items", &s.items, downward_api_volume_file)
        .opt("defaultMode", s.default_mode)
        .build()
}

fn downward_api_volume_file(f: &DownwardAPIVolumeFile) -> Value {
    Fields::new()
        .str("path", &f.path)
        .message("fieldRef", &f.field_ref, object_field_selector)
        .message("resourceFieldRef", &f.resource_field_ref, resource_field_selector)
        .opt("mode", f.mode)
        .build()
}

fn config_map_volume_source(s: &ConfigMapVolumeSource) -> Value {
    Fields::new()
        .inline(&s.local_object_reference, local_object_reference)
        .messages("items", &s.items, key_to_path)
        .opt("defaultMode", s.default_mode)
        .opt("optional", s.optional)
        .build()
}

fn key_to_path(k: &KeyToPath) -> Value {
    Fields::new()
        .str("key", &k.key)
        .str("path", &k.path)
        .opt("mode", k.mode)
        .build()
}

fn projected_volume_source(s: &ProjectedVolumeSource) -> Value {
    Fields::new()
        .messages("sources", &s.sources, volume_projection)
        .opt("defaultMode", s.default_mode)
        .build()
}

fn volume_projection(p: &VolumeProjection) -> Value {
    Fields::new()
        .message("secret", &p.secret, secret_projection)
        .message("downwardAPI", &p.downward_api, downward_api_projection)
        .message("configMap", &p.config_map, config_map_projection)
        .message(
            "serviceAccountToken",
            &p.service_account_token,
            service_account_token_projection,
        )
        .message(
            "clusterTrustBundle",
            &p.cluster_trust_bundle,
            cluster_trust_bundle_projection,
        )
        .build()
}

fn secret_projection(p: &SecretProjection) -> Value {
    Fields::new()
        .inline(&p.local_object_reference, local_object_reference)
        .messages("items", &p.items, key_to_path)
        .opt("optional", p.optional)
        .build()
}

fn downward_api_projection(p: &DownwardAPIProjection) -> Value {
    Fields::new()
        .messages("items", &p.items, downward_api_volume_file)
        .build()
}

fn config_map_projection(p: &ConfigMapProjection) -> Value {
    Fields::new()
        .inline(&p.local_object_reference, local_object_reference)
        .messages("items", &p.items, key_to_path)
        .opt("optional", p.optional)
        .build()
}

fn service_account_token_projection(p: &ServiceAccountTokenProjection) -> Value {
    Fields::new()
        .str("audience", &p.audience)
        .opt("expirationSeconds", p.expiration_seconds)
        .str("path", &p.path)
        .build()
}

fn cluster_trust_bundle_projection(p: &ClusterTrustBundleProjection) -> Value {
    Fields::new()
        .str("name", &p.name)
        .str("signerName", &p.signer_name)
        .message("labelSelector", &p.label_selector, label_selector)
        .opt("optional", p.optional)
        .str("path", &p.path)
        .build()
}

fn csi_volume_source(s: &CSIVolumeSource) -> Value {
    Fields::new()
        .str("driver", &s.driver)
        .opt("readOnly", s.read_only)
        .str("fsType", &s.fs_type)
        .string_map("volumeAttributes", &s.volume_attributes)
        .message(
            "nodePublishSecretRef",
            &s.node_publish_secret_ref,
            local_object_reference,
        )
        .build()
}

fn image_volume_source(s: &ImageVolumeSource) -> Value {
    Fields::new()
        .str("reference", &s.reference)
        .str("pullPolicy", &s.pull_policy)
        .build()
}

fn affinity(a: &Affinity) -> Value {
    Fields::new()
        .message("nodeAffinity", &a.node_affinity, node_affinity)
        .message("podAffinity", &a.pod_affinity, pod_affinity)
        .message("podAntiAffinity", &a.pod_anti_affinity, pod_anti_affinity)
        .build()
}

fn node_affinity(a: &NodeAffinity) -> Value {
    Fields::new()
        .message(
            "requiredDuringSchedulingIgnoredDuringExecution",
            &a.required_during_scheduling_ignored_during_execution,
            node_selector,
        )
        .messages(
            "preferredDuringSchedulingIgnoredDuringExecution",
            &a.preferred_during_scheduling_ignored_during_execution,
            preferred_scheduling_term,
        )
        .build()
}

fn node_selector(s: &NodeSelector) -> Value {
    Fields::new()
        .messages("nodeSelectorTerms", &s.node_selector_terms, node_selector_term)
        .build()
}

fn node_selector_term(t: &NodeSelectorTerm) -> Value {
    Fields::new()
        .messages(
            "matchExpressions",
            &t.match_expressions,
            node_selector_requirement,
        )
        .messages("matchFields", &t.match_fields, node_selector_requirement)
        .build()
}

fn node_selector_requirement(r: &NodeSelectorRequirement) -> Value {
    Fields::new()
        .str("key", &r.key)
        .str("operator", &r.operator)
        .list("values", &r.values)
        .build()
}

fn preferred_scheduling_term(t: &PreferredSchedulingTerm) -> Value {
    Fields::new()
        .opt("weight", t.weight)
        .message("preference", &t.preference, node_selector_term)
        .build()
}

fn pod_affinity(a: &PodAffinity) -> Value {
    Fields::new()
        .messages(
            "requiredDuringSchedulingIgnoredDuringExecution",
            &a.required_during_scheduling_ignored_during_execution,
            pod_affinity_term,
        )
        .messages(
            "preferredDuringSchedulingIgnoredDuringExecution",
            &a.preferred_during_scheduling_ignored_during_execution,
            weighted_pod_affinity_term,
        )
        .build()
}

fn pod_anti_affinity(a: &PodAntiAffinity) -> Value {
    Fields::new()
        .messages(
            "requiredDuringSchedulingIgnoredDuringExecution",
            &a.required_during_scheduling_ignored_during_execution,
            pod_affinity_term,
        )
        .messages(
            "preferredDuringSchedulingIgnoredDuringExecution",
            &a.preferred_during_scheduling_ignored_during_execution,
            weighted_pod_affinity_term,
        )
        .build()
}

fn pod_affinity_term(t: &PodAffinityTerm) -> Value {
    Fields::new()
        .message("labelSelector", &t.label_selector, label_selector)
        .list("namespaces", &t.namespaces)
        .str("topologyKey", &t.topology_key)
        .message("namespaceSelector", &t.namespace_selector, label_selector)
        .list("matchLabelKeys", &t.match_label_keys)
        .list("mismatchLabelKeys", &t.mismatch_label_keys)
        .build()
}

fn weighted_pod_affinity_term(t: &WeightedPodAffinityTerm) -> Value {
    Fields::new()
        .opt("weight", t.weight)
        .message("podAffinityTerm", &t.pod_affinity_term, pod_affinity_term)
        .build()
}

fn toleration(t: &Toleration) -> Value {
    Fields::new()
        .str("key", &t.key)
        .str("operator", &t.operator)
        .str("value", &t.value)
        .str("effect", &t.effect)
        .opt("tolerationSeconds", t.toleration_seconds)
        .build()
}

fn host_alias(a: &HostAlias) -> Value {
    Fields::new()
        .str("ip", &a.ip)
        .list("hostnames", &a.hostnames)
        .build()
}

fn pod_dns_config(c: &PodDnsConfig) -> Value {
    Fields::new()
        .list("nameservers", &c.nameservers)
        .list("searches", &c.searches)
        .messages("options", &c.options, pod_dns_config_option)
        .build()
}

fn pod_dns_config_option(o: &PodDnsConfigOption) -> Value {
    Fields::new().str("name", &o.name).str("value", &o.value).build()
}

fn pod_readiness_gate(g: &PodReadinessGate) -> Value {
    Fields::new().str("conditionType", &g.condition_type).build()
}

fn topology_spread_constraint(c: &TopologySpreadConstraint) -> Value {
    Fields::new()
        .opt("maxSkew", c.max_skew)
        .str("topologyKey", &c.topology_key)
        .str("whenUnsatisfiable", &c.when_unsatisfiable)
        .message("labelSelector", &c.label_selector, label_selector)
        .opt("minDomains", c.min_domains)
        .str("nodeAffinityPolicy", &c.node_affinity_policy)
        .str("nodeTaintsPolicy", &c.node_taints_policy)
        .list("matchLabelKeys", &c.match_label_keys)
        .build()
}

fn pod_os(o: &PodOs) -> Value {
    Fields::new().str("name", &o.name).build()
}

fn pod_scheduling_gate(g: &PodSchedulingGate) -> Value {
    Fields::new().str("name", &g.name).build()
}

fn pod_resource_claim(c: &PodResourceClaim) -> Value {
    Fields::new()
        .str("name", &c.name)
        .str("resourceClaimName", &c.resource_claim_name)
        .str("resourceClaimTemplateName", &c.resource_claim_template_name)
        .build()
}
