//! Switchable, fork-safe parallelism (the shape of huggingface/tokenizers `utils/parallelism.rs`).
//!
//! * `PY_REWARDS_PARALLEL=0|false|no|off` turns rayon off (read on every call);
//!   `PY_REWARDS_NUM_THREADS=N` sizes the crate's own pool (read once, when it is built; `1` = serial).
//! * A forked child cannot use a pool whose threads lived in the parent. The binding calls
//!   [`after_fork_in_child`] from `os.register_at_fork`; if the pool had been built before the fork,
//!   the child scores serially from then on.

use std::any::Any;
use std::collections::VecDeque;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Condvar, Mutex, OnceLock};

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

/// Chunks produced but not yet taken, consumers running, chunks done (see [`overlapped`]).
struct Queue {
    pending: VecDeque<usize>,
    active: usize,
    done: usize,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `(0..n).map(produce).map(consume)`, with the production overlapped with the consumption.
///
/// `produce(k)` runs on the calling thread, in order (it may need a lock only that thread holds,
/// such as the GIL); each produced chunk becomes one pool job that `consume`s it, so pool threads
/// never wait for the producer (several callers can share the pool). When production is over the
/// calling thread runs `release(wait)`: `release` must call `wait` (e.g. with the GIL released),
/// which consumes what is left and returns once every chunk is done. When parallelism is off or
/// `n < 2`, each chunk is produced, then consumed inside `release`, in turn.
///
/// The first `produce` error stops the production and is returned; a panic in `consume` is
/// resumed on the calling thread once every job has stopped.
#[allow(clippy::too_many_lines)] // one protocol, easier to check in one place
pub fn overlapped<T, R, E>(
    n: usize,
    mut produce: impl FnMut(usize) -> Result<T, E>,
    consume: impl Fn(&T) -> R + Sync,
    release: impl Fn(&(dyn Fn() + Sync)),
) -> Result<Vec<R>, E>
where
    T: Send + Sync,
    R: Send + Sync,
{
    let pool = if n > 1 && parallel_enabled() {
        pool()
    } else {
        None
    };
    let Some(pool) = pool else {
        // Serial: each chunk is consumed right after it is produced (cache-hot, little memory).
        let mut out = Vec::with_capacity(n);
        for k in 0..n {
            let t = produce(k)?;
            let r = OnceLock::new();
            release(&|| {
                let _ = r.set(consume(&t));
            });
            out.push(r.into_inner().expect("`release` calls `wait`"));
        }
        return Ok(out);
    };
    POOL_USED.store(true, Ordering::Relaxed);

    let slots: Vec<OnceLock<T>> = (0..n).map(|_| OnceLock::new()).collect();
    let out: Vec<OnceLock<R>> = (0..n).map(|_| OnceLock::new()).collect();
    // At most `limit` pool threads consume while this thread produces (so the producer, the
    // critical path, keeps a core). A consumer job is spawned only when fewer than `limit` are
    // running, and it drains the queue: no job per chunk, no pool thread woken for nothing.
    let limit = pool.current_num_threads().saturating_sub(1).max(1);
    let queue = Mutex::new(Queue {
        pending: VecDeque::with_capacity(n),
        active: 0,
        done: 0,
    });
    let changed = Condvar::new();
    let panic: Mutex<Option<Box<dyn Any + Send>>> = Mutex::new(None);
    let run = |k: usize| {
        let chunk = slots[k].get().expect("set before it was queued");
        match catch_unwind(AssertUnwindSafe(|| consume(chunk))) {
            Ok(r) => {
                let _ = out[k].set(r);
            }
            Err(payload) => {
                lock(&panic).get_or_insert(payload);
            }
        }
        lock(&queue).done += 1;
        changed.notify_all();
    };
    let run = &run;
    let job = || loop {
        let next = {
            let mut q = lock(&queue);
            let next = q.pending.pop_front();
            if next.is_none() {
                q.active -= 1;
            }
            next
        };
        match next {
            Some(k) => run(k),
            None => return,
        }
    };
    let job = &job;

    let produced = pool.in_place_scope(|scope| {
        let mut produced = 0;
        let mut result = Ok(());
        for (k, slot) in slots.iter().enumerate() {
            match produce(k) {
                Ok(t) => {
                    let _ = slot.set(t);
                    produced += 1;
                    let spawn = {
                        let mut q = lock(&queue);
                        q.pending.push_back(k);
                        let spawn = q.active < limit;
                        if spawn {
                            q.active += 1;
                        }
                        spawn
                    };
                    if spawn {
                        scope.spawn(move |_| job());
                    }
                }
                Err(e) => {
                    result = Err(e);
                    break;
                }
            }
        }
        release(&|| {
            loop {
                let next = lock(&queue).pending.pop_front();
                match next {
                    Some(k) => run(k),
                    None => break,
                }
            }
            let mut q = lock(&queue);
            while q.done < produced {
                q = changed
                    .wait(q)
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            }
        });
        result
    });
    if let Some(payload) = lock(&panic).take() {
        resume_unwind(payload);
    }
    produced?;
    Ok(out
        .into_iter()
        .map(|o| o.into_inner().expect("every chunk consumed"))
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(n: usize, fail_at: Option<usize>) -> Result<Vec<usize>, usize> {
        overlapped(
            n,
            |k| {
                if Some(k) == fail_at {
                    Err(k)
                } else {
                    Ok(k * 10)
                }
            },
            |&t| t + 1,
            |wait| wait(),
        )
    }

    #[test]
    fn overlapped_keeps_order() {
        for n in [0, 1, 2, 7, 300] {
            let want: Vec<usize> = (0..n).map(|k| k * 10 + 1).collect();
            assert_eq!(run(n, None), Ok(want));
        }
    }

    #[test]
    fn overlapped_stops_at_the_first_produce_error() {
        assert_eq!(run(300, Some(123)), Err(123));
        assert_eq!(run(1, Some(0)), Err(0));
    }

    #[test]
    fn a_pool_panic_reaches_the_caller() {
        // What `_debug_panic` checks from Python: the panic of a pool thread is resumed on the
        // calling thread (where the binding turns it into RewardCorePanic), and the pool still works.
        let err = catch_unwind(debug_panic).unwrap_err();
        let msg = err.downcast_ref::<String>().cloned().unwrap_or_default();
        assert_eq!(msg, "debug panic at item 12345");
        assert_eq!(map_indices(3, PARALLEL_MIN_BYTES, |i| i * 2), [0, 2, 4]);
    }

    #[test]
    fn overlapped_resumes_a_consume_panic() {
        let r = catch_unwind(|| {
            overlapped(
                64,
                Ok::<usize, ()>,
                |&k| assert!(k != 40, "boom at {k}"),
                |wait| wait(),
            )
        });
        assert!(r.is_err());
    }
}
