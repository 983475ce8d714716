//! The `batch` group: Jobs and CronJobs.

pub mod cronjob;
pub mod job;
