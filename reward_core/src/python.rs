//! The thin PyO3 binding: `py_rewards._core`.
//!
//! Inputs are checked and borrowed here (the completions' `str` objects are read in place as UTF-8,
//! no copy for ASCII/compact strings), then the GIL is released while the core scores the batch on
//! the rayon pool. TRL calls each reward function separately with the same completions, so a
//! `Scorer` keeps the last seed-000 batch (all four columns from one pass) keyed on the identity of
//! the content and answer `str` objects, holding strong references so an id cannot be reused.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::{Arc, Mutex};

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};
use pyo3::{create_exception, intern};

use crate::{parallel, unicode, Batch000, Error, Scorer, Scores, Tags, SEED000_NAMES};

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

/// Run `f` with the GIL released; a panic (also one in a rayon worker) becomes `RewardCorePanic`.
fn detach_guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .map_err(|payload| {
            let msg = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_owned());
            RewardCorePanic::new_err(format!("reward core panicked: {msg}"))
        })
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// The content `str` of each completion: a `str`, or a list of chat messages whose first message's
/// `content` is used (the seeds' `completion[0]["content"]`).
fn contents<'py>(completions: &Bound<'py, PyAny>) -> PyResult<Vec<Bound<'py, PyString>>> {
    let py = completions.py();
    if completions.is_none() {
        return Err(PyValueError::new_err("completions is required (got None)"));
    }
    if completions.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "completions must be a list of completions, got a single str",
        ));
    }
    let iter = completions.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "completions must be a list of completions, got {}",
            type_name(completions)
        ))
    })?;
    let key = intern!(py, "content");
    let mut out = Vec::with_capacity(completions.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        out.push(content_at(i, item?, key)?);
    }
    Ok(out)
}

/// `item` itself if it is a `str`, else `item[0]["content"]` (which must be a `str`).
fn content_at<'py>(
    i: usize,
    item: Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyString>> {
    let item = match item.cast_into::<PyString>() {
        Ok(s) => return Ok(s),
        Err(e) => e.into_inner(),
    };
    // Fast path for TRL's shape, a list of message dicts (typed list/dict access, no generic
    // __getitem__); anything else indexable goes through item[0]["content"].
    let content = match item.cast::<PyList>() {
        Ok(list) => match list
            .get_item(0)
            .ok()
            .and_then(|m| m.cast_into::<PyDict>().ok())
        {
            Some(message) => message.get_item(key)?,
            None => None,
        },
        Err(_) => None,
    };
    let content = match content {
        Some(c) => c,
        None => item.get_item(0).and_then(|m| m.get_item(key)).map_err(|_| {
            PyTypeError::new_err(format!(
                "completions[{i}] must be a str or a list of chat messages with a str 'content', got {}",
                type_name(&item)
            ))
        })?,
    };
    content.cast_into::<PyString>().map_err(|e| {
        PyTypeError::new_err(format!(
            "completions[{i}][0]['content'] must be str, got {}",
            type_name(e.into_inner().as_any())
        ))
    })
}

/// Whether `completions` holds exactly the cached content objects, in order (pointer compares; any
/// malformed item simply does not match, and the full path reports it).
fn contents_match(completions: &Bound<'_, PyAny>, cached: &[Py<PyString>]) -> bool {
    if completions.is_instance_of::<PyString>() || completions.len().ok() != Some(cached.len()) {
        return false;
    }
    let Ok(iter) = completions.try_iter() else {
        return false;
    };
    let key = intern!(completions.py(), "content");
    let mut n = 0;
    for (i, item) in iter.enumerate() {
        let same = item
            .and_then(|item| content_at(i, item, key))
            .is_ok_and(|s| cached.get(i).is_some_and(|c| c.as_ptr() == s.as_ptr()));
        if !same {
            return false;
        }
        n += 1;
    }
    n == cached.len()
}

/// Whether `answer` holds exactly the cached answer objects, in order.
fn answers_match(answer: &Bound<'_, PyAny>, cached: &[Py<PyString>]) -> bool {
    if answer.is_instance_of::<PyString>() || answer.len().ok() != Some(cached.len()) {
        return false;
    }
    let Ok(iter) = answer.try_iter() else {
        return false;
    };
    let mut n = 0;
    for (item, c) in iter.zip(cached) {
        if !item.is_ok_and(|a| a.as_ptr() == c.as_ptr()) {
            return false;
        }
        n += 1;
    }
    n == cached.len()
}

/// The answers as `str`s, same length as the completions.
fn answers<'py>(answer: &Bound<'py, PyAny>, n: usize) -> PyResult<Vec<Bound<'py, PyString>>> {
    if answer.is_instance_of::<PyString>() {
        return Err(PyTypeError::new_err(
            "answer must be a list of str (one per completion), got a single str",
        ));
    }
    let iter = answer.try_iter().map_err(|_| {
        PyTypeError::new_err(format!(
            "answer must be a list of str (one per completion), got {}",
            type_name(answer)
        ))
    })?;
    let mut out = Vec::with_capacity(n);
    for (i, item) in iter.enumerate() {
        let item = item?;
        match item.cast_into::<PyString>() {
            Ok(s) => out.push(s),
            Err(e) => {
                return Err(PyTypeError::new_err(format!(
                    "answer[{i}] must be str, got {}",
                    type_name(e.into_inner().as_any())
                )))
            }
        }
    }
    if out.len() != n {
        return Err(Error::LengthMismatch {
            what: "answer",
            expected: n,
            got: out.len(),
        }
        .into());
    }
    Ok(out)
}

fn as_strs<'a>(objs: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    objs.iter().map(PyStringMethods::to_str).collect()
}

/// The last seed-000 batch: the strong references keep the compared ids from being reused.
struct Cache000 {
    contents: Vec<Py<PyString>>,
    answers: Option<Vec<Py<PyString>>>,
    batch: Batch000,
}

fn scores_from(mapping: Option<&Bound<'_, PyAny>>) -> PyResult<Scores> {
    let mut s = Scores::default();
    let Some(mapping) = mapping else { return Ok(s) };
    if mapping.is_none() {
        return Ok(s);
    }
    let dict = mapping
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("scores must be a dict of floats"))?;
    for (k, v) in dict.iter() {
        let key: String = k.extract()?;
        let value: f64 = v.extract()?;
        let slot = match key.as_str() {
            "exact" => &mut s.exact,
            "approx_hit" => &mut s.approx_hit,
            "approx_miss" => &mut s.approx_miss,
            "answer_exact" => &mut s.answer_exact,
            "answer_strip" => &mut s.answer_strip,
            "answer_ratio_10" => &mut s.answer_ratio_10,
            "answer_ratio_20" => &mut s.answer_ratio_20,
            "answer_wrong" => &mut s.answer_wrong,
            "answer_unparsable" => &mut s.answer_unparsable,
            "answer_missing" => &mut s.answer_missing,
            "numeric_hit" => &mut s.numeric_hit,
            "numeric_miss" => &mut s.numeric_miss,
            "numeric_unparsable" => &mut s.numeric_unparsable,
            "numeric_missing" => &mut s.numeric_missing,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown reward score {other:?}"
                )))
            }
        };
        *slot = value;
    }
    Ok(s)
}

/// Compiled tags + scores of one format, with a one-batch cache of the seed-000 scores.
#[pyclass(frozen, module = "py_rewards._core", name = "Scorer")]
struct PyScorer {
    // Boxed: memchr's AVX2 searchers hold 32-byte-aligned vectors, and a Python object's memory is
    // only 16-byte aligned (an inline `Scorer` made `vmovdqa` fault on a misaligned load).
    inner: Box<Scorer>,
    cache: Mutex<Option<Arc<Cache000>>>,
    hits: std::sync::atomic::AtomicU64,
    misses: std::sync::atomic::AtomicU64,
}

impl PyScorer {
    /// The cached batch if `completions` (and, when needed, `answer`) are the very objects it was
    /// computed from. The entry is taken out of the lock first (an `Arc`, holding its references),
    /// so no Python code runs under the lock.
    fn lookup(
        &self,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
        need_answers: bool,
    ) -> Option<Arc<Cache000>> {
        let entry = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()?;
        if !contents_match(completions, &entry.contents) {
            return None;
        }
        if need_answers {
            match (answer, &entry.answers) {
                (Some(a), Some(was)) if answers_match(a, was) => {}
                _ => return None,
            }
        }
        Some(entry)
    }

    /// All four seed-000 columns of a batch (the answer columns only with answers), from the
    /// cache when the batch is the cached one. The format columns do not depend on the answers:
    /// with `need_answers == false` any batch of the same strings serves them.
    fn batch000(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
        need_answers: bool,
    ) -> PyResult<Arc<Cache000>> {
        use std::sync::atomic::Ordering::Relaxed;
        if let Some(hit) = self.lookup(completions, answer, need_answers) {
            self.hits.fetch_add(1, Relaxed);
            return Ok(hit);
        }
        self.misses.fetch_add(1, Relaxed);
        let contents = contents(completions)?;
        let answers = match answer {
            Some(a) if !a.is_none() => Some(answers(a, contents.len())?),
            _ => None,
        };
        let texts = as_strs(&contents)?;
        let ans = answers.as_deref().map(as_strs).transpose()?;
        let inner = &self.inner;
        let batch = detach_guarded(py, || inner.batch000(&texts, ans.as_deref()))??;
        drop(texts);
        drop(ans);
        let fresh = Arc::new(Cache000 {
            contents: contents.into_iter().map(Bound::unbind).collect(),
            answers: answers.map(|a| a.into_iter().map(Bound::unbind).collect()),
            batch,
        });
        let old = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(Arc::clone(&fresh));
        drop(old); // decref the previous batch's strings outside the lock
        Ok(fresh)
    }

    fn column001(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        f: fn(&Scorer, &str) -> f64,
    ) -> PyResult<Vec<f64>> {
        let contents = contents(completions)?;
        let texts = as_strs(&contents)?;
        let inner = &self.inner;
        detach_guarded(py, || inner.batch001(&texts, f))
    }
}

fn column_index(column: &Bound<'_, PyAny>) -> PyResult<usize> {
    if let Ok(i) = column.extract::<usize>() {
        if i < 4 {
            return Ok(i);
        }
    } else if let Ok(name) = column.extract::<String>() {
        if let Some(i) = SEED000_NAMES.iter().position(|n| *n == name) {
            return Ok(i);
        }
    }
    Err(PyValueError::new_err(format!(
        "column must be 0-3 or one of {SEED000_NAMES:?}, got {column}"
    )))
}

#[pymethods]
impl PyScorer {
    #[new]
    #[pyo3(signature = (reasoning_start, reasoning_end, solution_start, solution_end, scores=None))]
    fn new(
        reasoning_start: &str,
        reasoning_end: &str,
        solution_start: &str,
        solution_end: &str,
        scores: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let tags = Tags::new(reasoning_start, reasoning_end, solution_start, solution_end);
        Ok(Self {
            inner: Box::new(Scorer::new(tags, scores_from(scores)?)?),
            cache: Mutex::new(None),
            hits: 0.into(),
            misses: 0.into(),
        })
    }

    /// One seed-000 reward column (index 0-3 or its name) as a list of floats.
    #[pyo3(signature = (completions, answer=None, column=None))]
    fn seed000_column(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
        column: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Vec<f64>> {
        let j = match column {
            Some(c) => column_index(c)?,
            None => 0,
        };
        if j >= 2 && answer.map_or(true, Bound::is_none) {
            return Err(PyValueError::new_err(format!(
                "{} needs answer= (one gold answer per completion), got None",
                SEED000_NAMES[j]
            )));
        }
        let batch = match self.batch000(py, completions, answer, j >= 2) {
            // The format rewards do not read the answers (the seed accepts anything there): score
            // without them rather than fail on a bad answer column.
            // (A completions error simply comes back from the second call.)
            Err(_) if j < 2 && answer.is_some_and(|a| !a.is_none()) => {
                self.batch000(py, completions, None, false)?
            }
            other => other?,
        };
        Ok(batch
            .batch
            .column(j)
            .map(<[f64]>::to_vec)
            .unwrap_or_default())
    }

    /// All four seed-000 columns: a dict name -> list[float] (answer columns None without answers).
    #[pyo3(signature = (completions, answer=None))]
    fn seed000<'py>(
        &self,
        py: Python<'py>,
        completions: &Bound<'py, PyAny>,
        answer: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let with_answers = answer.is_some_and(|a| !a.is_none());
        let batch = self.batch000(py, completions, answer, with_answers)?;
        let out = PyDict::new(py);
        for (j, name) in SEED000_NAMES.iter().enumerate() {
            // Without answers this call has no answer columns, even if the cached batch has them.
            let column = if j >= 2 && !with_answers {
                None
            } else {
                batch.batch.column(j)
            };
            out.set_item(name, column.map(<[f64]>::to_vec))?;
        }
        Ok(out)
    }

    /// Seed 001 `strict_format_reward_func` over a batch.
    fn strict_format(&self, py: Python<'_>, completions: &Bound<'_, PyAny>) -> PyResult<Vec<f64>> {
        self.column001(py, completions, Scorer::strict_format001)
    }

    /// Seed 001 `int_parsable_reward_func` over a batch.
    fn int_parsable(&self, py: Python<'_>, completions: &Bound<'_, PyAny>) -> PyResult<Vec<f64>> {
        self.column001(py, completions, Scorer::int_parsable001)
    }

    /// Seed 001's extracted answers (`""` where there is none), for the cosine reward.
    fn extract_boxed(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<String>> {
        let contents = contents(completions)?;
        let texts = as_strs(&contents)?;
        let inner = &self.inner;
        detach_guarded(py, || {
            texts
                .iter()
                .map(|t| inner.extract001(t).to_owned())
                .collect()
        })
    }

    /// `FORMAT_REGEX.search(text).group(1)` or None.
    fn format_group(&self, text: &str) -> Option<String> {
        self.inner.scanner().scan000(text).format.map(str::to_owned)
    }

    /// `NUMERIC_REGEX.search(text).group(1)` or None.
    fn numeric_group(&self, text: &str) -> Option<String> {
        self.inner
            .scanner()
            .scan000(text)
            .numeric
            .map(str::to_owned)
    }

    /// Drop the cached batch (and the references it holds).
    fn clear_cache(&self) {
        let old = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        drop(old);
    }

    /// `(hits, misses, cached batch size)`.
    fn cache_info(&self) -> (u64, u64, usize) {
        use std::sync::atomic::Ordering::Relaxed;
        let size = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map_or(0, |c| c.contents.len());
        (self.hits.load(Relaxed), self.misses.load(Relaxed), size)
    }

    #[getter]
    fn tags(&self) -> (String, String, String, String) {
        let t = self.inner.tags();
        (
            t.reasoning_start.clone(),
            t.reasoning_end.clone(),
            t.solution_start.clone(),
            t.solution_end.clone(),
        )
    }

    fn __repr__(&self) -> String {
        let t = self.inner.tags();
        format!(
            "Scorer({:?}, {:?}, {:?}, {:?})",
            t.reasoning_start, t.reasoning_end, t.solution_start, t.solution_end
        )
    }
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

/// Test hook: panics inside the rayon pool with the GIL released (must surface as RewardCorePanic).
#[pyfunction]
fn _debug_panic(py: Python<'_>) -> PyResult<()> {
    detach_guarded(py, || {
        let texts: Vec<&str> = vec!["x"; 1 << 16];
        let total = parallel::PARALLEL_MIN_BYTES;
        parallel::map_indices(texts.len(), total, |i| {
            assert!(i != 12_345, "debug panic at item {i}");
        });
    })
}

#[pymodule]
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

    m.add_class::<PyScorer>()?;
    m.add("RewardCorePanic", py.get_type::<RewardCorePanic>())?;
    m.add("SEED000_NAMES", SEED000_NAMES.to_vec())?;
    m.add("ENV_PARALLEL", parallel::ENV_PARALLEL)?;
    m.add("ENV_NUM_THREADS", parallel::ENV_NUM_THREADS)?;
    m.add_function(wrap_pyfunction!(py_float, m)?)?;
    m.add_function(wrap_pyfunction!(py_strip, m)?)?;
    m.add_function(wrap_pyfunction!(runtime_info, m)?)?;
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
