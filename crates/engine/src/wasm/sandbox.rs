//! The sandbox's limits: the engine configuration (no WASI, epoch interruption), the memory cap
//! (a [`wasmtime::ResourceLimiter`]), the per-call CPU bound (a watchdog thread that advances the
//! engine's epoch when the call's time is up) and how a failed call is described.

use std::sync::mpsc;
use std::time::Duration;

use wasmtime::{Config, Engine, Trap};

/// Default memory cap of a guest's linear memory.
pub const DEFAULT_MEMORY_LIMIT: u64 = 64 * 1024 * 1024;
/// Default CPU bound of one call.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1);
/// Largest `memoryLimit` (a 32-bit guest cannot address more).
pub const MAX_MEMORY_LIMIT: u64 = 4 * 1024 * 1024 * 1024;
/// Smallest `memoryLimit`: one WebAssembly page.
pub const MIN_MEMORY_LIMIT: u64 = 64 * 1024;
/// Largest `timeout`.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(600);
/// Most table elements a guest may have.
const MAX_TABLE_ELEMENTS: usize = 100_000;

/// The per-plugin sandbox settings.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// Cap of the guest's linear memory, in bytes.
    pub memory: u64,
    /// CPU bound of one call.
    pub timeout: Duration,
}

/// The engine for one plugin: Cranelift, epoch interruption for the CPU bound, no address map,
/// nothing else.
/// Each plugin has its own engine so that one plugin's timeout never interrupts another's call.
pub fn engine() -> Result<Engine, String> {
    let mut c = Config::new();
    c.epoch_interruption(true);
    c.max_wasm_stack(1024 * 1024);
    // No map from machine code back to wasm offsets: it is only for wasm backtraces (which no
    // failure sentence shows) and costs memory per compiled instruction of a large Go module.
    c.generate_address_map(false);
    Engine::new(&c).map_err(|e| format!("cannot set up the WebAssembly engine: {e}"))
}

/// The memory cap of one store; records when the guest hit it.
pub struct Limiter {
    /// The cap in bytes.
    pub limit: u64,
    /// The size the guest asked for when it was refused.
    pub denied: Option<usize>,
}

impl Limiter {
    /// A limiter with cap `limit` bytes.
    pub fn new(limit: u64) -> Self {
        Limiter {
            limit,
            denied: None,
        }
    }
}

impl wasmtime::ResourceLimiter for Limiter {
    fn memory_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        if desired as u64 > self.limit {
            self.denied = Some(desired);
            // An error (rather than `Ok(false)`, which makes memory.grow return -1) ends the call:
            // a guest that runs out of memory has failed.
            return Err(wasmtime::Error::msg(format!(
                "memory limit exceeded: the guest asked for {desired} bytes, memoryLimit is {} bytes",
                self.limit
            )));
        }
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _maximum: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// Runs `f` (a guest call on a store whose epoch deadline is one tick away) with a watchdog that
/// advances `engine`'s epoch after `timeout`, which traps the call. Returns `f`'s result and
/// whether the watchdog fired.
pub fn with_deadline<R>(engine: &Engine, timeout: Duration, f: impl FnOnce() -> R) -> (R, bool) {
    let (done, wait) = mpsc::channel::<()>();
    std::thread::scope(|scope| {
        let watchdog = scope.spawn(move || {
            if let Err(mpsc::RecvTimeoutError::Timeout) = wait.recv_timeout(timeout) {
                engine.increment_epoch();
                true
            } else {
                false
            }
        });
        let r = f();
        drop(done);
        let fired = watchdog.join().unwrap_or(false);
        (r, fired)
    })
}

/// A sentence for a failed call: the timeout, the memory cap, a malformed answer, the guest's own
/// `fail` message, or the trap.
pub fn describe(
    err: &wasmtime::Error,
    timed_out: bool,
    timeout: Duration,
    limiter: &Limiter,
    malformed: Option<&str>,
    failed: Option<&str>,
) -> String {
    if let Some(m) = malformed {
        return format!("malformed answer: {m}");
    }
    if let Some(m) = failed {
        return format!("the guest failed: {m}");
    }
    if let Some(desired) = limiter.denied {
        return format!(
            "memory limit exceeded: the guest asked for {desired} bytes of linear memory, memoryLimit is {} bytes",
            limiter.limit
        );
    }
    if timed_out || matches!(err.downcast_ref::<Trap>(), Some(Trap::Interrupt)) {
        return format!("timed out: the call ran longer than its timeout of {timeout:?}");
    }
    match err.downcast_ref::<Trap>() {
        Some(t) => format!("trap: {t}"),
        None => format!("error: {err}"),
    }
}
