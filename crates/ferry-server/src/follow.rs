//! The one loop of a controller that follows the store's watch, in the
//! shape of kube-runtime's controllers: it looks at everything it cares
//! about when it starts (and whenever the watch falls behind), then reacts
//! to each change, until its lease is lost. Reactions must be idempotent:
//! the controller also sees its own writes, and the same object may
//! already have been handled within the write that changed it
//! (`controllers::BuiltIn`).
//!
//! The loop owns what every such controller needs alike: taking the watch
//! (again, after a pause, when the store refuses one), the resync on start
//! and after falling behind, handing over the changes already there as one
//! batch, stopping when the lease is lost, and the metrics
//! ([`FollowMetrics`](crate::follow_metrics::FollowMetrics)). The controller owns what it keeps between changes
//! and when it wants to act without news ([`Follower::wait`]).

use std::future::Future;
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use tokio::task::JoinHandle;

use crate::controller::ControllerContext;
use crate::storage::WatchEvent;

/// One controller following the store.
///
/// A change under a followed storage key is first [noted](Follower::note);
/// a controller that handles changes one by one (the default) then
/// handles it in [`Follower::changed`]. One that handles a burst of
/// changes in one pass keeps what the pass needs when noting, says when the
/// pass is due in [`Follower::wait`], and does it in [`Follower::pass`].
pub trait Follower: Send + 'static {
    /// The controller's name in metrics: by default its type's name,
    /// without the module path (`SyncTargets`, `Mailboxes`, ...).
    fn name(&self) -> &'static str {
        type_name_base::<Self>()
    }

    /// Whether changes under this storage key concern the controller.
    fn follows(&self, storage_key: &str) -> bool;

    /// Look at everything: at start, after falling behind the watch, and
    /// when [`Follower::wait`] says so.
    fn resync<'a>(&'a mut self, ctx: &'a ControllerContext) -> BoxFuture<'a, ()>;

    /// Take note of one change under a followed storage key, without
    /// writing. True (the default) hands it to [`Follower::changed`] now;
    /// false leaves it to a later [`Follower::pass`] (or to nothing).
    fn note(&mut self, _ctx: &ControllerContext, _event: &WatchEvent) -> bool {
        true
    }

    /// Handle one change that [`Follower::note`] handed over.
    fn changed<'a>(&'a mut self, _ctx: &'a ControllerContext, _event: &'a WatchEvent) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }

    /// What the controller waits for besides changes: a debounced pass, a
    /// retry, a timer, work of its own finishing. Returns what is due;
    /// never returns (the default) when nothing ever is. Dropped whenever
    /// a change comes first or the lease is lost, so it must lose nothing
    /// when dropped at an await (a sleep, a `JoinSet::join_next`).
    fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
        Box::pin(std::future::pending())
    }

    /// The pass [`Follower::wait`] said is due.
    fn pass<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
        Box::pin(async {})
    }
}

/// What [`Follower::wait`] says is due.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Due {
    /// A [`Follower::pass`].
    Pass,
    /// A look at everything ([`Follower::resync`]).
    Resync,
}

/// When a controller that works in passes runs its next one: at once
/// after a resync, within `debounce` of a change (a burst of changes
/// shares one pass), and `retry` after a pass that could not finish, even
/// without news.
pub struct Passes {
    due: Option<tokio::time::Instant>,
    debounce: Duration,
    retry: Duration,
}

impl Passes {
    /// A pass due at once (the first, after a resync).
    pub fn now(debounce: Duration, retry: Duration) -> Passes {
        Passes {
            due: Some(tokio::time::Instant::now()),
            debounce,
            retry,
        }
    }

    /// A pass due at once again (after a resync).
    pub fn restart(&mut self) {
        self.due = Some(tokio::time::Instant::now());
    }

    /// A change calls for a pass: due within the debounce time.
    pub fn changed(&mut self) {
        let soon = tokio::time::Instant::now() + self.debounce;
        self.due = Some(self.due.map_or(soon, |d| d.min(soon)));
    }

    /// A pass ran; `unfinished`: it runs again after the retry time.
    pub fn passed(&mut self, unfinished: bool) {
        self.due = unfinished.then(|| tokio::time::Instant::now() + self.retry);
    }

    /// Run `pass` (for [`Follower::pass`]); when it could not finish
    /// (`true`), the next runs after the retry time.
    pub async fn run(&mut self, pass: impl Future<Output = bool>) {
        let unfinished = pass.await;
        self.passed(unfinished);
    }

    /// Wait until a pass is due (for [`Follower::wait`]).
    pub async fn due(&self) -> Due {
        match self.due {
            Some(at) => tokio::time::sleep_until(at).await,
            None => std::future::pending().await,
        }
        Due::Pass
    }
}

/// How long the loop pauses before asking again for a watch the store refused.
const WATCH_RETRY: Duration = Duration::from_millis(100);

/// Most changes handed over in one batch before the loop looks at its
/// lease and the controller's [`Follower::wait`] again.
const BATCH: usize = 1024;

/// Run `f` while `ctx`'s lease is held.
pub fn spawn<F: Follower>(ctx: ControllerContext, f: F) -> JoinHandle<()> {
    tokio::spawn(async move {
        run(ctx, f).await;
    })
}

/// Follow the store with `f` until `ctx`'s lease is lost; returns `f`, for
/// a controller with work of its own to wind down.
pub async fn run<F: Follower>(ctx: ControllerContext, mut f: F) -> F {
    let metrics = ctx.hub().follow_metrics.of(f.name());
    let mut lease = ctx.lease();
    while lease.is_held() {
        let rv = ctx.resource_version();
        let Ok(mut events) = ctx.watch(rv) else {
            tokio::time::sleep(WATCH_RETRY).await;
            continue;
        };
        // Read after the watch began: an event for what the resync already
        // saw only tells the controller again.
        metrics.resync(f.resync(&ctx)).await;
        'watching: loop {
            tokio::select! {
                _ = lease.lost() => return f,
                due = f.wait(&ctx) => match due {
                    Due::Pass => metrics.handle(f.pass(&ctx)).await,
                    Due::Resync => metrics.resync(f.resync(&ctx)).await,
                },
                event = events.next() => {
                    let Some(mut event) = event else {
                        break; // fell behind: resync
                    };
                    // This change and those already there, as one batch. The
                    // batch ends before taking a change it would not handle.
                    for handled in 1..=BATCH {
                        if f.follows(&event.key.resource) && f.note(&ctx, &event) {
                            metrics.handle(f.changed(&ctx, &event)).await;
                        }
                        if !lease.is_held() {
                            return f;
                        }
                        if handled == BATCH {
                            break;
                        }
                        match events.next().now_or_never() {
                            Some(Some(next)) => event = next,
                            Some(None) => break 'watching, // fell behind: resync
                            None => break,
                        }
                    }
                }
            }
        }
    }
    f
}

/// The name of type `T` without its module path and generic arguments.
fn type_name_base<T: ?Sized>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Instant;

    use parking_lot::Mutex;
    use serde_json::json;
    use tokio::sync::watch;

    use super::*;
    use crate::controller::Lease;
    use crate::hub::{Hub, HubConfig};
    use crate::storage::{Expect, ObjectKey, Store};

    /// What a test follower saw, in order.
    type Seen = Arc<Mutex<Vec<String>>>;

    /// Follows ConfigMaps one change at a time, and asks for one more look
    /// at everything when a ConfigMap named `again` comes. With a `gate`, it
    /// yields in each change as a controller's writes do, and stays in the
    /// change of the ConfigMap named `gate` until the test opens it.
    struct OneByOne {
        seen: Seen,
        again: bool,
        gate: Option<Arc<tokio::sync::Notify>>,
    }

    impl Follower for OneByOne {
        fn follows(&self, storage_key: &str) -> bool {
            storage_key == "/configmaps"
        }

        fn resync<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
            self.again = false;
            self.seen.lock().push("resync".into());
            Box::pin(async {})
        }

        fn changed<'a>(
            &'a mut self,
            _ctx: &'a ControllerContext,
            event: &'a WatchEvent,
        ) -> BoxFuture<'a, ()> {
            self.again |= event.key.name == "again";
            self.seen.lock().push(format!("changed {}", event.key.name));
            let gate = self.gate.clone();
            let held = event.key.name == "gate";
            Box::pin(async move {
                match gate {
                    Some(gate) if held => gate.notified().await,
                    Some(_) => tokio::task::yield_now().await,
                    None => {}
                }
            })
        }

        fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
            let again = self.again;
            Box::pin(async move {
                if !again {
                    std::future::pending::<()>().await;
                }
                Due::Resync
            })
        }
    }

    /// Notes every change and handles them in debounced passes.
    struct InPasses {
        seen: Seen,
        passes: Passes,
        noted: usize,
    }

    impl Follower for InPasses {
        fn follows(&self, _storage_key: &str) -> bool {
            true
        }

        fn resync<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
            self.passes = Passes::now(Duration::from_millis(200), Duration::from_secs(60));
            Box::pin(async {})
        }

        fn note(&mut self, _ctx: &ControllerContext, _event: &WatchEvent) -> bool {
            self.noted += 1;
            self.passes.changed();
            false
        }

        fn wait<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, Due> {
            Box::pin(self.passes.due())
        }

        fn pass<'a>(&'a mut self, _ctx: &'a ControllerContext) -> BoxFuture<'a, ()> {
            self.seen.lock().push(format!("pass after {}", self.noted));
            self.passes.passed(false);
            Box::pin(async {})
        }
    }

    fn configmap(hub: &Hub, resource: &str, name: &str) {
        let key = ObjectKey {
            cluster: "root".into(),
            resource: resource.into(),
            namespace: "default".into(),
            name: name.into(),
        };
        let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "default"}});
        hub.store.put(key, Expect::Absent, obj).expect("stored");
    }

    async fn until_seen(seen: &Seen, done: impl Fn(&[String]) -> bool) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let now = seen.lock().clone();
            if done(&now) {
                return now;
            }
            assert!(Instant::now() < deadline, "not seen within 10s: {now:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn a_follower_looks_at_everything_then_handles_each_followed_change_until_its_lease_is_lost() {
        let hub = Hub::new(Store::in_memory(), HubConfig::default());
        let (stop, ended) = watch::channel(false);
        let ctx = ControllerContext::new(hub.clone()).with_lease(Lease::until(ended));
        let seen = Seen::default();
        let running = spawn(
            ctx,
            OneByOne {
                seen: seen.clone(),
                again: false,
                gate: None,
            },
        );
        until_seen(&seen, |s| s.len() == 1).await;
        configmap(&hub, "/secrets", "not-followed");
        configmap(&hub, "/configmaps", "a");
        configmap(&hub, "/configmaps", "again");
        let seen_now = until_seen(&seen, |s| s.len() >= 4).await;
        assert_eq!(seen_now, ["resync", "changed a", "changed again", "resync"]);
        let metrics = &hub.follow_metrics;
        assert_eq!(
            metrics.resyncs_of("OneByOne"),
            2,
            "at start and when wait said so"
        );
        assert_eq!(metrics.events_of("OneByOne"), 2, "each followed change handled");
        stop.send(true).expect("the loop listens");
        tokio::time::timeout(Duration::from_secs(10), running)
            .await
            .expect("the loop stops with its lease")
            .expect("it ends without panicking");
    }

    #[tokio::test]
    async fn every_change_of_a_burst_longer_than_a_batch_is_handled() {
        let hub = Hub::new(Store::in_memory(), HubConfig::default());
        let ctx = ControllerContext::new(hub.clone());
        let seen = Seen::default();
        let gate = Arc::new(tokio::sync::Notify::new());
        let _running = spawn(
            ctx,
            OneByOne {
                seen: seen.clone(),
                again: false,
                gate: Some(gate.clone()),
            },
        );
        until_seen(&seen, |s| s.len() == 1).await;
        configmap(&hub, "/configmaps", "gate");
        until_seen(&seen, |s| s.len() == 2).await;
        // While the follower is held in the gate's change, more changes
        // wait than one batch takes.
        let burst = 2 * BATCH + 10;
        for i in 0..burst {
            configmap(&hub, "/configmaps", &format!("cm-{i}"));
        }
        hub.store.settle(Duration::from_secs(10)).await;
        gate.notify_one();
        let seen_now = until_seen(&seen, |s| {
            s.len() >= burst + 2 || s.last().is_some_and(|l| l == "resync")
        })
        .await;
        assert_eq!(
            seen_now.iter().filter(|s| *s == "resync").count(),
            1,
            "the follower kept up with the watch"
        );
        let missed: Vec<usize> = (0..burst)
            .filter(|i| !seen_now.contains(&format!("changed cm-{i}")))
            .collect();
        assert!(missed.is_empty(), "changes never handled: {missed:?}");
    }

    #[tokio::test]
    async fn a_burst_of_noted_changes_is_handled_by_one_pass() {
        let hub = Hub::new(Store::in_memory(), HubConfig::default());
        let ctx = ControllerContext::new(hub.clone());
        let seen = Seen::default();
        let _running = spawn(
            ctx,
            InPasses {
                seen: seen.clone(),
                passes: Passes::now(Duration::ZERO, Duration::ZERO),
                noted: 0,
            },
        );
        until_seen(&seen, |s| s.len() == 1).await; // the first pass, after the resync
        for i in 0..20 {
            configmap(&hub, "/configmaps", &format!("cm-{i}"));
        }
        let seen_now = until_seen(&seen, |s| s.len() >= 2).await;
        assert_eq!(seen_now, ["pass after 0", "pass after 20"]);
        assert_eq!(
            hub.follow_metrics.events_of("InPasses"),
            2,
            "passes are counted, notes are not"
        );
    }
}
