//! `Scorer`: a format's compiled tags and scores, with a one-batch cache of the seed-000 scores.
//!
//! TRL calls each reward function separately with the same completions, so the first call scores
//! all four seed-000 columns and keeps them, keyed on the identity of the content and answer `str`
//! objects (holding strong references, so an id cannot be reused); the next calls compare objects
//! by address. Any shape but TRL's, a bad item or a lone surrogate takes the generic path.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString};

use super::convert::{
    answers, as_strs, contents, float_list, same_items, scores_from, walk, Content, TextReader,
};
use super::detach_guarded;
use crate::{parallel, Batch000, Scorer, Tags, SEED000_NAMES};

/// The last seed-000 batch: the strong references keep the compared ids from being reused.
struct Cache000 {
    contents: Vec<Py<PyAny>>,
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

/// Whether `objs` are, in order, exactly the `cached` objects.
fn same<T>(objs: &[Bound<'_, PyString>], cached: &[Py<T>]) -> bool {
    objs.iter()
        .map(Bound::as_ptr)
        .eq(cached.iter().map(Py::as_ptr))
}

/// Whether the contents of `completions` are, in order, exactly the `cached` objects, for an exact
/// list of TRL's shapes (by address, [`walk`]); None for anything else.
fn same_contents(completions: &Bound<'_, PyAny>, cached: &[Py<PyAny>]) -> Option<bool> {
    let list = completions.cast_exact::<PyList>().ok()?;
    let mut want = cached.iter().map(|w| w.as_ptr() as usize);
    let f = |c| matches!(c, Content::Address(a) if want.next() == Some(a));
    let key = intern!(completions.py(), "content");
    let same = list.len() == cached.len() && walk(list, key, false, 0..usize::MAX, f)?;
    Some(same && want.next().is_none())
}

/// Items a serial first call reads and scores at a time, so that they are scored while in cache:
/// reading all 65,536 rollouts first took 3-9 % more CPU (bench/rewards.md, "Thin binding").
const SERIAL_CHUNK: usize = 128;

impl PyScorer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Cache000>>> {
        self.cache.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// All four seed-000 columns of a batch (the answer columns only with answers), from the
    /// cache when the batch holds the very objects it was computed from. The format columns do not
    /// depend on the answers: with `need_answers == false` any batch of the same strings serves
    /// them. The entry is taken out of the lock first (an `Arc`, holding its references), so no
    /// Python code runs under the lock.
    fn batch000(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
        need_answers: bool,
    ) -> PyResult<Arc<Cache000>> {
        let answer = answer.filter(|a| !a.is_none());
        // What the check read through safe PyO3, kept for a miss (an iterator is read only once).
        let (mut objs, mut golds) = (None, None);
        let entry = self.lock().clone();
        if let Some(entry) = entry {
            let same_contents = match same_contents(completions, &entry.contents) {
                Some(same) => same,
                None => same(objs.insert(contents(completions)?), &entry.contents),
            };
            let hit = same_contents
                && (!need_answers
                    || match (answer, &entry.answers) {
                        (Some(a), Some(was)) => match a.cast_exact::<PyList>() {
                            Ok(list) => same_items(list, was),
                            Err(_) => same(golds.insert(answers(a, was.len())?), was),
                        },
                        _ => false,
                    });
            if hit {
                self.hits.fetch_add(1, Relaxed);
                return Ok(entry);
            }
        }
        self.misses.fetch_add(1, Relaxed);
        let fast = match completions.cast_exact::<PyList>() {
            Ok(list) if objs.is_none() => self.first_call(py, list, answer)?,
            _ => None,
        };
        let fresh = Arc::new(if let Some(fresh) = fast {
            fresh
        } else {
            let objs = objs.map_or_else(|| contents(completions), Ok)?;
            if let (None, Some(a)) = (&golds, answer) {
                golds = Some(answers(a, objs.len())?);
            }
            let (texts, strs) = (as_strs(&objs)?, golds.as_deref().map(as_strs).transpose()?);
            let inner = &*self.inner;
            let batch = detach_guarded(py, || inner.batch000(&texts, strs.as_deref()))??;
            let objs = objs.into_iter().map(|s| s.into_any().unbind()).collect();
            Cache000 {
                contents: objs,
                answers: golds.map(|a| a.into_iter().map(Bound::unbind).collect()),
                batch,
            }
        });
        let old = self.lock().replace(Arc::clone(&fresh));
        drop(old); // decref the previous batch's strings outside the lock
        Ok(fresh)
    }

    /// A first call on an exact list of TRL's shapes (and as many answers, if any): each text is
    /// read while the walk holds its object, then scored with the GIL released, in chunks when
    /// serial. None for anything else: the generic path then scores the batch or raises.
    fn first_call(
        &self,
        py: Python<'_>,
        list: &Bound<'_, PyList>,
        answer: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Cache000>> {
        let n = list.len();
        let Ok(golds) = answer.map(|a| answers(a, n)).transpose() else {
            return Ok(None);
        };
        let Ok(strs) = golds.as_deref().map(as_strs).transpose() else {
            return Ok(None);
        };
        let serial = !parallel::parallel_enabled();
        let ch = if serial { SERIAL_CHUNK } else { n.max(1) };
        let (mut objs, mut batch) = (Vec::with_capacity(n), Batch000::empty(golds.is_some()));
        let (mut reader, key) = (TextReader::default(), intern!(py, "content"));
        for start in (0..n).step_by(ch) {
            let mut texts = Vec::with_capacity(ch);
            let all = walk(list, key, true, start..n.min(start + ch), |c| {
                let Content::Str(s) = c else { return false };
                reader.read(s).map(|t| texts.push(t)).is_ok()
            });
            if all != Some(true) {
                return Ok(None);
            }
            let strs = strs.as_deref().map(|a| &a[start..start + texts.len()]);
            let refs: Vec<&str> = texts.iter().map(AsRef::as_ref).collect();
            let inner = &*self.inner;
            batch.extend(detach_guarded(py, || inner.batch000(&refs, strs))??);
            objs.extend(texts.into_iter().map(|t| t.into_object(py)));
        }
        if objs.len() != n || list.len() != n {
            return Ok(None); // a lookup's code changed the list: the generic path reads it again
        }
        let answers = golds.map(|a| a.into_iter().map(Bound::unbind).collect());
        Ok(Some(Cache000 {
            contents: objs,
            answers,
            batch,
        }))
    }

    fn column001(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        f: fn(&Scorer, &str) -> f64,
    ) -> PyResult<Vec<f64>> {
        let contents = contents(completions)?;
        let texts = as_strs(&contents)?;
        let inner = &*self.inner;
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

    /// `check_math_answer` over a batch: the GIL is released while judging.
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
