//! Handing memory freed by a cycle back to the system.
//!
//! A cycle allocates and frees hundreds of megabytes at 150,000 pods, on the blocking thread and
//! the engine's worker threads. glibc's allocator keeps freed memory in per-thread arenas and
//! returns it only from the top of each heap, so the process' resident size climbed cycle after
//! cycle although the live data did not grow. `malloc_trim(0)` after each cycle releases the free
//! pages of every arena (glibc ≥ 2.8), so the resident size stays at what the state and the next
//! cycle need. Elsewhere (musl, other systems) this does nothing.

/// Returns the allocator's free memory to the system (glibc on Linux; a no-op elsewhere).
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only walks the allocator's own free lists, under its own locks; it takes
    // no pointers from us and is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}
