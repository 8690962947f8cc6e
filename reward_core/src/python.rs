//! The thin PyO3 binding: `py_rewards._core`.
//!
//! Inputs are checked and borrowed here, then the core scores the batch with the GIL released.
//! TRL calls each reward function separately with the same completions, so a `Scorer` keeps the
//! last seed-000 batch (all four columns from one pass) keyed on the identity of the content and
//! answer `str` objects, holding strong references so an id cannot be reused.
//!
//! On TRL's shapes (exact lists of `str` or of message lists of dicts) a first call walks the list
//! with stable-ABI C calls, 16 items at a time in prefetching stages, in chunks: ASCII strings are
//! read in place (CPython's UTF-8 is their data), other strings are copied as UCS-4 under the GIL
//! and encoded to UTF-8 on the pool. While this thread reads chunk k+1 (GIL held), pool threads
//! scan chunk k (GIL not needed), see `parallel::overlapped`. A cached call compares the content
//! (and answer) objects by address, in the same staged walk. Anything else (other iterables, str
//! subclasses, bad items, lone surrogates) takes the generic path, which scores it or raises the
//! error.

// The hot loops use CPython's stable-ABI C calls directly (borrowed references, pointer compares,
// no per-item PyO3 downcasts): each `unsafe` block says which reference keeps what alive.
#![allow(unsafe_code)]
// Indices are below a list's length and lengths come from CPython (0..=isize::MAX).
#![allow(clippy::cast_possible_wrap, clippy::cast_sign_loss)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr::{self, addr_of_mut};
use std::sync::{Arc, Mutex};

use pyo3::ffi;

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFrozenSet, PyList, PyMapping, PySet, PyString};
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

/// The message panicked with, as `RewardCorePanic`.
fn panic_err(payload: &(dyn std::any::Any + Send)) -> PyErr {
    let msg = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned());
    RewardCorePanic::new_err(format!("reward core panicked: {msg}"))
}

/// Items per chunk of the overlapped first pass (~0.5 MB of typical rollouts; small batches in
/// a few chunks).
fn chunk_len(n: usize) -> usize {
    (n / 512).clamp(8, 128)
}

/// Run `f` with the GIL released; a panic (also one in a rayon worker) becomes `RewardCorePanic`.
fn detach_guarded<T: Send>(py: Python<'_>, f: impl FnOnce() -> T + Send) -> PyResult<T> {
    py.detach(|| catch_unwind(AssertUnwindSafe(f)))
        .map_err(|payload| panic_err(&*payload))
}

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// A mapping (iterating gives its keys) or a set (no order): never a batch of completions or answers.
fn unordered(obj: &Bound<'_, PyAny>) -> bool {
    obj.is_instance_of::<PyDict>()
        || obj.is_instance_of::<PySet>()
        || obj.is_instance_of::<PyFrozenSet>()
        || obj.cast::<PyMapping>().is_ok()
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
    if unordered(completions) {
        // A dict would be scored over its keys, a set in no order: refuse both.
        return Err(PyTypeError::new_err(format!(
            "completions must be a list of completions, got {}",
            type_name(completions)
        )));
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

// ---- stable-ABI fast paths ----------------------------------------------------------------

#[inline]
fn prefetch(p: *const ffi::PyObject) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch never faults, whatever the address.
    unsafe {
        std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

/// Exact-type checks against CPython's static type objects (subclasses take the generic path).
#[inline]
unsafe fn is_str(obj: *mut ffi::PyObject) -> bool {
    ffi::Py_TYPE(obj) == addr_of_mut!(ffi::PyUnicode_Type)
}
#[inline]
unsafe fn is_list(obj: *mut ffi::PyObject) -> bool {
    ffi::Py_TYPE(obj) == addr_of_mut!(ffi::PyList_Type)
}
#[inline]
unsafe fn is_dict(obj: *mut ffi::PyObject) -> bool {
    ffi::Py_TYPE(obj) == addr_of_mut!(ffi::PyDict_Type)
}

/// The message dict of TRL's completion shape (`item` an exact list whose first item is an exact
/// dict), as a NEW reference (the lookup that follows may run a key's `__eq__`, which could drop
/// the list's reference); NULL for any other shape. No exception is set.
#[inline]
unsafe fn message_of(item: *mut ffi::PyObject) -> *mut ffi::PyObject {
    if !is_list(item) || ffi::PyList_Size(item) < 1 {
        return ptr::null_mut();
    }
    let m = ffi::PyList_GetItem(item, 0); // borrowed, index checked above
    if m.is_null() || !is_dict(m) {
        return ptr::null_mut();
    }
    ffi::Py_INCREF(m);
    m
}

/// `m[key]`, borrowed, or NULL with no exception set (`PyDict_GetItem` without its cost of saving
/// and restoring the exception state around every lookup).
#[inline]
unsafe fn dict_get(m: *mut ffi::PyObject, key: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let c = ffi::PyDict_GetItemWithError(m, key);
    if c.is_null() && !ffi::PyErr_Occurred().is_null() {
        ffi::PyErr_Clear();
    }
    c
}

/// `m["content"]` if it is an exact `str`, as a NEW reference, else NULL (no exception set).
/// Consumes the reference to `m`.
#[inline]
unsafe fn content_in(m: *mut ffi::PyObject, key: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let c = dict_get(m, key);
    let c = if !c.is_null() && is_str(c) {
        ffi::Py_INCREF(c);
        c
    } else {
        ptr::null_mut()
    };
    ffi::Py_DECREF(m);
    c
}

/// `m["content"]`'s address (borrowed; only compared, never read), consuming the reference to `m`.
#[inline]
unsafe fn content_addr_in(m: *mut ffi::PyObject, key: *mut ffi::PyObject) -> *mut ffi::PyObject {
    let c = dict_get(m, key);
    ffi::Py_DECREF(m);
    c
}

/// The UTF-8 view of an exact `str` (CPython caches it in the object; ASCII is read in place).
/// None (exception cleared) for strings UTF-8 cannot encode (lone surrogates).
unsafe fn utf8_of<'a>(s: *mut ffi::PyObject) -> Option<&'a str> {
    let mut len: ffi::Py_ssize_t = 0;
    let p = ffi::PyUnicode_AsUTF8AndSize(s, &mut len);
    if p.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    // SAFETY: CPython returns valid UTF-8 of `len` bytes, alive as long as `s` (the caller keeps
    // a strong reference for 'a).
    Some(std::str::from_utf8_unchecked(std::slice::from_raw_parts(
        p.cast::<u8>(),
        len as usize,
    )))
}

const BLOCK: usize = 16;

/// Whether the exact list `list` holds, in order, completions whose content objects are exactly
/// `cached` (pointer compares). Items are visited in blocks: first every item's address (and a
/// prefetch of it), then every message dict (and a prefetch), then the lookups, so the cache misses
/// of a block overlap instead of forming one long chain per item.
unsafe fn list_contents_match(
    list: *mut ffi::PyObject,
    cached: &[Py<PyString>],
    key: &Bound<'_, PyString>,
) -> bool {
    let py = key.py();
    let k = key.as_ptr();
    if usize::try_from(ffi::PyList_Size(list)).ok() != Some(cached.len()) {
        return false;
    }
    let mut items = [ptr::null_mut::<ffi::PyObject>(); BLOCK];
    let mut msgs = [ptr::null_mut::<ffi::PyObject>(); BLOCK];
    for (b, want) in cached.chunks(BLOCK).enumerate() {
        let start = b * BLOCK;
        for (j, slot) in items[..want.len()].iter_mut().enumerate() {
            let it = ffi::PyList_GetItem(list, (start + j) as ffi::Py_ssize_t);
            if it.is_null() {
                ffi::PyErr_Clear(); // the list shrank (only Python code run by a lookup can do that)
                return false;
            }
            prefetch(it);
            *slot = it;
        }
        // No Python code runs between taking the borrowed items and using them here.
        for (slot, &it) in msgs.iter_mut().zip(&items[..want.len()]) {
            *slot = if is_str(it) {
                ptr::null_mut()
            } else {
                let m = message_of(it);
                prefetch(m);
                m
            };
        }
        let mut same = true;
        for (j, w) in want.iter().enumerate() {
            let m = msgs[j];
            if !m.is_null() {
                same &= content_addr_in(m, k) == w.as_ptr(); // always run: releases `m`
            } else if same {
                // A plain str, or a shape for the generic path; re-read (a lookup may have run code).
                let i = start + j;
                let it = ffi::PyList_GetItem(list, i as ffi::Py_ssize_t);
                if it.is_null() {
                    ffi::PyErr_Clear();
                    same = false;
                } else if is_str(it) {
                    same = it == w.as_ptr();
                } else {
                    let item = Bound::from_borrowed_ptr(py, it);
                    same = content_at(i, item, key).is_ok_and(|s| s.as_ptr() == w.as_ptr());
                }
            }
        }
        if !same {
            return false;
        }
    }
    true
}

/// Whether the exact list `list` holds exactly the cached answer objects, in order.
unsafe fn list_answers_match(list: *mut ffi::PyObject, cached: &[Py<PyString>]) -> bool {
    if usize::try_from(ffi::PyList_Size(list)).ok() != Some(cached.len()) {
        return false;
    }
    cached
        .iter()
        .enumerate()
        .all(|(i, c)| ffi::PyList_GetItem(list, i as ffi::Py_ssize_t) == c.as_ptr())
}

/// Owned `str` objects and their UTF-8 views (valid while the objects are held).
type Texts<'a> = (Vec<Py<PyString>>, Vec<&'a str>);

/// The answers of an exact list of exact `str`s of length `n`, with their UTF-8; None for anything
/// else (the generic path then scores it or raises the right error).
unsafe fn fast_answers<'a>(
    py: Python<'_>,
    answer: &Bound<'_, PyAny>,
    n: usize,
) -> Option<Texts<'a>> {
    let list = answer.as_ptr();
    if !is_list(list) || usize::try_from(ffi::PyList_Size(list)).ok() != Some(n) {
        return None;
    }
    let mut objs = Vec::with_capacity(n);
    let mut texts = Vec::with_capacity(n);
    for i in 0..n {
        let a = ffi::PyList_GetItem(list, i as ffi::Py_ssize_t);
        if a.is_null() || !is_str(a) {
            ffi::PyErr_Clear();
            return None;
        }
        let a: Py<PyString> = Py::from_borrowed_ptr(py, a);
        texts.push(utf8_of(a.as_ptr())?);
        objs.push(a);
    }
    Some((objs, texts))
}

/// A completion's text as the pool threads get it: CPython's UTF-8 for ASCII strings (read in
/// place), a UCS-4 copy for the others (encoded to UTF-8 on the pool, not under the GIL).
enum Text<'a> {
    Utf8(&'a str),
    Wide(Vec<u32>),
}

/// `Text::Wide`'s UTF-8; None for a lone surrogate (UTF-8 cannot encode it, as CPython says).
fn wide_to_utf8(w: &[u32]) -> Option<String> {
    let mut out: Vec<u8> = Vec::with_capacity(w.len() + w.len() / 4 + 8);
    let mut i = 0;
    while i < w.len() {
        // A run of ASCII (most of a math rollout): found 16 code points at a time, then narrowed
        // in one vectorized pass.
        let start = i;
        while i + 16 <= w.len() && w[i..i + 16].iter().fold(0, |a, &c| a | c) < 0x80 {
            i += 16;
        }
        while i < w.len() && w[i] < 0x80 {
            i += 1;
        }
        out.extend(w[start..i].iter().map(|&c| c as u8));
        if let Some(&c) = w.get(i) {
            let mut b = [0u8; 4];
            out.extend_from_slice(char::from_u32(c)?.encode_utf8(&mut b).as_bytes());
            i += 1;
        }
    }
    // SAFETY: ASCII bytes and `char::encode_utf8` output only.
    Some(unsafe { String::from_utf8_unchecked(out) })
}

impl Text<'_> {
    /// Run `f` on the UTF-8 text (None: cannot be encoded).
    fn with_str<T>(&self, f: impl FnOnce(&str) -> T) -> Option<T> {
        match self {
            Text::Utf8(s) => Some(f(s)),
            Text::Wide(w) => wide_to_utf8(w).map(|s| f(&s)),
        }
    }
}

/// `s.isascii()` through the method descriptor `isascii` (a fast C call; no exception expected).
unsafe fn is_ascii(s: *mut ffi::PyObject, isascii: *mut ffi::PyObject) -> Option<bool> {
    let r = ffi::PyObject_CallFunctionObjArgs(isascii, s, ptr::null_mut::<ffi::PyObject>());
    if r.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    let ascii = r == ffi::Py_True();
    ffi::Py_DECREF(r);
    Some(ascii)
}

/// The text of an exact `str` (see [`Text`]).
unsafe fn text_of<'a>(s: *mut ffi::PyObject, isascii: *mut ffi::PyObject) -> Option<Text<'a>> {
    if is_ascii(s, isascii)? {
        return utf8_of(s).map(Text::Utf8);
    }
    let len = usize::try_from(ffi::PyUnicode_GetLength(s)).ok()?;
    let mut buf: Vec<u32> = Vec::with_capacity(len);
    let p = ffi::PyUnicode_AsUCS4(s, buf.as_mut_ptr(), len as ffi::Py_ssize_t, 0);
    if p.is_null() {
        ffi::PyErr_Clear();
        return None;
    }
    // SAFETY: PyUnicode_AsUCS4 wrote all `len` code points.
    buf.set_len(len);
    Some(Text::Wide(buf))
}

/// Items `range` of the exact list `list` as owned content objects (appended to `objs`) and their
/// texts; None if one is not a str / TRL message list (the generic path then raises the right
/// error).
unsafe fn fast_contents<'a>(
    py: Python<'_>,
    list: *mut ffi::PyObject,
    range: std::ops::Range<usize>,
    key: *mut ffi::PyObject,
    isascii: *mut ffi::PyObject,
    objs: &mut Vec<Py<PyString>>,
) -> Option<Vec<Text<'a>>> {
    let mut texts = Vec::with_capacity(range.len());
    let mut items = [ptr::null_mut::<ffi::PyObject>(); BLOCK];
    let mut strs = [ptr::null_mut::<ffi::PyObject>(); BLOCK];
    let mut start = range.start;
    while start < range.end {
        let len = BLOCK.min(range.end - start);
        // In stages over a block, each prefetching what the next one reads: the items, their
        // message dicts, the content strings (whose headers the UTF-8 / ASCII checks read).
        for (j, slot) in items[..len].iter_mut().enumerate() {
            let it = ffi::PyList_GetItem(list, (start + j) as ffi::Py_ssize_t);
            if it.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            prefetch(it);
            ffi::Py_INCREF(it); // kept across the lookups below (they may run Python code)
            *slot = it;
        }
        let mut ok = true;
        for (slot, &it) in strs.iter_mut().zip(&items[..len]) {
            // A NEW reference to the message dict (or the str item itself) for now.
            *slot = if is_str(it) {
                ffi::Py_INCREF(it);
                it
            } else {
                message_of(it)
            };
            prefetch(*slot);
        }
        for slot in &mut strs[..len] {
            let m = *slot;
            if !m.is_null() && !is_str(m) {
                *slot = content_in(m, key); // NEW reference to the content, or NULL
                prefetch(*slot);
            }
        }
        for (&c, &it) in strs[..len].iter().zip(&items[..len]) {
            if c.is_null() {
                ok = false;
            } else {
                let c: Py<PyString> = Py::from_owned_ptr(py, c);
                if ok {
                    match text_of(c.as_ptr(), isascii) {
                        Some(t) => texts.push(t),
                        None => ok = false,
                    }
                }
                objs.push(c);
            }
            ffi::Py_DECREF(it);
        }
        if !ok {
            return None;
        }
        start += len;
    }
    Some(texts)
}

/// A `list[float]` of `values`, sharing one float object per distinct value (the columns hold a
/// handful of score tiers; Python shares its constant floats the same way).
fn float_list<'py>(py: Python<'py>, values: &[f64]) -> PyResult<Bound<'py, PyList>> {
    let n = ffi::Py_ssize_t::try_from(values.len())
        .map_err(|_| PyValueError::new_err("batch too large"))?;
    // SAFETY: a new list of n NULL slots, each filled exactly once with a new reference before
    // the list is handed to Python.
    unsafe {
        let list = ffi::PyList_New(n);
        if list.is_null() {
            return Err(PyErr::fetch(py));
        }
        let list = Bound::from_owned_ptr(py, list).cast_into_unchecked::<PyList>();
        let mut seen: Vec<(u64, Bound<'py, PyAny>)> = Vec::with_capacity(16);
        for (i, &v) in values.iter().enumerate() {
            let bits = v.to_bits();
            let obj = if let Some((_, o)) = seen.iter().find(|(b, _)| *b == bits) {
                o.as_ptr()
            } else {
                let f = ffi::PyFloat_FromDouble(v);
                if f.is_null() {
                    return Err(PyErr::fetch(py));
                }
                if seen.len() >= 64 {
                    ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, f); // steals
                    continue;
                }
                seen.push((bits, Bound::from_owned_ptr(py, f)));
                f
            };
            ffi::Py_INCREF(obj);
            ffi::PyList_SetItem(list.as_ptr(), i as ffi::Py_ssize_t, obj); // steals
        }
        Ok(list)
    }
}

/// Whether `completions` holds exactly the cached content objects, in order (pointer compares; any
/// malformed item simply does not match, and the full path reports it).
fn contents_match(completions: &Bound<'_, PyAny>, cached: &[Py<PyString>]) -> bool {
    // SAFETY: `completions` is alive (borrowed from the caller) and the GIL is held.
    if unsafe { is_list(completions.as_ptr()) } {
        let key = intern!(completions.py(), "content");
        return unsafe { list_contents_match(completions.as_ptr(), cached, key) };
    }
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
    // SAFETY: `answer` is alive and the GIL is held; items are only compared by address.
    if unsafe { is_list(answer.as_ptr()) } {
        return unsafe { list_answers_match(answer.as_ptr(), cached) };
    }
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
    if unordered(answer) {
        return Err(PyTypeError::new_err(format!(
            "answer must be a list of str (one per completion), got {}",
            type_name(answer)
        )));
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
            "math_correct" => &mut s.math_correct,
            "math_wrong" => &mut s.math_wrong,
            "math_missing" => &mut s.math_missing,
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
        let fresh = match self.fresh_fast(py, completions, answer)? {
            Some(entry) => Arc::new(entry),
            None => Arc::new(self.fresh_generic(py, completions, answer)?),
        };
        let old = self
            .cache
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .replace(Arc::clone(&fresh));
        drop(old); // decref the previous batch's strings outside the lock
        Ok(fresh)
    }

    /// A first call on TRL's shapes (an exact list of str or of message lists; answers an exact
    /// list of str): the GIL-held part (walking the list, CPython's UTF-8 of non-ASCII strings)
    /// runs chunk by chunk on this thread while the pool scans the chunks already read, with the
    /// GIL released. `Ok(None)` for any other shape or a bad item: the generic path then scores
    /// it or raises the right error.
    fn fresh_fast(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Option<Cache000>> {
        let list = completions.as_ptr();
        // SAFETY: `completions` is alive and the GIL is held.
        if !unsafe { is_list(list) } {
            return Ok(None);
        }
        let n = usize::try_from(unsafe { ffi::PyList_Size(list) }).unwrap_or(0);
        let answers = match answer {
            // SAFETY: as above; the answer objects are held in the returned Vec.
            Some(a) if !a.is_none() => match unsafe { fast_answers(py, a, n) } {
                Some(t) => Some(t),
                None => return Ok(None),
            },
            _ => None,
        };
        let ans: Option<&[&str]> = answers.as_ref().map(|(_, t)| t.as_slice());
        let key = intern!(py, "content").as_ptr();
        let isascii = py.get_type::<PyString>().getattr(intern!(py, "isascii"))?;
        let isascii = isascii.as_ptr();
        let ch = chunk_len(n);
        let mut objs: Vec<Py<PyString>> = Vec::with_capacity(n);
        let inner = &*self.inner;
        let rows = catch_unwind(AssertUnwindSafe(|| {
            parallel::overlapped(
                n.div_ceil(ch),
                |k| {
                    let range = k * ch..((k + 1) * ch).min(n);
                    // SAFETY: GIL held; each text borrows a str whose reference `objs` keeps
                    // until after the scan.
                    unsafe { fast_contents(py, list, range, key, isascii, &mut objs) }
                        .map(|t| (k, t))
                        .ok_or(())
                },
                |(k, texts): &(usize, Vec<Text<'_>>)| {
                    texts
                        .iter()
                        .enumerate()
                        .map(|(j, t)| t.with_str(|t| inner.score000(t, ans.map(|a| a[k * ch + j]))))
                        .collect::<Option<Vec<[f64; 4]>>>()
                },
                |wait| py.detach(wait),
            )
        }));
        let rows = match rows {
            Err(payload) => return Err(panic_err(&*payload)),
            Ok(Err(())) => return Ok(None),
            Ok(Ok(rows)) => match rows.into_iter().collect::<Option<Vec<_>>>() {
                Some(rows) => rows,
                None => return Ok(None), // a lone surrogate: the generic path raises
            },
        };
        Ok(Some(Cache000 {
            contents: objs,
            batch: Batch000::from_row_chunks(&rows, answers.is_some()),
            answers: answers.map(|(objs, _)| objs),
        }))
    }

    /// A first call on any iterable (and the error messages of a bad batch).
    fn fresh_generic(
        &self,
        py: Python<'_>,
        completions: &Bound<'_, PyAny>,
        answer: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<Cache000> {
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
            let column = if j >= 2 && !with_answers {
                None
            } else {
                batch.batch.column(j)
            };
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
        detach_guarded(py, || inner.batch_math(&texts, &golds))?.map_err(PyErr::from)
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

/// A `str` argument's text, or None for anything else (a non-str, a lone surrogate).
fn text_of_any<'a>(obj: &'a Bound<'_, PyAny>) -> Option<std::borrow::Cow<'a, str>> {
    obj.cast::<PyString>()
        .ok()?
        .to_str()
        .ok()
        .map(std::borrow::Cow::Borrowed)
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
        return catch_unwind(|| crate::math_equal(&p, &g)).map_err(|e| panic_err(&*e));
    }
    detach_guarded(py, || crate::math_equal(&p, &g))
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
        if seq.is_instance_of::<PyString>() {
            return Err(PyTypeError::new_err(format!(
                "{name} must be a list of str, got a single str"
            )));
        }
        let iter = seq.try_iter().map_err(|_| {
            PyTypeError::new_err(format!(
                "{name} must be a list of str, got {}",
                type_name(seq)
            ))
        })?;
        iter.map(|item| Ok(text_of_any(&item?).map(std::borrow::Cow::into_owned)))
            .collect()
    };
    let p = collect(preds, "preds")?;
    let g = collect(golds, "golds")?;
    if p.len() != g.len() {
        return Err(Error::LengthMismatch {
            what: "golds",
            expected: p.len(),
            got: g.len(),
        }
        .into());
    }
    detach_guarded(py, || {
        let total = p
            .iter()
            .chain(&g)
            .map(|s| s.as_ref().map_or(0, String::len))
            .sum();
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

/// Test hook (cargo feature `debug-hooks`, off in release builds): panics inside the rayon pool
/// with the GIL released, which must surface as `RewardCorePanic`.
#[cfg(feature = "debug-hooks")]
#[pyfunction]
fn _debug_panic(py: Python<'_>) -> PyResult<()> {
    detach_guarded(py, parallel::debug_panic)
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
