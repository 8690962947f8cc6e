//! `Scorer`: a format's compiled tags and scores, with a one-batch cache of the seed-000 scores.
//!
//! TRL calls each reward function separately with the same completions, so the first call scores
//! all four seed-000 columns and keeps them, keyed on the identity of the content and answer `str`
//! objects (holding strong references, so an id cannot be reused); the next calls compare objects
//! by address.
//!
//! A first call on an exact list of TRL's shapes reads the texts chunk by chunk under the GIL
//! (`walk_borrowed`, `TextReader`) while the pool scores the chunks already read with the GIL
//! released (`Scorer::batch000_overlapped`). Any other shape, a bad item or a lone surrogate takes
//! the generic path, which scores it or raises.

use std::ops::Range;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyList, PyString};

use super::convert::{
    answers, as_strs, content_at, content_str, contents, contents_staged, float_list,
    same_contents_borrowed, same_items_borrowed, scores_from, walk_borrowed, Content, Take, Text,
    TextReader,
};
use super::{detach_guarded, panic_err};
use crate::{Batch000, Scorer, Tags, SEED000_NAMES};

/// The last seed-000 batch: the strong references keep the compared ids from being reused.
struct Cache000 {
    contents: Vec<Py<PyString>>,
    answers: Option<Vec<Py<PyString>>>,
    batch: Batch000,
}

/// Compiled tags + scores of one format, with a one-batch cache of the seed-000 scores.
#[pyclass(frozen, module = "py_rewards._core", name = "Scorer")]
pub(crate) struct PyScorer {
    // Boxed: memchr's AVX2 searchers hold 32-byte-aligned vectors, and a Python object's memory is
    // only 16-byte aligned (an inline `Scorer` made `vmovdqa` fault on a misaligned load).
    inner: Box<Scorer>,
    cache: Mutex<Option<Arc<Cache000>>>,
    hits: AtomicU64,
    misses: AtomicU64,
}

/// Whether `batch` holds, in order, exactly the `cached` objects, `pick` giving the object of an
/// item (pointer compares; anything malformed simply does not match, the full path reports it).
fn same_objects<'py>(
    batch: &Bound<'py, PyAny>,
    cached: &[Py<PyString>],
    pick: impl Fn(usize, Bound<'py, PyAny>) -> Option<Bound<'py, PyString>>,
) -> bool {
    if batch.is_instance_of::<PyString>() || batch.len().ok() != Some(cached.len()) {
        return false;
    }
    let Ok(iter) = batch.try_iter() else {
        return false;
    };
    let mut n = 0;
    for (i, item) in iter.enumerate() {
        let want = cached.get(i).map(Py::as_ptr);
        if want.is_none() || item.ok().and_then(|it| pick(i, it)).map(|s| s.as_ptr()) != want {
            return false;
        }
        n += 1;
    }
    n == cached.len()
}

/// [`same_objects`] for the contents of completions; an exact list through the staged walks.
fn same_contents(completions: &Bound<'_, PyAny>, cached: &[Py<PyString>]) -> bool {
    let key = intern!(completions.py(), "content");
    let Ok(list) = completions.cast_exact::<PyList>() else {
        return same_objects(completions, cached, |i, it| content_at(i, it, key).ok());
    };
    if let Some(same) = same_contents_borrowed(list, cached, key) {
        return same;
    }
    let typed = |m: &Bound<'_, PyDict>| content_str(m, key).map(|c| c.as_ptr() as usize);
    list.len() == cached.len()
        && contents_staged(
            list,
            0..cached.len(),
            key,
            typed,
            |s| s.as_ptr() as usize,
            |i, c| c == Some(cached[i].as_ptr() as usize),
        )
}

impl PyScorer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Cache000>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The cached batch if `completions` (and, when needed, `answer`) are the very objects it was
    /// computed from. The entry is taken out of the lock first (an `Arc`, holding its references),
    /// so no Python code runs under the lock.
    fn lookup(
        &self,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
        need_answers: bool,
    ) -> Option<Arc<Cache000>> {
        let entry = self.lock().clone()?;
        if !same_contents(completions, &entry.contents) {
            return None;
        }
        if need_answers {
            let (Some(a), Some(was)) = (answer, &entry.answers) else {
                return None;
            };
            let same = match a.cast_exact::<PyList>() {
                Ok(list) => same_items_borrowed(list, was),
                Err(_) => same_objects(a, was, |_, it| it.cast_into::<PyString>().ok()),
            };
            if !same {
                return None;
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
        if let Some(hit) = self.lookup(completions, answer, need_answers) {
            self.hits.fetch_add(1, Relaxed);
            return Ok(hit);
        }
        self.misses.fetch_add(1, Relaxed);
        let fresh = match self.fresh_overlapped(py, completions, answer)? {
            Some(entry) => Arc::new(entry),
            None => Arc::new(self.fresh_generic(py, completions, answer)?),
        };
        let old = self.lock().replace(Arc::clone(&fresh));
        drop(old); // decref the previous batch's strings outside the lock
        Ok(fresh)
    }

    /// A first call on an exact list (answers, if any, an exact list of `str` of the same length):
    /// the texts are read in chunks under the GIL while the pool scores the chunks already read.
    /// `Ok(None)` at the first item that is not a plain completion: the generic path then scores
    /// the batch or raises the right error.
    fn fresh_overlapped<'py>(
        &self,
        py: Python<'py>,
        completions: &Bound<'py, PyAny>,
        answer: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Option<Cache000>> {
        let Ok(list) = completions.cast_exact::<PyList>() else {
            return Ok(None);
        };
        let n = list.len();
        let answers = match answer.filter(|a| !a.is_none()) {
            None => None,
            Some(a) => match a.cast_exact::<PyList>().ok().and_then(|a| texts_of(a, n)) {
                Some(t) => Some(t),
                None => return Ok(None),
            },
        };
        let key = intern!(py, "content");
        let mut objs = Vec::with_capacity(n);
        let mut reader = TextReader::new(py)?;
        // `objs` keeps the content objects for the cache (an ASCII text also holds its own).
        let read = |range: Range<usize>| -> Result<Vec<Text>, ()> {
            let mut texts = Vec::with_capacity(range.len());
            let all = walk_borrowed(list, range, key, Take::Reference, |_, c| {
                let Content::Str(c) = c else { return false };
                objs.push(c.clone().unbind());
                reader.read(c).map(|t| texts.push(t)).is_some()
            });
            (all == Some(true)).then_some(texts).ok_or(())
        };
        let ans = answers.as_ref().map(|(_, t)| t.as_slice());
        let inner = &*self.inner;
        let batch = catch_unwind(AssertUnwindSafe(|| {
            inner.batch000_overlapped(n, ans, read, |wait| py.detach(wait))
        }));
        match batch {
            Err(payload) => Err(panic_err(&*payload)),
            Ok(Err(())) => Ok(None),
            Ok(Ok(batch)) => Ok(Some(Cache000 {
                contents: objs,
                answers: answers.map(|(objs, _)| objs),
                batch,
            })),
        }
    }

    /// A first call on any iterable (and the error messages of a bad batch).
    fn fresh_generic(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Cache000> {
        let contents = contents(completions)?;
        let answers = match answer.filter(|a| !a.is_none()) {
            Some(a) => Some(answers(a, contents.len())?),
            None => None,
        };
        let texts = as_strs(&contents)?;
        let ans = answers.as_deref().map(as_strs).transpose()?;
        let inner = &self.inner;
        let batch = detach_guarded(py, || inner.batch000(&texts, ans.as_deref()))??;
        drop((texts, ans));
        Ok(Cache000 {
            contents: contents.into_iter().map(Bound::unbind).collect(),
            answers: answers.map(|a| a.into_iter().map(Bound::unbind).collect()),
            batch,
        })
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

/// The `n` items of an exact list of `str`s (the objects and their UTF-8); None for anything else.
fn texts_of(list: &Bound<'_, PyList>, n: usize) -> Option<(Vec<Py<PyString>>, Vec<PyBackedStr>)> {
    if list.len() != n {
        return None;
    }
    let mut objs = Vec::with_capacity(n);
    let mut texts = Vec::with_capacity(n);
    for item in list {
        let s = item.cast_into::<PyString>().ok()?;
        objs.push(s.clone().unbind());
        texts.push(PyBackedStr::try_from(s).ok()?);
    }
    Some((objs, texts))
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
    fn seed000_column<'py>(
        &self,
        py: Python<'py>,
        completions: &Bound<'py, PyAny>,
        answer: Option<&Bound<'py, PyAny>>,
        column: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyList>> {
        let j = column.map_or(Ok(0), column_index)?;
        let with_answers = answer.is_some_and(|a| !a.is_none());
        if j >= 2 && !with_answers {
            return Err(PyValueError::new_err(format!(
                "{} needs answer= (one gold answer per completion), got None",
                SEED000_NAMES[j]
            )));
        }
        let batch = match self.batch000(py, completions, answer, j >= 2) {
            // The format rewards do not read the answers (the seed accepts anything there): score
            // without them rather than fail on a bad answer column. (A completions error simply
            // comes back from the second call.)
            Err(_) if j < 2 && with_answers => self.batch000(py, completions, None, false)?,
            other => other?,
        };
        float_list(py, batch.batch.column(j).unwrap_or_default())
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
            let column = (j < 2 || with_answers)
                .then(|| batch.batch.column(j))
                .flatten();
            out.set_item(name, column.map(|c| float_list(py, c)).transpose()?)?;
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

    /// `check_math_answer` over a batch (issue #13): the GIL is released while judging.
    fn check_math(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<f64>> {
        let contents = contents(completions)?;
        if answer.is_none() {
            return Err(PyValueError::new_err(
                "check_math_answer needs answer= (one gold answer per completion), got None",
            ));
        }
        let answers = answers(answer, contents.len())?;
        let texts = as_strs(&contents)?;
        let golds = as_strs(&answers)?;
        let inner = &self.inner;
        Ok(detach_guarded(py, || inner.batch_math(&texts, &golds))??)
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
        let old = self.lock().take();
        drop(old);
    }

    /// `(hits, misses, cached batch size)`.
    fn cache_info(&self) -> (u64, u64, usize) {
        let size = self.lock().as_ref().map_or(0, |c| c.contents.len());
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
