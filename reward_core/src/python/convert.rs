//! Python arguments to Rust values and columns back to Python, in safe PyO3 but for two walks
//! over lists of borrowed items ([`walk`], [`same_items`]) and the read-out of a non-ASCII `str`
//! ([`TextReader::read`]), each of which says what it measured. The errors use the words of
//! `py_rewards/_inputs.py` (the pure-Python backend raises the same).

use std::ops::Range;

use pyo3::exceptions::{PyTypeError, PyValueError};
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
        return Err(PyValueError::new_err("completions is required (got None)"));
    }
    let what = "completions must be a list of completions";
    let key = pyo3::intern!(completions.py(), "content");
    let mut out = Vec::with_capacity(completions.len().unwrap_or(0));
    for (i, item) in batch_iter(completions, what, true)?.enumerate() {
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

/// Items per stage of [`walk`].
const BLOCK: usize = 16;

/// A content from [`walk`]: its address (NULL for none; never dereferenced) or the `str` itself.
pub(crate) enum Content<'py> {
    Address(usize),
    Str(Bound<'py, PyString>),
}

/// The contents of items `range` of the exact list `list`, for TRL's shapes (exact `str` items,
/// exact lists whose first item is an exact dict): `f(content)` in order until it returns false;
/// `Some(whether it never did)`. None at another shape or, when `take` (a first call, which reads
/// the strings), at a content that is missing or not an exact `str`: the caller then takes the
/// safe path ([`contents`]). Without `take` (a cached call's check) only the addresses are handed
/// out. A list shrunk meanwhile (a lookup's `__eq__` can run any code) ends the walk.
///
/// Unsafe because safe PyO3 takes a reference to each object it hands out and cannot prefetch: a
/// cached call's check then writes to every content string, each on its own page, one dependent
/// cache miss after another. Here the items of a block of 16 are read in stages (items, first
/// messages, contents), each prefetched. On 65,536 fresh rollouts, 1 thread, a cached call took
/// 2.6-3.5 ms of CPU this way against 17.5-18.3 ms through safe PyO3 (builds alternated in one
/// process; bench/rewards.md, "Thin binding").
#[allow(unsafe_code, clippy::cast_possible_wrap, clippy::cast_sign_loss)] // 0 <= index < len
pub(crate) fn walk<'py>(
    list: &Bound<'py, PyList>,
    key: &Bound<'py, PyString>,
    take: bool,
    range: Range<usize>,
    mut f: impl FnMut(Content<'py>) -> bool,
) -> Option<bool> {
    use pyo3::ffi::{self, PyObject};
    use std::ptr::null_mut;
    let mut slots: [*mut PyObject; BLOCK] = [null_mut(); BLOCK];
    let mut is_dict = [false; BLOCK];
    let mut start = range.start;
    // SAFETY: the GIL is held, so no other thread changes the lists meanwhile (the module declares
    // `gil_used`); `list` and `key` are alive. Stages 1-2 run no Python code, so the borrowed items
    // (the list holds them) stay alive until each message dict is held (a new reference) and, with
    // `take`, each `str` item is taken. Stage 3's lookups can run a key's `__eq__` (any code):
    // from then on the items are not touched; a content is taken (a new reference) right after its
    // own lookup, or only its address is kept, never dereferenced (the check compares it with
    // objects that the cache keeps alive, which a freed object's address cannot equal). Every dict
    // is released; in stage 4 each reference taken is owned by a `Bound`. A prefetch never faults.
    unsafe {
        let prefetch = |p: *mut PyObject| {
            #[cfg(target_arch = "x86_64")]
            std::arch::x86_64::_mm_prefetch::<{ std::arch::x86_64::_MM_HINT_T0 }>(p.cast());
        };
        loop {
            let len = range.end.min(ffi::PyList_Size(list.as_ptr()) as usize); // may have shrunk
            if start >= len {
                return Some(true);
            }
            let n = BLOCK.min(len - start);
            // 1. The items (borrowed), prefetched.
            for (j, slot) in slots[..n].iter_mut().enumerate() {
                *slot = ffi::PyList_GetItem(list.as_ptr(), (start + j) as ffi::Py_ssize_t);
                prefetch(*slot);
            }
            // 2. TRL's message dicts, prefetched, then held; a `str` item stands for itself.
            for (slot, d) in slots[..n].iter_mut().zip(&mut is_dict) {
                let it = *slot;
                *d = ffi::PyList_CheckExact(it) != 0 && ffi::PyList_Size(it) > 0 && {
                    let m = ffi::PyList_GetItem(it, 0);
                    prefetch(m);
                    *slot = m;
                    ffi::PyDict_CheckExact(m) != 0
                };
                if !*d && ffi::PyUnicode_CheckExact(it) == 0 {
                    return None; // another shape; nothing of this block is held yet
                }
            }
            for (&slot, &d) in slots[..n].iter().zip(&is_dict) {
                if d || take {
                    ffi::Py_INCREF(slot);
                }
            }
            // 3. The contents (with `take`: new references, prefetched); the dicts released.
            let mut complete = true;
            for (slot, &d) in slots[..n].iter_mut().zip(&is_dict) {
                if !d {
                    continue;
                }
                let m = *slot;
                let mut c = ffi::PyDict_GetItemWithError(m, key.as_ptr());
                if c.is_null() {
                    ffi::PyErr_Clear(); // a missing key or a raising __eq__
                } else if take && ffi::PyUnicode_CheckExact(c) != 0 {
                    ffi::Py_INCREF(c);
                    prefetch(c);
                } else if take {
                    c = null_mut();
                }
                complete &= !(take && c.is_null());
                *slot = c;
                ffi::Py_DECREF(m);
            }
            // 4. Handed out in order.
            let mut go = true;
            for &c in &slots[..n] {
                let content = if !take {
                    Content::Address(c as usize)
                } else if c.is_null() {
                    continue;
                } else {
                    Content::Str(Bound::from_owned_ptr(list.py(), c).cast_into_unchecked())
                };
                go = go && complete && f(content);
            }
            if !(complete && go) {
                return complete.then_some(false);
            }
            start += n;
        }
    }
}

/// Whether the exact list `list` holds exactly the `cached` objects, in order: a cached call's
/// check of the answers.
///
/// Unsafe to read the items borrowed: safe PyO3 writes to each answer `str` (a reference taken and
/// given back). A cached call of an answer column on 65,536 fresh rollouts (2.7-3.9 ms of CPU)
/// took 0.65-0.9 ms more through safe PyO3 (1 thread; bench/rewards.md, "Thin binding").
#[allow(unsafe_code, clippy::cast_possible_wrap)] // indices < a list's length <= isize::MAX
pub(crate) fn same_items(list: &Bound<'_, PyList>, cached: &[Py<PyString>]) -> bool {
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

/// A text as the pool reads it, holding its `str`: CPython's own UTF-8 of it (an ASCII `str`'s
/// data, read in place) or the UTF-8 of a non-ASCII one, encoded by [`TextReader`].
pub(crate) enum Text {
    Python(PyBackedStr),
    Encoded(String, Py<PyString>),
}

impl Text {
    /// The `str` object, given back without touching it (no reference count changes).
    pub(crate) fn into_object(self, py: Python<'_>) -> Py<PyAny> {
        match self {
            Text::Python(s) => s.into_pyobject(py).unwrap().unbind(), // infallible
            Text::Encoded(_, s) => s.into_any(),
        }
    }
}

impl AsRef<str> for Text {
    fn as_ref(&self) -> &str {
        match self {
            Text::Python(s) => s,
            Text::Encoded(s, _) => s,
        }
    }
}

/// Reads the texts of `str` objects for the pool (`wide`: the UCS-4 copy of a non-ASCII one).
#[derive(Default)]
pub(crate) struct TextReader {
    wide: Vec<u32>,
}

impl TextReader {
    /// The text of `s`. A lone surrogate is CPython's UnicodeEncodeError (the Python layer then
    /// falls back to the reference).
    ///
    /// Unsafe for one C call that safe PyO3 does not offer (the stable ABI gives no access to a
    /// `str`'s data): a non-ASCII `str` is copied out as UCS-4 (`PyUnicode_AsUCS4`, a widening
    /// copy) and encoded to UTF-8 here. Safe PyO3 reads it through `PyUnicode_AsUTF8AndSize`, which
    /// runs CPython's per-character UTF-8 encoder and keeps a copy in the object: a first call on
    /// 65,536 rollouts (4,085 non-ASCII, 19 M of 291 M chars) then took 1.10x the CPU, 1.08x on the
    /// clean mix (1 thread; bench/rewards.md, "Thin binding"). `isascii` is a safe method call:
    /// a C call would save ~1.2 ms per 65,536 strings.
    #[allow(unsafe_code, clippy::cast_possible_wrap)] // a str's length <= isize::MAX
    pub(crate) fn read(&mut self, s: Bound<'_, PyString>) -> PyResult<Text> {
        // `str.isascii` is O(1) (a flag of the object); a subclass may override it.
        let exact = s.is_exact_instance_of::<PyString>();
        let isascii = pyo3::intern!(s.py(), "isascii");
        if !exact || s.call_method0(isascii)?.is_truthy()? {
            return PyBackedStr::try_from(s).map(Text::Python);
        }
        let len = s.len()?;
        self.wide.clear();
        self.wide.reserve(len);
        // SAFETY: `wide` has room for `len` code points, the length of `s`; CPython writes them all
        // (no NUL: `copy_null` is 0) or fails with an exception set.
        unsafe {
            let ok = pyo3::ffi::PyUnicode_AsUCS4(
                s.as_ptr(),
                self.wide.as_mut_ptr(),
                len as pyo3::ffi::Py_ssize_t,
                0,
            );
            if ok.is_null() {
                return Err(PyErr::fetch(s.py()));
            }
            self.wide.set_len(len);
        }
        match wide_to_utf8(&self.wide) {
            Some(t) => Ok(Text::Encoded(t, s.unbind())),
            None => PyBackedStr::try_from(s).map(Text::Python), // a lone surrogate: CPython's error
        }
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
