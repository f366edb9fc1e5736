//! The `kube-descheduler` binary: subcommands `plan`, `run`, `webhook`, `certs`, `completions`
//! (also the kubectl plugin `kubectl-descheduler`: see [`kube_descheduler::cli::parse`]).

/// jemalloc on Linux with glibc (unless built with the feature `system-allocator`, for heap
/// profilers): cycles of `run` and watch events interleave short- and
/// long-lived allocations, which left glibc's heap ever more fragmented (see `memory`).
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "system-allocator")
))]
#[global_allocator]
static GLOBAL: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// A `const char *` jemalloc reads its options from at start-up.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "system-allocator")
))]
#[repr(transparent)]
pub struct AllocatorOptions(*const std::ffi::c_char);

// SAFETY: the pointer is to a `'static` string that is never written.
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "system-allocator")
))]
unsafe impl Sync for AllocatorOptions {}

/// jemalloc's options (its `malloc_conf`; the environment variable `_RJEM_MALLOC_CONF` still
/// overrides them): one arena (threads share it, each with its own thread cache; at 5,000 /
/// 150,000 the resident size after 30 `run` cycles was 3.7 % above the first instead of 5.0 %
/// with two arenas, cycles no slower), unused pages returned at once (`dirty_decay_ms:0`: at
/// 5,000 / 155,000 the peak resident size of a `run --dry-run` cycle was 193–196 MiB instead of
/// 198–204 MiB with a 1 s decay), and returned for good (`MADV_DONTNEED`, so the resident size
/// shows it) rather than lazily. `plan`, which ends after one piece of work,
/// turns the return off at its start (see `memory::keep_free_memory`).
#[cfg(all(
    target_os = "linux",
    target_env = "gnu",
    not(feature = "system-allocator")
))]
// SAFETY: jemalloc reads this symbol, a NUL-terminated option string, once at start-up.
#[unsafe(export_name = "_rjem_malloc_conf")]
pub static ALLOCATOR_OPTIONS: AllocatorOptions = AllocatorOptions(
    c"narenas:1,background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0".as_ptr(),
);

/// The whole command line with the built-in plugins (a program adding its own plugins makes the
/// same call with its registry, see `docs/writing-a-plugin.md`).
fn main() -> std::process::ExitCode {
    kube_descheduler::cli::main_with(kube_descheduler::plugin::Registry::builtin())
}
