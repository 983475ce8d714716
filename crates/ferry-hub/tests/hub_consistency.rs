//! Reads at a resourceVersion, as kube-apiserver answers them: a watch or a
//! list at a revision the hub has not reached waits briefly and then gets
//! "Too large resource version" (never a silent skip); an exact list at an
//! older revision gets 410.

mod common;

use std::time::{Duration, Instant};

use common::get_raw as get;
use common::{get_ok, post_created};
use ferry_testkit::TestHub;
use serde_json::{json, Value};

const CMS: &str = "/api/v1/namespaces/default/configmaps";

/// An admin client that sees the hub's 504s as they are: kube-rs retries
/// 429/503/504 by default (honouring `Retry-After`), which is what a
/// controller wants but would hide the answer under test.
async fn client(hub: &TestHub) -> kube::Client {
    let mut config = hub.config("root").await;
    config.default_retry = false;
    kube::Client::try_from(config).unwrap()
}

async fn current_rv(client: &kube::Client) -> u64 {
    let list = get_ok(client, CMS).await;
    list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

async fn create(client: &kube::Client, name: &str) -> u64 {
    let made = post_created(client, CMS, &json!({"metadata": {"name": name}})).await;
    made["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

fn assert_too_large(code: u16, body: &str, asked: u64) {
    assert_eq!(code, 504, "{body}");
    let status: Value = serde_json::from_str(body).unwrap();
    assert_eq!(status["reason"], "Timeout", "{body}");
    assert!(
        status["message"]
            .as_str()
            .unwrap()
            .starts_with(&format!("Too large resource version: {asked}, current: ")),
        "{body}"
    );
    assert_eq!(
        status["details"]["causes"][0]["reason"],
        "ResourceVersionTooLarge"
    );
    assert_eq!(status["details"]["retryAfterSeconds"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_from_the_future_waits_then_refuses_instead_of_skipping() {
    let hub = TestHub::start().await;
    let client = client(&hub).await;
    let rv = current_rv(&client).await;
    let asked = rv + 1000;
    let started = Instant::now();
    let (code, body) = get(&client, &format!("{CMS}?watch=true&resourceVersion={asked}")).await;
    assert_too_large(code, &body, asked);
    assert!(
        started.elapsed() >= Duration::from_secs(2),
        "it waits for the revision first"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_watch_just_ahead_starts_once_the_hub_reaches_it() {
    let hub = TestHub::start().await;
    let client = client(&hub).await;
    let rv = current_rv(&client).await;
    // The next write will be rv+1; a watch from there sees the one after.
    let watch = {
        let client = client.clone();
        tokio::spawn(async move {
            get(
                &client,
                &format!("{CMS}?watch=true&resourceVersion={}&timeoutSeconds=2", rv + 1),
            )
            .await
        })
    };
    let first = create(&client, "first").await;
    assert_eq!(first, rv + 1);
    create(&client, "second").await;
    let (code, body) = watch.await.unwrap();
    assert_eq!(code, 200, "{body}");
    assert!(body.contains("\"name\":\"second\""), "{body}");
    assert!(!body.contains("\"name\":\"first\""), "{body}");
}

#[tokio::test(flavor = "multi_thread")]
async fn lists_at_a_resource_version_answer_as_kube_apiserver() {
    let hub = TestHub::start().await;
    let client = client(&hub).await;
    let old = create(&client, "a").await;
    create(&client, "b").await;
    let now = current_rv(&client).await;

    // Not older than a revision the hub has: the newest list.
    for query in [
        format!("resourceVersion={old}"),
        format!("resourceVersion={old}&resourceVersionMatch=NotOlderThan"),
        "resourceVersion=0".to_string(),
        format!("resourceVersion={now}&resourceVersionMatch=Exact"),
    ] {
        let (code, body) = get(&client, &format!("{CMS}?{query}")).await;
        assert_eq!(code, 200, "{query}: {body}");
        assert!(body.contains("\"name\":\"b\""), "{query}: {body}");
    }
    // Exactly an older revision: gone, not the current state.
    let (code, body) = get(
        &client,
        &format!("{CMS}?resourceVersion={old}&resourceVersionMatch=Exact"),
    )
    .await;
    assert_eq!(code, 410, "{body}");
    assert!(body.contains("too old resource version"), "{body}");
    // A revision not reached: wait, then 504.
    let asked = now + 500;
    let (code, body) = get(
        &client,
        &format!("{CMS}?resourceVersion={asked}&resourceVersionMatch=NotOlderThan"),
    )
    .await;
    assert_too_large(code, &body, asked);
    // Malformed combinations: 422 naming the field, as kube's ListOptions validation.
    for (query, says) in [
        (
            "resourceVersionMatch=NotOlderThan",
            "forbidden unless resourceVersion is provided",
        ),
        (
            "resourceVersion=0&resourceVersionMatch=Exact",
            "forbidden for resourceVersion \\\"0\\\"",
        ),
        (
            "resourceVersion=1&resourceVersionMatch=Newest",
            "Unsupported value",
        ),
    ] {
        let (code, body) = get(&client, &format!("{CMS}?{query}")).await;
        assert_eq!(code, 422, "{query}: {body}");
        assert!(
            body.contains("resourceVersionMatch") && body.contains(says),
            "{query}: {body}"
        );
    }
}
