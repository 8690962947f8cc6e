//! Switchable, fork-safe parallelism (the shape of huggingface/tokenizers `utils/parallelism.rs`).
//!
//! * `PY_REWARDS_PARALLEL=0|false|no|off` turns rayon off (read on every call);
//!   `PY_REWARDS_NUM_THREADS=N` sizes the crate's own pool (read once, when it is built; `1` = serial).
//! * A forked child cannot use a pool whose threads lived in the parent. The binding calls
//!   [`after_fork_in_child`] from `os.register_at_fork`; if the pool had been built before the fork,
//!   the child scores serially from then on.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

use rayon::prelude::*;
use rayon::ThreadPool;

static POOL: OnceLock<Option<ThreadPool>> = OnceLock::new();
static POOL_USED: AtomicBool = AtomicBool::new(false);
static FORKED_AFTER_USE: AtomicBool = AtomicBool::new(false);

/// Batches smaller than this many bytes are scored on the calling thread.
pub const PARALLEL_MIN_BYTES: usize = 256 * 1024;

/// Environment variable that turns parallel scoring off.
pub const ENV_PARALLEL: &str = "PY_REWARDS_PARALLEL";
/// Environment variable that sets the number of scoring threads.
pub const ENV_NUM_THREADS: &str = "PY_REWARDS_NUM_THREADS";

fn env_threads() -> Option<usize> {
    std::env::var(ENV_NUM_THREADS).ok()?.trim().parse().ok()
}

fn pool() -> Option<&'static ThreadPool> {
    POOL.get_or_init(|| {
        let n = env_threads().unwrap_or(0);
        if n == 1 {
            return None;
        }
        rayon::ThreadPoolBuilder::new()
            .num_threads(n)
            .thread_name(|i| format!("py-rewards-{i}"))
            .build()
            .ok()
    })
    .as_ref()
}

/// Whether a batch would be scored in parallel now.
pub fn parallel_enabled() -> bool {
    if FORKED_AFTER_USE.load(Ordering::Relaxed) {
        return false;
    }
    if let Ok(v) = std::env::var(ENV_PARALLEL) {
        if matches!(
            v.trim().to_ascii_lowercase().as_str(),
            "0" | "false" | "no" | "off"
        ) {
            return false;
        }
    }
    pool().is_some()
}

/// Number of threads a parallel batch uses (1 when serial).
pub fn num_threads() -> usize {
    if parallel_enabled() {
        pool().map_or(1, ThreadPool::current_num_threads)
    } else {
        1
    }
}

/// Called in a forked child: a pool built before the fork has no threads here.
pub fn after_fork_in_child() {
    if POOL_USED.load(Ordering::Relaxed) {
        FORKED_AFTER_USE.store(true, Ordering::Relaxed);
    }
}

/// `(0..n).map(f)`, on the pool when enabled and the batch is big enough; order is kept.
pub fn map_indices<T, F>(n: usize, total_bytes: usize, f: F) -> Vec<T>
where
    T: Send,
    F: Fn(usize) -> T + Sync + Send,
{
    if n > 1 && total_bytes >= PARALLEL_MIN_BYTES && parallel_enabled() {
        if let Some(pool) = pool() {
            POOL_USED.store(true, Ordering::Relaxed);
            // Chunks of roughly 64 KiB keep rayon's per-task cost small next to the scan.
            let min_len = (64 * 1024 / (total_bytes / n).max(1)).clamp(1, 1024);
            return pool.install(|| {
                (0..n)
                    .into_par_iter()
                    .with_min_len(min_len)
                    .map(f)
                    .collect()
            });
        }
    }
    (0..n).map(f).collect()
}

/// A panic inside the pool (at item 12,345 of a parallel batch): the binding's `_debug_panic`
/// test hook (cargo feature `debug-hooks`), which must surface as a Python exception.
#[cfg(any(test, feature = "debug-hooks"))]
pub fn debug_panic() {
    map_indices(1 << 16, PARALLEL_MIN_BYTES, |i| {
        assert!(i != 12_345, "debug panic at item {i}");
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::panic::catch_unwind;

    #[test]
    fn a_pool_panic_reaches_the_caller() {
        // What `_debug_panic` checks from Python: the panic of a pool thread is resumed on the
        // calling thread (where the binding turns it into RewardCorePanic), and the pool still works.
        let err = catch_unwind(debug_panic).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert_eq!(msg, "debug panic at item 12345");
        assert_eq!(map_indices(3, PARALLEL_MIN_BYTES, |i| i * 2), [0, 2, 4]);
    }
}
