//! The PyO3 binding `py_rewards._core`: conversion and the call.
//!
//! Arguments are checked and read (`convert`), then the pure core scores the batch with the GIL
//! released, on its switchable pool (`crate::parallel`). A Rust panic, in a pool thread too,
//! becomes `RewardCorePanic`. `scorer` holds the `Scorer` class and its batch cache.
//!
//! Free-threading: `gil_used = true`. The walks over a batch's lists read items borrowed
//! (`convert::walk`, `convert::same_items`), sound only while the GIL keeps other threads from
//! changing the lists, so a free-threaded CPython re-enables the GIL on import (and warns). Little
//! is lost: the scoring runs without the GIL already, and the build is for the stable ABI (abi3),
//! which free-threaded CPython does not offer.

mod convert;
mod scorer;

use std::panic::{catch_unwind, AssertUnwindSafe};

use pyo3::create_exception;
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyString};

use crate::{parallel, unicode, Error, SEED000_NAMES};
use convert::batch_iter;

create_exception!(
    py_rewards._core,
    RewardCorePanic,
    PyRuntimeError,
    "A bug in the Rust reward core (a Rust panic), raised as a normal exception."
);

impl From<Error> for PyErr {
    fn from(err: Error) -> PyErr {
        PyValueError::new_err(err.to_string())
    }
}

/// The message panicked with, as `RewardCorePanic`.
fn panic_err(payload: &(dyn std::any::Any + Send)) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    RewardCorePanic::new_err(format!("reward core panicked: {msg}"))
}

/// Run `f` with the GIL released; a panic (also one in a rayon worker) becomes `RewardCorePanic`.
fn detach_guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .map_err(|payload| panic_err(&*payload))
}

/// Python's `float(s)` as the core computes it (None where Python raises ValueError).
#[pyfunction]
fn py_float(s: &str) -> Option<f64> {
    crate::py_float(s)
}

/// Python's `str.strip()` as the core computes it.
#[pyfunction]
fn py_strip(s: &str) -> &str {
    crate::py_strip(s)
}

/// A `str` argument's text, or None for anything else (a non-str, a lone surrogate).
fn text_of_any<'a>(obj: &'a Bound<'_, PyAny>) -> Option<&'a str> {
    obj.cast::<PyString>().ok()?.to_str().ok()
}

/// Whether `pred` is a correct answer for `gold` (`reward_core::math`); never raises: any
/// argument that is not a `str` is simply not equal.
#[pyfunction]
fn math_equal(py: Python<'_>, pred: &Bound<'_, PyAny>, gold: &Bound<'_, PyAny>) -> PyResult<bool> {
    let (Some(p), Some(g)) = (text_of_any(pred), text_of_any(gold)) else {
        return Ok(false);
    };
    // Short answers: the GIL round trip would cost more than the judgement.
    if p.len() + g.len() < 4096 {
        return catch_unwind(|| crate::math_equal(p, g)).map_err(|e| panic_err(&*e));
    }
    detach_guarded(py, || crate::math_equal(p, g))
}

/// `[math_equal(p, g) for p, g in zip(preds, golds)]` with the GIL released, in parallel when
/// enabled. Items that are not `str` are not equal; lists of different lengths are a ValueError.
#[pyfunction]
fn math_equal_batch(
    py: Python<'_>,
    preds: &Bound<'_, PyAny>,
    golds: &Bound<'_, PyAny>,
) -> PyResult<Vec<bool>> {
    let collect = |seq: &Bound<'_, PyAny>, name: &str| -> PyResult<Vec<Option<String>>> {
        let iter = batch_iter(seq, &format!("{name} must be a list of str"), false)?;
        iter.map(|item| Ok(text_of_any(&item?).map(str::to_owned)))
            .collect()
    };
    let (p, g) = (collect(preds, "preds")?, collect(golds, "golds")?);
    if p.len() != g.len() {
        let (expected, got) = (p.len(), g.len());
        return Err(Error::LengthMismatch {
            what: "golds",
            expected,
            got,
        }
        .into());
    }
    detach_guarded(py, || {
        let total = p.iter().chain(&g).flatten().map(String::len).sum();
        parallel::map_indices(p.len(), total, |i| match (&p[i], &g[i]) {
            (Some(a), Some(b)) => crate::math_equal(a, b),
            _ => false,
        })
    })
}

/// The normalised text of an answer (what `math_equal` compares first).
#[pyfunction]
fn normalize_math(s: &str) -> String {
    crate::math::normalize(s)
}

/// The answer of a completion: between the last `solution_start` and the `solution_end` after
/// it, else the last `\boxed{}`; None when there is neither.
#[pyfunction]
fn extract_math_answer(text: &str, solution_start: &str, solution_end: &str) -> Option<String> {
    crate::math::extract_answer(text, solution_start, solution_end).map(str::to_owned)
}

/// `(parallel enabled, threads, unicode version)`.
#[pyfunction]
fn runtime_info() -> (bool, usize, String) {
    let (major, minor) = unicode::unicode_version();
    (
        parallel::parallel_enabled(),
        parallel::num_threads(),
        format!("{major}.{minor}"),
    )
}

/// Registered with `os.register_at_fork(after_in_child=...)`.
#[pyfunction]
fn _after_fork_in_child() {
    parallel::after_fork_in_child();
}

/// Test hook (cargo feature `debug-hooks`, off in release builds): panics inside the rayon pool
/// with the GIL released, which must surface as `RewardCorePanic`.
#[cfg(feature = "debug-hooks")]
#[pyfunction]
fn _debug_panic(py: Python<'_>) -> PyResult<()> {
    detach_guarded(py, parallel::debug_panic)
}

#[pymodule(gil_used = true)]
#[pyo3(name = "_core")]
fn core_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    // `\d` and float() follow the running Python's Unicode tables.
    let version: String = py
        .import("unicodedata")?
        .getattr("unidata_version")?
        .extract()?;
    let mut parts = version.split('.').map(|p| p.parse::<u32>().unwrap_or(0));
    unicode::set_unicode_version(parts.next().unwrap_or(0), parts.next().unwrap_or(0));

    m.add_class::<scorer::PyScorer>()?;
    m.add("RewardCorePanic", py.get_type::<RewardCorePanic>())?;
    m.add("SEED000_NAMES", SEED000_NAMES.to_vec())?;
    m.add("ENV_PARALLEL", parallel::ENV_PARALLEL)?;
    m.add("ENV_NUM_THREADS", parallel::ENV_NUM_THREADS)?;
    m.add_function(wrap_pyfunction!(py_float, m)?)?;
    m.add_function(wrap_pyfunction!(py_strip, m)?)?;
    m.add_function(wrap_pyfunction!(runtime_info, m)?)?;
    m.add_function(wrap_pyfunction!(math_equal, m)?)?;
    m.add_function(wrap_pyfunction!(math_equal_batch, m)?)?;
    m.add_function(wrap_pyfunction!(normalize_math, m)?)?;
    m.add_function(wrap_pyfunction!(extract_math_answer, m)?)?;
    #[cfg(feature = "debug-hooks")]
    m.add_function(wrap_pyfunction!(_debug_panic, m)?)?;
    let after_fork = wrap_pyfunction!(_after_fork_in_child, m)?;
    m.add_function(after_fork.clone())?;
    let kwargs = PyDict::new(py);
    kwargs.set_item("after_in_child", after_fork)?;
    py.import("os")?
        .getattr("register_at_fork")?
        .call((), Some(&kwargs))?;
    Ok(())
}
