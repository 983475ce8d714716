//! `ferry_syncer::leader` against a hub: one holder at a time, the Lease's
//! fields as client-go writes them, release hands over at once, and a holder
//! whose Lease is taken learns it has lost.

mod common;

use std::time::{Duration, Instant};

use common::*;
use ferry_syncer::leader::{LeaderElectionConfig, LeaderElector};
use ferry_testkit::TestHub;
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::{Api, PostParams};

fn config(identity: &str) -> LeaderElectionConfig {
    let mut c = LeaderElectionConfig::new("default", "demo");
    c.identity = identity.to_string();
    c.lease_duration = Duration::from_secs(1);
    c.renew_deadline = Duration::from_millis(700);
    c.retry_period = Duration::from_millis(100);
    c
}

#[tokio::test]
async fn one_holder_release_hands_over_and_a_taken_lease_is_lost() {
    let hub = TestHub::start().await;
    let client = hub.client("root").await;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "default");

    let mut a = LeaderElector::new(client.clone(), config("a"));
    let mut b = LeaderElector::new(client.clone(), config("b"));
    a.acquire().await;
    let spec = leases.get("demo").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(1));
    assert_eq!(spec.lease_transitions, Some(0));
    assert!(spec.acquire_time.is_some() && spec.renew_time.is_some());

    // While a renews, b does not get the Lease.
    {
        let hold = a.hold();
        tokio::pin!(hold);
        tokio::select! {
            _ = b.acquire() => panic!("b acquired a Lease a was renewing"),
            lost = &mut hold => panic!("a lost its Lease: {lost}"),
            _ = tokio::time::sleep(Duration::from_secs(2)) => {}
        }
    }

    // a gives it up: b takes it at its next try, not a lease duration later.
    a.release().await;
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), b.acquire())
        .await
        .expect("b acquires");
    assert!(
        started.elapsed() < Duration::from_millis(900),
        "{:?}",
        started.elapsed()
    );
    let spec = leases.get("demo").await.unwrap().spec.unwrap();
    assert_eq!(spec.holder_identity.as_deref(), Some("b"));
    assert_eq!(spec.lease_transitions, Some(1));

    // Someone else writes the Lease (an operator, or a replica that judged it
    // expired): b's next renewal sees it and reports the loss.
    let mut lease = leases.get("demo").await.unwrap();
    lease.spec.as_mut().unwrap().holder_identity = Some("c".into());
    leases
        .replace("demo", &PostParams::default(), &lease)
        .await
        .unwrap();
    let lost = tokio::time::timeout(Duration::from_secs(5), b.hold())
        .await
        .expect("b notices");
    assert!(lost.to_string().contains("another holder"), "{lost}");

    // c never renews: a takes the Lease once it has stood still for its duration.
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(5), a.acquire())
        .await
        .expect("a takes over");
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(900),
        "took an unexpired Lease after {waited:?}"
    );
    eventually(5, "a to hold the Lease", || async {
        let h = leases.get("demo").await.ok()?.spec?.holder_identity?;
        (h == "a").then_some(())
    })
    .await;
}

#[test]
fn timings_that_let_two_replicas_lead_are_refused() {
    let mut c = config("a");
    assert!(c.validate().is_ok());
    c.renew_deadline = Duration::from_secs(2);
    let err = c.validate().unwrap_err().to_string();
    assert!(err.contains("--leader-elect-renew-deadline"), "{err}");
    let mut c = config("a");
    c.retry_period = Duration::from_secs(1);
    assert!(c
        .validate()
        .unwrap_err()
        .to_string()
        .contains("--leader-elect-retry-period"));
}
