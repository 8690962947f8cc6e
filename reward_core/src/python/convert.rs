//! Python arguments to Rust values and columns back to Python, in safe PyO3 but for three
//! functions whose `unsafe` blocks a benchmark justifies (each says why): the borrowed walk over
//! TRL's message lists ([`walk_borrowed`]), the cached call's check of the answers
//! ([`same_items_borrowed`]) and a first call's read-out of a `str` ([`TextReader::read`]). The
//! errors use the words of `py_rewards/_inputs.py` (the pure-Python backend raises the same).

use std::ops::Range;

use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::{PyDict, PyFloat, PyFrozenSet, PyIterator, PyList, PyMapping, PySet, PyString};

use crate::{Error, Scores};

fn type_name(obj: &Bound<'_, PyAny>) -> String {
    obj.get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |n| n.to_string())
}

/// An iterator over a batch argument; `what` starts the TypeError of anything else. A mapping
/// (iterating gives its keys) or a set (no order) is refused when `ordered`.
pub(crate) fn batch_iter<'py>(
    obj: &Bound<'py, PyAny>,
    what: &str,
    ordered: bool,
) -> PyResult<Bound<'py, PyIterator>> {
    let bad = |got: &str| PyTypeError::new_err(format!("{what}, got {got}"));
    if obj.is_instance_of::<PyString>() {
        return Err(bad("a single str"));
    }
    let unordered = obj.is_instance_of::<PyDict>()
        || obj.is_instance_of::<PySet>()
        || obj.is_instance_of::<PyFrozenSet>()
        || obj.cast::<PyMapping>().is_ok();
    if ordered && unordered {
        return Err(bad(&type_name(obj)));
    }
    obj.try_iter().map_err(|_| bad(&type_name(obj)))
}

/// The content `str` of each completion (see [`content_at`]).
pub(crate) fn contents<'py>(
    completions: &Bound<'py, PyAny>,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    if completions.is_none() {
        return Err(pyo3::exceptions::PyValueError::new_err(
            "completions is required (got None)",
        ));
    }
    let iter = batch_iter(
        completions,
        "completions must be a list of completions",
        true,
    )?;
    let key = pyo3::intern!(completions.py(), "content");
    let mut out = Vec::with_capacity(completions.len().unwrap_or(0));
    for (i, item) in iter.enumerate() {
        out.push(content_at(i, item?, key)?);
    }
    Ok(out)
}

/// Completion `i`'s text: `item` itself if it is a `str`, else `item[0]["content"]` (the seeds'
/// `completion[0]["content"]`), which must be a `str`.
pub(crate) fn content_at<'py>(
    i: usize,
    item: Bound<'py, PyAny>,
    key: &Bound<'py, PyString>,
) -> PyResult<Bound<'py, PyString>> {
    let item = match item.cast_into::<PyString>() {
        Ok(s) => return Ok(s),
        Err(e) => e.into_inner(),
    };
    // TRL's shape, a list of message dicts, through the typed list/dict access; anything else
    // indexable through item[0]["content"].
    let typed = match item.cast::<PyList>() {
        Ok(list) => match list.get_item(0).ok().map(Bound::cast_into::<PyDict>) {
            Some(Ok(message)) => message.get_item(key)?,
            _ => None,
        },
        Err(_) => None,
    };
    let content = match typed {
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
            type_name(&e.into_inner())
        ))
    })
}

/// Items per stage of [`contents_staged`] and [`walk_borrowed`].
const BLOCK: usize = 16;

/// [`content_at`] for items `range` of an exact list, in order: `f(i, content)` (None for an item
/// without one) until it returns false; whether it never did. On TRL's shape the content is
/// `typed(message)`, other shapes go through `content_at` and `of_str`. A block of items is read
/// in stages (the items, their first messages, the lookups, then `f`) so that the cache misses of
/// the block overlap instead of forming one chain per item: a batch's objects lie all over the heap.
pub(crate) fn contents_staged<'py, T>(
    list: &Bound<'py, PyList>,
    range: Range<usize>,
    key: &Bound<'py, PyString>,
    typed: impl Fn(&Bound<'py, PyDict>) -> Option<T>,
    of_str: impl Fn(Bound<'py, PyString>) -> T,
    mut f: impl FnMut(usize, Option<T>) -> bool,
) -> bool {
    let mut items = Vec::with_capacity(BLOCK);
    let mut messages = Vec::with_capacity(BLOCK);
    let mut contents = Vec::with_capacity(BLOCK);
    for start in range.clone().step_by(BLOCK) {
        let block = start..(start + BLOCK).min(range.end);
        items.clear();
        items.extend(block.clone().map(|i| list.get_item(i).ok()));
        if items.iter().any(Option::is_none) {
            return false; // the list shrank (a key's __eq__ can run any code)
        }
        messages.clear();
        messages.extend(items.iter().flatten().map(|item| {
            let message = item.cast::<PyList>().ok()?.get_item(0).ok()?;
            message.cast_into::<PyDict>().ok()
        }));
        // A str item, a missing key, another shape: `content_at` (which raises the errors).
        contents.clear();
        contents.extend(
            (block.clone().zip(items.drain(..).flatten()).zip(&messages)).map(|((i, item), m)| {
                match m.as_ref().and_then(&typed) {
                    Some(c) => Some(c),
                    None => content_at(i, item, key).ok().map(&of_str),
                }
            }),
        );
        if !block.zip(contents.drain(..)).all(|(i, c)| f(i, c)) {
            return false;
        }
    }
    true
}

/// `message[key]` if it is a `str` (a new reference: its text is read next).
pub(crate) fn content_str<'py>(
    message: &Bound<'py, PyDict>,
    key: &Bound<'py, PyString>,
) -> Option<Bound<'py, PyString>> {
    message.get_item(key).ok()??.cast_into::<PyString>().ok()
}

/// How [`walk_borrowed`] hands out each content: by address only (a cached call's check, which
/// must not write to the strings) or as a new reference (a first call, which reads them).
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Take {
    Address,
    Reference,
}

/// A content from [`walk_borrowed`]: its address (NULL where there is none; never dereferenced) or
/// the `str` itself.
pub(crate) enum Content<'py> {
    Address(usize),
    Str(Bound<'py, PyString>),
}

/// The contents of items `range` of the exact list `list`, for TRL's shapes (exact `str` items,
/// exact lists whose first item is an exact dict): `f(i, content)` in order until it returns
/// false; `Some(whether it never did)`. None at an item of another shape, or with
/// `Take::Reference` at a content that is missing or not an exact `str` (the caller then takes a
/// safe path). A list shrunk meanwhile (a lookup's `__eq__` can run any code) is `Some(false)`.
///
/// Unsafe because safe PyO3 takes a reference to every object it hands out: a walk then writes to
/// each message list and dict (and, in a cached call's check, each content string), and cannot
/// prefetch. Here the items of a block of 16 are read borrowed and prefetched stage by stage
/// (items, dicts, contents), so that the cache misses of a block overlap: a batch's objects lie
/// all over the heap. On 65,536 fresh rollouts a cached call took 1.7 ms through the safe staged
/// walk (2.6 with the answer check) against 1.1 (1.6) this way, and a first call ~3 % more CPU
/// time (bench/rewards.md, "2-core dev VM: binding before/after").
#[allow(unsafe_code, clippy::cast_possible_wrap)] // indices < a list's length <= isize::MAX
pub(crate) fn walk_borrowed<'py>(
    list: &Bound<'py, PyList>,
    range: Range<usize>,
    key: &Bound<'py, PyString>,
    take: Take,
    mut f: impl FnMut(usize, Content<'py>) -> bool,
) -> Option<bool> {
    use pyo3::ffi::{self, PyObject};
    use std::ptr::null_mut;
    #[inline]
    fn prefetch(p: *mut PyObject) {
        #[cfg(target_arch = "x86_64")]
        // SAFETY: a prefetch never faults, whatever the address.
        unsafe {
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
        }
    }
    let py = list.py();
    let by_ref = take == Take::Reference;
    let (items, slots) = (&mut [null_mut(); BLOCK], &mut [null_mut(); BLOCK]);
    let mut is_dict = [false; BLOCK];
    for start in range.clone().step_by(BLOCK) {
        let len = BLOCK.min(range.end - start);
        // SAFETY: the GIL is held; `list` and `key` are alive. No Python code runs in stages 1-2,
        // so the borrowed items stay alive (the list holds them) until every message dict is held
        // (a new reference), and a `str` item is taken (with `Take::Reference`) before any code
        // runs. Stage 3's lookups can run a key's `__eq__` (any code): from then on the items are
        // not touched; a content is taken (incref) right after its own lookup, or with
        // `Take::Address` only its address is kept, never dereferenced. Every dict is released.
        let other = unsafe {
            // 1. The items (borrowed), prefetched; a list shrunk by a lookup's code ends the walk.
            for (j, it) in items[..len].iter_mut().enumerate() {
                *it = ffi::PyList_GetItem(list.as_ptr(), (start + j) as ffi::Py_ssize_t);
                if it.is_null() {
                    ffi::PyErr_Clear();
                    return Some(false);
                }
                prefetch(*it);
            }
            // 2. TRL's message dicts (new references), prefetched; a str item stands for itself.
            let mut other = false;
            for ((slot, d), &it) in slots.iter_mut().zip(&mut is_dict).zip(&items[..len]) {
                *slot = it;
                *d = false;
                if ffi::PyList_CheckExact(it) != 0 && ffi::PyList_Size(it) > 0 {
                    let m = ffi::PyList_GetItem(it, 0);
                    if ffi::PyDict_CheckExact(m) != 0 {
                        ffi::Py_INCREF(m);
                        prefetch(m);
                        (*slot, *d) = (m, true);
                        continue;
                    }
                }
                other |= ffi::PyUnicode_CheckExact(it) == 0;
            }
            if !other && by_ref {
                for (&slot, &d) in slots.iter().zip(&is_dict[..len]) {
                    if !d {
                        ffi::Py_INCREF(slot); // a str item
                    }
                }
            }
            // 3. The contents (`Take::Reference`: new references, prefetched); dicts released.
            for (slot, &d) in slots.iter_mut().zip(&is_dict[..len]) {
                if !d {
                    continue;
                }
                let m = *slot;
                *slot = null_mut();
                if !other {
                    let c = ffi::PyDict_GetItemWithError(m, key.as_ptr());
                    if c.is_null() {
                        ffi::PyErr_Clear(); // missing key or a raising __eq__
                    } else if !by_ref {
                        *slot = c;
                    } else if ffi::PyUnicode_CheckExact(c) != 0 {
                        ffi::Py_INCREF(c);
                        prefetch(c);
                        *slot = c;
                    }
                }
                ffi::Py_DECREF(m);
            }
            other
        };
        if other {
            return None;
        }
        // 4. Handed out in order; with `Take::Reference` each new reference is owned by a Bound.
        let mut missing = false;
        let mut all = true;
        for (j, &c) in slots[..len].iter().enumerate() {
            let content = if !by_ref {
                Content::Address(c as usize)
            } else if c.is_null() {
                missing = true;
                continue;
            } else {
                // SAFETY: `c` is a new reference to an exact `str` (stage 2 or 3), owned from here.
                Content::Str(unsafe { Bound::from_owned_ptr(py, c).cast_into_unchecked() })
            };
            all = all && !missing && f(start + j, content);
        }
        if missing {
            return None;
        }
        if !all {
            return Some(false);
        }
    }
    Some(true)
}

/// Whether the exact list `list` holds, in order, completions whose contents are exactly the
/// `cached` objects, for TRL's shapes: a cached call's check ([`walk_borrowed`], by address). None
/// at an item of another shape (the caller then takes the safe walk, [`contents_staged`]).
pub(crate) fn same_contents_borrowed(
    list: &Bound<'_, PyList>,
    cached: &[Py<PyString>],
    key: &Bound<'_, PyString>,
) -> Option<bool> {
    if list.len() != cached.len() {
        return Some(false);
    }
    walk_borrowed(
        list,
        0..cached.len(),
        key,
        Take::Address,
        |i, c| matches!(c, Content::Address(a) if a == cached[i].as_ptr() as usize),
    )
}

/// Whether the exact list `list` holds exactly the `cached` objects, in order: a cached call's
/// check of the answers.
///
/// Unsafe for the reason of [`same_contents_borrowed`]: reading the items borrowed, without
/// writing to every answer string, makes the check ~0.1 ms instead of ~0.9 ms per cached call on
/// 65,536 answers (bench/rewards.md, "2-core dev VM: binding before/after").
#[allow(unsafe_code, clippy::cast_possible_wrap)] // indices < a list's length <= isize::MAX
pub(crate) fn same_items_borrowed(list: &Bound<'_, PyList>, cached: &[Py<PyString>]) -> bool {
    list.len() == cached.len()
        && cached.iter().enumerate().all(|(i, c)| {
            // SAFETY: the GIL is held, `list` is alive and `i` below its length (no Python code
            // runs in this loop); the borrowed item is only compared by address.
            let item =
                unsafe { pyo3::ffi::PyList_GetItem(list.as_ptr(), i as pyo3::ffi::Py_ssize_t) };
            item == c.as_ptr()
        })
}

/// The gold answers: one `str` per completion (`n` of them).
pub(crate) fn answers<'py>(
    answer: &Bound<'py, PyAny>,
    n: usize,
) -> PyResult<Vec<Bound<'py, PyString>>> {
    let what = "answer must be a list of str (one per completion)";
    let mut out = Vec::with_capacity(n);
    for (i, item) in batch_iter(answer, what, true)?.enumerate() {
        out.push(item?.cast_into::<PyString>().map_err(|e| {
            PyTypeError::new_err(format!(
                "answer[{i}] must be str, got {}",
                type_name(&e.into_inner())
            ))
        })?);
    }
    if out.len() != n {
        let got = out.len();
        return Err(Error::LengthMismatch {
            what: "answer",
            expected: n,
            got,
        }
        .into());
    }
    Ok(out)
}

/// The UTF-8 of each string (borrowed; CPython's own buffer for ASCII). A lone surrogate is
/// CPython's UnicodeEncodeError (the Python layer then falls back to the reference).
pub(crate) fn as_strs<'a>(objs: &'a [Bound<'_, PyString>]) -> PyResult<Vec<&'a str>> {
    objs.iter().map(PyStringMethods::to_str).collect()
}

/// A content's text as the pool reads it: an ASCII `str`'s own data (CPython's UTF-8 of it, read
/// in place) or the UTF-8 of another `str`, encoded by [`TextReader`].
pub(crate) enum Text {
    Ascii(PyBackedStr),
    Encoded(String),
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        match self {
            Text::Ascii(s) => s,
            Text::Encoded(s) => s,
        }
    }
}

/// Reads the texts of `str` objects under the GIL for a first call.
pub(crate) struct TextReader<'py> {
    /// `str.isascii`, the method descriptor.
    isascii: Bound<'py, PyAny>,
    /// The UCS-4 copy of the current non-ASCII `str`.
    wide: Vec<u32>,
}

impl<'py> TextReader<'py> {
    pub(crate) fn new(py: Python<'py>) -> PyResult<Self> {
        let isascii = py
            .get_type::<PyString>()
            .getattr(pyo3::intern!(py, "isascii"))?;
        Ok(Self {
            isascii,
            wide: Vec::new(),
        })
    }

    /// The text of `s`; None for a lone surrogate (the generic path then raises CPython's
    /// UnicodeEncodeError) or an unexpected error.
    ///
    /// Unsafe for two C calls that safe PyO3 does not offer (stable ABI, no access to a `str`'s
    /// kind or data). Safe PyO3 reads every `str` through `PyUnicode_AsUTF8AndSize`, which for a
    /// non-ASCII `str` (~6 % of the rollouts, ~16 M of 258 M chars) runs CPython's per-character
    /// UTF-8 encoder and copies the result into a cache in the object: a first call then took ~7 %
    /// more CPU time than the old binding. Asking `str.isascii` through a plain C call (through
    /// PyO3's `call1` the argument tuple cost ~2 ms per call of the 65,536 checks) and copying a
    /// non-ASCII `str` as UCS-4 (`PyUnicode_AsUCS4`, a widening copy) to encode it here is that much
    /// faster (bench/rewards.md, "2-core dev VM: binding before/after").
    #[allow(unsafe_code, clippy::cast_possible_wrap)] // a str's length <= isize::MAX
    pub(crate) fn read(&mut self, s: Bound<'py, PyString>) -> Option<Text> {
        use pyo3::ffi;
        // SAFETY: the GIL is held and both objects are alive; the result is a new reference (or
        // NULL with an exception set), released here.
        let ascii = unsafe {
            let r = ffi::PyObject_CallFunctionObjArgs(
                self.isascii.as_ptr(),
                s.as_ptr(),
                std::ptr::null_mut::<ffi::PyObject>(),
            );
            if r.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            let ascii = r == ffi::Py_True();
            ffi::Py_DECREF(r);
            ascii
        };
        if ascii {
            return PyBackedStr::try_from(s).ok().map(Text::Ascii);
        }
        let len = s.len().ok()?;
        self.wide.clear();
        self.wide.reserve(len);
        // SAFETY: `wide` has room for `len` code points, the length of `s`; CPython writes them all
        // (no NUL: `copy_null` is 0) or fails with an exception set.
        unsafe {
            let p = ffi::PyUnicode_AsUCS4(
                s.as_ptr(),
                self.wide.as_mut_ptr(),
                len as ffi::Py_ssize_t,
                0,
            );
            if p.is_null() {
                ffi::PyErr_Clear();
                return None;
            }
            self.wide.set_len(len);
        }
        wide_to_utf8(&self.wide).map(Text::Encoded)
    }
}

/// The UTF-8 of UCS-4 code points; None for a lone surrogate (UTF-8 cannot encode it).
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
    String::from_utf8(out).ok()
}

/// A `list[float]` of `values`, sharing one float object per distinct value (a column holds a
/// handful of score tiers; Python shares its constant floats the same way).
pub(crate) fn float_list<'py>(py: Python<'py>, values: &[f64]) -> PyResult<Bound<'py, PyList>> {
    let mut shared: Vec<(u64, Bound<'py, PyFloat>)> = Vec::with_capacity(16);
    PyList::new(
        py,
        values.iter().map(|&v| {
            let bits = v.to_bits();
            if let Some((_, f)) = shared.iter().find(|(b, _)| *b == bits) {
                return f.clone();
            }
            let f = PyFloat::new(py, v);
            if shared.len() < 64 {
                shared.push((bits, f.clone()));
            }
            f
        }),
    )
}

/// Score tiers from a `{name: float}` dict (the fields of `py_rewards.spec.RewardScores`).
pub(crate) fn scores_from(mapping: Option<&Bound<'_, PyAny>>) -> PyResult<Scores> {
    let mut s = Scores::default();
    let Some(mapping) = mapping.filter(|m| !m.is_none()) else {
        return Ok(s);
    };
    let dict = mapping
        .cast::<PyDict>()
        .map_err(|_| PyTypeError::new_err("scores must be a dict of floats"))?;
    for (k, v) in dict.iter() {
        s.set(&k.extract::<String>()?, v.extract()?)?;
    }
    Ok(s)
}
