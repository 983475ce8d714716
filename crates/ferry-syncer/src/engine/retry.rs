//! When a failed watch is tried again.
//!
//! Three kinds of failure call for three answers:
//! - **Gone** (410): the server no longer has the history the watch asked for, as after
//!   a restart. Waiting cannot help and a fresh list can: relist at once.
//! - **Unreachable** (no answer): retrying against a dead server only fills the log.
//!   Wait for the side to answer a probe again, then retry at once.
//! - **Refused** (any other status): back off exponentially, from 100 ms to the
//!   longest watch backoff.
//!
//! The streak of failures behind the backoff ends when a list completes or a watch
//! delivers an event, not only on the next event (after an outage, the relist is the
//! first success and nothing may change for a while).

use std::time::Duration;

use kube::runtime::watcher;

use super::queue::backoff;

/// The first retry delay of a failing watch.
pub const MIN_WATCH_BACKOFF: Duration = Duration::from_millis(100);

/// What a watch (or its list) failing means for trying again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WatchFailure {
    /// 410 Gone: the resourceVersion is too old (or from before a restart); only a
    /// fresh list helps.
    Gone,
    /// The server did not answer (connection refused, reset, timed out).
    Unreachable,
    /// The server answered with another error status.
    Refused(u16),
    /// Anything else (an undecodable response, a missing resourceVersion).
    Other,
}

impl WatchFailure {
    /// The kind of `error`.
    pub fn of(error: &watcher::Error) -> WatchFailure {
        let source = match error {
            watcher::Error::InitialListFailed(e)
            | watcher::Error::WatchStartFailed(e)
            | watcher::Error::WatchFailed(e) => e,
            watcher::Error::WatchError(status) if status.code == 410 => return WatchFailure::Gone,
            watcher::Error::WatchError(status) => return WatchFailure::Refused(status.code),
            _ => return WatchFailure::Other,
        };
        match source {
            kube::Error::Api(status) if status.code == 410 => WatchFailure::Gone,
            kube::Error::Api(status) => WatchFailure::Refused(status.code),
            kube::Error::SerdeError(_) => WatchFailure::Other,
            _ => WatchFailure::Unreachable,
        }
    }
}

/// Whether kube-rs's watcher would retry `error` with the same resourceVersion forever:
/// a 410 answering the watch request itself (kube-apiserver sends it in the stream, which
/// the watcher handles by relisting; other servers answer the request). The stream must
/// then be started afresh, which lists.
pub fn needs_new_stream(error: &watcher::Error) -> bool {
    matches!(error, watcher::Error::WatchStartFailed(kube::Error::Api(status)) if status.code == 410)
}

/// When to try again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NextAttempt {
    /// Right away.
    Now,
    /// After a delay.
    After(Duration),
    /// After a delay, and once the side answers again.
    WhenReachable(Duration),
}

/// The retry state of one watch.
#[derive(Clone, Debug)]
pub struct WatchRetry {
    max: Duration,
    /// Failures since the last success.
    failures: u32,
    /// 410s since the watch last delivered an event. Only the first relists at once: a
    /// server that cannot serve a watch at the resourceVersion its own list returned is
    /// relisted with growing delays, not in a loop (its lists do succeed).
    gone: u32,
}

impl WatchRetry {
    /// A retry state whose delays grow from [`MIN_WATCH_BACKOFF`] to `max`.
    pub fn new(max: Duration) -> WatchRetry {
        WatchRetry {
            max,
            failures: 0,
            gone: 0,
        }
    }

    /// A list completed.
    pub fn listed(&mut self) {
        self.failures = 0;
    }

    /// The watch delivered an event.
    pub fn delivered(&mut self) {
        self.failures = 0;
        self.gone = 0;
    }

    /// The watch or list failed with `failure`: when to try again.
    pub fn failed(&mut self, failure: WatchFailure) -> NextAttempt {
        if failure == WatchFailure::Gone {
            self.gone = self.gone.saturating_add(1);
            return match self.gone {
                1 => NextAttempt::Now,
                n => NextAttempt::After(backoff(MIN_WATCH_BACKOFF, self.max, n - 2)),
            };
        }
        let delay = backoff(MIN_WATCH_BACKOFF, self.max, self.failures);
        self.failures = self.failures.saturating_add(1);
        match failure {
            WatchFailure::Unreachable => NextAttempt::WhenReachable(delay),
            _ => NextAttempt::After(delay),
        }
    }

    /// Failures since the last success.
    pub fn failures(&self) -> u32 {
        self.failures
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube::core::Status;

    const MAX: Duration = Duration::from_secs(5);

    fn status(code: u16) -> Status {
        Status::failure("test", "Test").with_code(code)
    }

    fn refused_connection() -> kube::Error {
        kube::Error::ReadEvents(std::io::Error::from(std::io::ErrorKind::ConnectionRefused))
    }

    #[test]
    fn a_410_relists_at_once() {
        let mut retry = WatchRetry::new(MAX);
        for _ in 0..6 {
            retry.failed(WatchFailure::Unreachable);
        }
        assert_eq!(retry.failed(WatchFailure::Gone), NextAttempt::Now);
    }

    #[test]
    fn a_successful_list_resets_the_backoff() {
        let mut retry = WatchRetry::new(MAX);
        for _ in 0..6 {
            retry.failed(WatchFailure::Refused(500));
        }
        assert_eq!(retry.failed(WatchFailure::Refused(500)), NextAttempt::After(MAX));
        retry.listed();
        assert_eq!(retry.failures(), 0);
        assert_eq!(
            retry.failed(WatchFailure::Refused(500)),
            NextAttempt::After(MIN_WATCH_BACKOFF)
        );
    }

    #[test]
    fn an_event_resets_the_backoff() {
        let mut retry = WatchRetry::new(MAX);
        retry.failed(WatchFailure::Other);
        retry.failed(WatchFailure::Other);
        retry.delivered();
        assert_eq!(
            retry.failed(WatchFailure::Other),
            NextAttempt::After(MIN_WATCH_BACKOFF)
        );
    }

    #[test]
    fn failures_back_off_exponentially_up_to_the_longest_delay() {
        let mut retry = WatchRetry::new(MAX);
        let delays: Vec<_> = (0..8).map(|_| retry.failed(WatchFailure::Refused(500))).collect();
        let ms = |ms| NextAttempt::After(Duration::from_millis(ms));
        assert_eq!(
            delays,
            [
                ms(100),
                ms(200),
                ms(400),
                ms(800),
                ms(1600),
                ms(3200),
                ms(5000),
                ms(5000)
            ]
        );
    }

    #[test]
    fn an_unreachable_server_is_waited_for() {
        let mut retry = WatchRetry::new(MAX);
        assert_eq!(
            retry.failed(WatchFailure::Unreachable),
            NextAttempt::WhenReachable(MIN_WATCH_BACKOFF)
        );
    }

    #[test]
    fn a_410_right_after_relisting_for_one_backs_off() {
        let mut retry = WatchRetry::new(MAX);
        assert_eq!(retry.failed(WatchFailure::Gone), NextAttempt::Now);
        retry.listed();
        assert_eq!(
            retry.failed(WatchFailure::Gone),
            NextAttempt::After(MIN_WATCH_BACKOFF),
            "the server cannot watch from its own list: no relist loop"
        );
        retry.listed();
        assert_eq!(
            retry.failed(WatchFailure::Gone),
            NextAttempt::After(MIN_WATCH_BACKOFF * 2)
        );
        // Once the watch works again, the next restart relists at once again.
        retry.delivered();
        assert_eq!(retry.failed(WatchFailure::Gone), NextAttempt::Now);
    }

    #[test]
    fn failures_are_told_apart() {
        use watcher::Error;
        let of = |e: Error| WatchFailure::of(&e);
        assert_eq!(of(Error::WatchError(Box::new(status(410)))), WatchFailure::Gone);
        assert_eq!(
            of(Error::WatchStartFailed(kube::Error::Api(Box::new(status(410))))),
            WatchFailure::Gone
        );
        assert_eq!(
            of(Error::InitialListFailed(kube::Error::Api(Box::new(status(403))))),
            WatchFailure::Refused(403)
        );
        assert_eq!(
            of(Error::WatchError(Box::new(status(500)))),
            WatchFailure::Refused(500)
        );
        assert_eq!(
            of(Error::WatchStartFailed(refused_connection())),
            WatchFailure::Unreachable
        );
        assert_eq!(
            of(Error::WatchFailed(refused_connection())),
            WatchFailure::Unreachable
        );
        assert_eq!(of(Error::NoResourceVersion), WatchFailure::Other);
    }

    #[test]
    fn only_a_410_answering_the_watch_request_needs_a_new_stream() {
        use watcher::Error;
        assert!(needs_new_stream(&Error::WatchStartFailed(kube::Error::Api(
            Box::new(status(410))
        ))));
        assert!(!needs_new_stream(&Error::WatchError(Box::new(status(410)))));
        assert!(!needs_new_stream(&Error::WatchStartFailed(refused_connection())));
    }
}
