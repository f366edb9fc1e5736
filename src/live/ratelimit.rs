//! Client-side token bucket for the API writes of a cycle (`--client-connection-qps/-burst`).

use tokio::sync::Mutex;
use tokio::time::{Duration, Instant};

/// A token bucket: `burst` tokens, refilled at `qps` per second. `qps <= 0` disables limiting.
#[derive(Debug)]
pub struct RateLimiter {
    qps: f64,
    burst: f64,
    state: Mutex<(f64, Instant)>,
}

impl RateLimiter {
    /// A full bucket.
    pub fn new(qps: f64, burst: u32) -> Self {
        let burst = f64::from(burst.max(1));
        RateLimiter {
            qps,
            burst,
            state: Mutex::new((burst, Instant::now())),
        }
    }

    /// Waits for a token.
    pub async fn acquire(&self) {
        if self.qps <= 0.0 || !self.qps.is_finite() {
            return;
        }
        loop {
            let wait = {
                let mut st = self.state.lock().await;
                let now = Instant::now();
                let refill = now.duration_since(st.1).as_secs_f64() * self.qps;
                st.0 = (st.0 + refill).min(self.burst);
                st.1 = now;
                if st.0 >= 1.0 {
                    st.0 -= 1.0;
                    return;
                }
                (1.0 - st.0) / self.qps
            };
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn burst_then_qps() {
        let rl = RateLimiter::new(2.0, 3);
        let start = Instant::now();
        for _ in 0..3 {
            rl.acquire().await;
        }
        assert_eq!(start.elapsed(), Duration::ZERO);
        rl.acquire().await;
        rl.acquire().await;
        let e = start.elapsed().as_secs_f64();
        assert!((0.99..1.01).contains(&e), "elapsed {e}");
    }
}
