//! A token bucket in front of each side's requests, so `--qps` and `--burst` hold.

use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

/// Requests per second with a burst allowance. Waiting callers queue up in order of
/// arrival: each takes a token, possibly going into debt, and sleeps off the debt.
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<Bucket>,
}

struct Bucket {
    tokens: f64,
    at: Instant,
}

impl RateLimiter {
    /// A limiter for `qps` requests per second (unlimited if `qps <= 0`) with room for
    /// `burst` at once (at least 1).
    pub fn new(qps: f32, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps: f64::from(qps),
            burst,
            state: Mutex::new(Bucket {
                tokens: burst,
                at: Instant::now(),
            }),
        }
    }

    /// How long the caller must wait for its token (taking it now).
    pub fn reserve(&self) -> Duration {
        if self.qps <= 0.0 {
            return Duration::ZERO;
        }
        let mut bucket = self.state.lock();
        let now = Instant::now();
        let elapsed = now.duration_since(bucket.at).as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * self.qps).min(self.burst);
        bucket.at = now;
        bucket.tokens -= 1.0;
        if bucket.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-bucket.tokens / self.qps)
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        let wait = self.reserve();
        if !wait.is_zero() {
            tokio::time::sleep(wait).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_goes_at_once_then_qps_applies() {
        let limiter = RateLimiter::new(10.0, 3);
        for _ in 0..3 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
        let wait = limiter.reserve();
        assert!((wait.as_secs_f64() - 0.1).abs() < 1e-6, "{wait:?}");
        let wait = limiter.reserve();
        assert!((wait.as_secs_f64() - 0.2).abs() < 1e-6, "{wait:?}");
        tokio::time::advance(Duration::from_secs(10)).await;
        assert_eq!(limiter.reserve(), Duration::ZERO);
    }

    #[test]
    fn zero_qps_is_unlimited() {
        let limiter = RateLimiter::new(0.0, 1);
        for _ in 0..1000 {
            assert_eq!(limiter.reserve(), Duration::ZERO);
        }
    }
}
