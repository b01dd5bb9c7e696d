//! Handing freed memory back to the operating system between the phases of an
//! over-budget batch.
//!
//! glibc's allocator keeps memory freed by a thread in that thread's arena for reuse; a
//! staging chunk or a wave of topics frees tens of megabytes at once, and without a trim
//! the process's resident size keeps the high-water mark of every arena. Measured on the
//! historical batch at a budget of a third of it: the live heap peaks under the budget
//! (valgrind massif) while RSS sat at twice that before trimming (BENCHMARKS.md).

/// Returns free pages of every malloc arena to the OS (glibc only; a no-op elsewhere).
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
pub(crate) fn release_free_memory() {
    // SAFETY: `malloc_trim` takes no pointers and only walks the allocator's own arenas
    // under their locks; it is safe to call from any thread at any time.
    unsafe {
        libc::malloc_trim(0);
    }
}

/// Returns free pages of every malloc arena to the OS (glibc only; a no-op elsewhere).
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub(crate) fn release_free_memory() {}
