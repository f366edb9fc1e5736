//! Simulated clock: `now = start_wall + elapsed × time_scale`.
use std::time::Instant;

/// Clock used for every timestamp the server writes.
#[derive(Debug, Clone)]
pub struct SimClock {
    start_wall: jiff::Timestamp,
    start: Instant,
    scale: f64,
}

impl SimClock {
    pub fn new(time_scale: f64) -> Self {
        let scale = if time_scale.is_finite() && time_scale > 0.0 {
            time_scale
        } else {
            1.0
        };
        SimClock {
            start_wall: jiff::Timestamp::now(),
            start: Instant::now(),
            scale,
        }
    }

    pub fn time_scale(&self) -> f64 {
        self.scale
    }

    /// Current simulated time.
    pub fn now(&self) -> jiff::Timestamp {
        let elapsed = self.start.elapsed().as_secs_f64() * self.scale;
        let span = jiff::SignedDuration::try_from_secs_f64(elapsed).unwrap_or_default();
        self.start_wall.checked_add(span).unwrap_or(self.start_wall)
    }

    /// RFC 3339 with second precision, as `metav1.Time` serialises.
    pub fn now_rfc3339(&self) -> String {
        format_time(self.now())
    }
}

/// `metav1.Time` formatting (seconds, `Z`).
pub fn format_time(t: jiff::Timestamp) -> String {
    let secs = t.as_second();
    jiff::Timestamp::from_second(secs)
        .unwrap_or(t)
        .strftime("%Y-%m-%dT%H:%M:%SZ")
        .to_string()
}
