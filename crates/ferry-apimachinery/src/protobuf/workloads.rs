//! Workload kinds: apps/v1 Deployment, batch/v1 Job and CronJob,
//! autoscaling/v1 HorizontalPodAutoscaler. Status is not converted.

use k8s_pb::api::apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment};
use k8s_pb::api::autoscaling::v1::{
    CrossVersionObjectReference, HorizontalPodAutoscaler, HorizontalPodAutoscalerSpec,
};
use k8s_pb::api::batch::v1::{
    CronJob, CronJobSpec, Job, JobSpec, JobTemplateSpec, PodFailurePolicy,
    PodFailurePolicyOnExitCodesRequirement, PodFailurePolicyOnPodConditionsPattern, PodFailurePolicyRule,
    SuccessPolicy, SuccessPolicyRule,
};
use serde_json::Value;

use super::json::Fields;
use super::meta::{label_selector, object_meta};
use super::pod::pod_template_spec;

pub(super) fn deployment(d: &Deployment) -> Value {
    Fields::new()
        .message("metadata", &d.metadata, object_meta)
        .message("spec", &d.spec, deployment_spec)
        .build()
}

fn deployment_spec(s: &DeploymentSpec) -> Value {
    Fields::new()
        .opt("replicas", s.replicas)
        .message("selector", &s.selector, label_selector)
        .message("template", &s.template, pod_template_spec)
        .message("strategy", &s.strategy, deployment_strategy)
        .nonzero("minReadySeconds", s.min_ready_seconds)
        .opt("revisionHistoryLimit", s.revision_history_limit)
        .nonzero("paused", s.paused)
        .opt("progressDeadlineSeconds", s.progress_deadline_seconds)
        .build()
}

fn deployment_strategy(s: &DeploymentStrategy) -> Value {
    Fields::new()
        .str("type", &s.r#type)
        .message("rollingUpdate", &s.rolling_update, rolling_update_deployment)
        .build()
}

fn rolling_update_deployment(r: &RollingUpdateDeployment) -> Value {
    Fields::new()
        .int_or_string("maxUnavailable", &r.max_unavailable)
        .int_or_string("maxSurge", &r.max_surge)
        .build()
}

pub(super) fn job(j: &Job) -> Value {
    Fields::new()
        .message("metadata", &j.metadata, object_meta)
        .message("spec", &j.spec, job_spec)
        .build()
}

fn job_spec(s: &JobSpec) -> Value {
    Fields::new()
        .opt("parallelism", s.parallelism)
        .opt("completions", s.completions)
        .opt("activeDeadlineSeconds", s.active_deadline_seconds)
        .message("podFailurePolicy", &s.pod_failure_policy, pod_failure_policy)
        .message("successPolicy", &s.success_policy, success_policy)
        .opt("backoffLimit", s.backoff_limit)
        .opt("backoffLimitPerIndex", s.backoff_limit_per_index)
        .opt("maxFailedIndexes", s.max_failed_indexes)
        .message("selector", &s.selector, label_selector)
        .opt("manualSelector", s.manual_selector)
        .message("template", &s.template, pod_template_spec)
        .opt("ttlSecondsAfterFinished", s.ttl_seconds_after_finished)
        .str("completionMode", &s.completion_mode)
        .opt("suspend", s.suspend)
        .str("podReplacementPolicy", &s.pod_replacement_policy)
        .str("managedBy", &s.managed_by)
        .build()
}

fn pod_failure_policy(p: &PodFailurePolicy) -> Value {
    Fields::new()
        .messages("rules", &p.rules, pod_failure_policy_rule)
        .build()
}

fn pod_failure_policy_rule(r: &PodFailurePolicyRule) -> Value {
    Fields::new()
        .str("action", &r.action)
        .message("onExitCodes", &r.on_exit_codes, pod_failure_policy_on_exit_codes)
        .messages(
            "onPodConditions",
            &r.on_pod_conditions,
            pod_failure_policy_on_pod_conditions,
        )
        .build()
}

fn pod_failure_policy_on_exit_codes(r: &PodFailurePolicyOnExitCodesRequirement) -> Value {
    Fields::new()
        .str("containerName", &r.container_name)
        .str("operator", &r.operator)
        .list("values", &r.values)
        .build()
}

fn pod_failure_policy_on_pod_conditions(p: &PodFailurePolicyOnPodConditionsPattern) -> Value {
    Fields::new()
        .str("type", &p.r#type)
        .str("status", &p.status)
        .build()
}

fn success_policy(p: &SuccessPolicy) -> Value {
    Fields::new()
        .messages("rules", &p.rules, success_policy_rule)
        .build()
}

fn success_policy_rule(r: &SuccessPolicyRule) -> Value {
    Fields::new()
        .str("succeededIndexes", &r.succeeded_indexes)
        .opt("succeededCount", r.succeeded_count)
        .build()
}

pub(super) fn cron_job(c: &CronJob) -> Value {
    Fields::new()
        .message("metadata", &c.metadata, object_meta)
        .message("spec", &c.spec, cron_job_spec)
        .build()
}

fn cron_job_spec(s: &CronJobSpec) -> Value {
    Fields::new()
        .str("schedule", &s.schedule)
        .str("timeZone", &s.time_zone)
        .opt("startingDeadlineSeconds", s.starting_deadline_seconds)
        .str("concurrencyPolicy", &s.concurrency_policy)
        .opt("suspend", s.suspend)
        .message("jobTemplate", &s.job_template, job_template_spec)
        .opt("successfulJobsHistoryLimit", s.successful_jobs_history_limit)
        .opt("failedJobsHistoryLimit", s.failed_jobs_history_limit)
        .build()
}

fn job_template_spec(t: &JobTemplateSpec) -> Value {
    Fields::new()
        .message("metadata", &t.metadata, object_meta)
        .message("spec", &t.spec, job_spec)
        .build()
}

pub(super) fn horizontal_pod_autoscaler(h: &HorizontalPodAutoscaler) -> Value {
    Fields::new()
        .message("metadata", &h.metadata, object_meta)
        .message("spec", &h.spec, horizontal_pod_autoscaler_spec)
        .build()
}

fn horizontal_pod_autoscaler_spec(s: &HorizontalPodAutoscalerSpec) -> Value {
    Fields::new()
        .message(
            "scaleTargetRef",
            &s.scale_target_ref,
            cross_version_object_reference,
        )
        .opt("minReplicas", s.min_replicas)
        .opt("maxReplicas", s.max_replicas)
        .opt(
            "targetCPUUtilizationPercentage",
            s.target_cpu_utilization_percentage,
        )
        .build()
}

fn cross_version_object_reference(r: &CrossVersionObjectReference) -> Value {
    Fields::new()
        .str("kind", &r.kind)
        .str("name", &r.name)
        .str("apiVersion", &r.api_version)
        .build()
}
