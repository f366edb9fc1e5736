//! Handing memory freed by a cycle back to the system.
//!
//! A cycle allocates and frees hundreds of megabytes at 150,000 pods, on the blocking thread and
//! the engine's worker threads. glibc's allocator keeps freed memory in per-thread arenas and
//! returns it only from the top of each heap, so the process' resident size climbed cycle after
//! cycle although the live data did not grow. `malloc_trim(0)` after each cycle releases the free
//! pages of every arena (glibc ≥ 2.8), so the resident size stays at what the state and the next
//! cycle need. Elsewhere (musl, other systems) this does nothing.
//!
//! Trimming returns free pages but not the arenas themselves: glibc gives a thread that finds the
//! arenas busy a new one (up to 8 per core), and each keeps its own partly used pages. A cycle
//! runs on whichever blocking thread is free, so over the first cycles more threads got arenas
//! and the resident size after a cycle still grew (+6 % over 15 cycles at 1,000 nodes / 30,000
//! pods) before it levelled off. [`limit_arenas`], called by `run` before its runtime starts,
//! caps them at one per core (+3–4 %, flat after the third cycle; cycles were no slower).

/// Caps the allocator's arenas at one per core (glibc's `M_ARENA_MAX`; a no-op elsewhere, and
/// when `MALLOC_ARENA_MAX` is set in the environment, which then decides). Called once, early.
pub fn limit_arenas() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    if std::env::var_os("MALLOC_ARENA_MAX").is_none() {
        let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
        let arenas = libc::c_int::try_from(cores.max(2)).unwrap_or(libc::c_int::MAX);
        // SAFETY: mallopt only sets an allocator parameter, under the allocator's own lock; it
        // takes no pointers and is safe to call from any thread.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, arenas);
        }
    }
}

/// Returns the allocator's free memory to the system (glibc on Linux; a no-op elsewhere).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under its own locks; it takes
    // no pointers from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
