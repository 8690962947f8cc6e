//! Python's character classes, as CPython defines them.
//!
//! * [`is_py_space`] is `Py_UNICODE_ISSPACE`: what `str.strip()`, `str.isspace()` and `re`'s `\s`
//!   (str patterns) use. It is *not* `char::is_whitespace`: Python counts `\x1c`–`\x1f` as
//!   whitespace, Rust does not.
//! * [`decimal_value`] is `Py_UNICODE_TODECIMAL`: the Unicode `Nd` digits that `re`'s `\d` matches
//!   and that `float()` accepts. This set grows with the Unicode version of the running Python
//!   (3.10: 13.0, 3.11: 14.0, 3.12: 15.0, 3.13: 15.1, 3.14: 16.0), so every block carries the
//!   version that introduced it and [`set_unicode_version`] hides the newer ones.

use std::sync::atomic::{AtomicU32, Ordering};

/// `major * 100 + minor`; the default (no Python around) is the newest table.
static UNICODE_VERSION: AtomicU32 = AtomicU32::new(LATEST_UNICODE);

/// Newest Unicode version the digit table knows (16.0).
pub const LATEST_UNICODE: u32 = 1600;

/// Set the Unicode version whose `Nd` set [`decimal_value`] follows (Python passes
/// `unicodedata.unidata_version` at import).
pub fn set_unicode_version(major: u32, minor: u32) {
    UNICODE_VERSION.store(major * 100 + minor, Ordering::Relaxed);
}

/// The Unicode version in use, as `(major, minor)`.
pub fn unicode_version() -> (u32, u32) {
    let v = UNICODE_VERSION.load(Ordering::Relaxed);
    (v / 100, v % 100)
}

/// `Py_UNICODE_ISSPACE` (CPython `Objects/unicodetype_db.h`, `_PyUnicode_IsWhitespace`, plus the
/// ASCII table that includes the file/group/record/unit separators `\x1c`–`\x1f`).
#[inline]
pub fn is_py_space(c: char) -> bool {
    match c {
        '\t'..='\r' | '\x1c'..='\x1f' | ' ' => true,
        _ if (c as u32) < 0x85 => false,
        '\u{85}'
        | '\u{a0}'
        | '\u{1680}'
        | '\u{2000}'..='\u{200a}'
        | '\u{2028}'
        | '\u{2029}'
        | '\u{202f}'
        | '\u{205f}'
        | '\u{3000}' => true,
        _ => false,
    }
}

/// `str.strip()` with no argument.
#[inline]
pub fn py_strip(s: &str) -> &str {
    s.trim_matches(is_py_space)
}

/// `str.rstrip()` with no argument.
#[inline]
pub fn py_rstrip(s: &str) -> &str {
    s.trim_end_matches(is_py_space)
}

/// Runs of `Nd` digits: (first, last, Unicode version that added the run). Each run is a whole
/// number of 0–9 sequences starting at a zero, so a digit's value is `(c - first) % 10`.
/// Generated from CPython 3.11's `unicodedata` (14.0) and ucd-generate's 16.0 table.
const ND_RUNS: &[(u32, u32, u32)] = &[
    (0x30, 0x39, 0),
    (0x660, 0x669, 0),
    (0x6f0, 0x6f9, 0),
    (0x7c0, 0x7c9, 0),
    (0x966, 0x96f, 0),
    (0x9e6, 0x9ef, 0),
    (0xa66, 0xa6f, 0),
    (0xae6, 0xaef, 0),
    (0xb66, 0xb6f, 0),
    (0xbe6, 0xbef, 0),
    (0xc66, 0xc6f, 0),
    (0xce6, 0xcef, 0),
    (0xd66, 0xd6f, 0),
    (0xde6, 0xdef, 0),
    (0xe50, 0xe59, 0),
    (0xed0, 0xed9, 0),
    (0xf20, 0xf29, 0),
    (0x1040, 0x1049, 0),
    (0x1090, 0x1099, 0),
    (0x17e0, 0x17e9, 0),
    (0x1810, 0x1819, 0),
    (0x1946, 0x194f, 0),
    (0x19d0, 0x19d9, 0),
    (0x1a80, 0x1a89, 0),
    (0x1a90, 0x1a99, 0),
    (0x1b50, 0x1b59, 0),
    (0x1bb0, 0x1bb9, 0),
    (0x1c40, 0x1c49, 0),
    (0x1c50, 0x1c59, 0),
    (0xa620, 0xa629, 0),
    (0xa8d0, 0xa8d9, 0),
    (0xa900, 0xa909, 0),
    (0xa9d0, 0xa9d9, 0),
    (0xa9f0, 0xa9f9, 0),
    (0xaa50, 0xaa59, 0),
    (0xabf0, 0xabf9, 0),
    (0xff10, 0xff19, 0),
    (0x104a0, 0x104a9, 0),
    (0x10d30, 0x10d39, 0),
    (0x10d40, 0x10d49, 1600), // Garay
    (0x11066, 0x1106f, 0),
    (0x110f0, 0x110f9, 0),
    (0x11136, 0x1113f, 0),
    (0x111d0, 0x111d9, 0),
    (0x112f0, 0x112f9, 0),
    (0x11450, 0x11459, 0),
    (0x114d0, 0x114d9, 0),
    (0x11650, 0x11659, 0),
    (0x116c0, 0x116c9, 0),
    (0x116d0, 0x116e3, 1600), // Myanmar Extended-C
    (0x11730, 0x11739, 0),
    (0x118e0, 0x118e9, 0),
    (0x11950, 0x11959, 0),
    (0x11bf0, 0x11bf9, 1600), // Sunuwar
    (0x11c50, 0x11c59, 0),
    (0x11d50, 0x11d59, 0),
    (0x11da0, 0x11da9, 0),
    (0x11f50, 0x11f59, 1500), // Kawi
    (0x16130, 0x16139, 1600), // Gurung Khema
    (0x16a60, 0x16a69, 0),
    (0x16ac0, 0x16ac9, 1400), // Tangsa
    (0x16b50, 0x16b59, 0),
    (0x16d70, 0x16d79, 1600), // Kirat Rai
    (0x1ccf0, 0x1ccf9, 1600), // outlined digits
    (0x1d7ce, 0x1d7ff, 0),
    (0x1e140, 0x1e149, 0),
    (0x1e2f0, 0x1e2f9, 0),
    (0x1e4f0, 0x1e4f9, 1500), // Nag Mundari
    (0x1e5f1, 0x1e5fa, 1600), // Ol Onal
    (0x1e950, 0x1e959, 0),
    (0x1fbf0, 0x1fbf9, 0),
];

/// The value of a decimal digit (`Nd`) under the current Unicode version, else `None`.
#[inline]
pub fn decimal_value(c: char) -> Option<u32> {
    let cp = c as u32;
    if cp < 0x80 {
        return c.to_digit(10);
    }
    if cp < 0x660 {
        return None;
    }
    let i = ND_RUNS.partition_point(|&(_, last, _)| last < cp);
    let &(first, _, added) = ND_RUNS.get(i)?;
    if cp < first || added > UNICODE_VERSION.load(Ordering::Relaxed) {
        return None;
    }
    Some((cp - first) % 10)
}

/// `re`'s `\d` on a str pattern (`Py_UNICODE_ISDECIMAL`).
#[inline]
pub fn is_decimal(c: char) -> bool {
    decimal_value(c).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spaces() {
        for c in [
            '\t', '\n', '\x0b', '\x0c', '\r', '\x1c', '\x1f', ' ', '\u{85}', '\u{a0}', '\u{3000}',
        ] {
            assert!(is_py_space(c), "{c:?}");
        }
        for c in [
            'a', '\0', '\x1b', '\u{200b}', '\u{180e}', '\u{feff}', '\u{7f}',
        ] {
            assert!(!is_py_space(c), "{c:?}");
        }
        assert_eq!(py_strip("\x1c 4\u{a0}\u{2028}"), "4");
    }

    #[test]
    fn digits() {
        assert_eq!(decimal_value('7'), Some(7));
        assert_eq!(decimal_value('\u{663}'), Some(3)); // ARABIC-INDIC DIGIT THREE
        assert_eq!(decimal_value('\u{1d7ff}'), Some(9)); // MATHEMATICAL MONOSPACE DIGIT NINE
        assert_eq!(decimal_value('\u{b2}'), None); // SUPERSCRIPT TWO is No, not Nd
        assert_eq!(decimal_value('\u{2167}'), None); // ROMAN NUMERAL EIGHT is Nl
        for w in ND_RUNS.windows(2) {
            assert!(w[0].1 < w[1].0);
        }
        for &(a, b, _) in ND_RUNS {
            assert_eq!((b - a + 1) % 10, 0);
        }
    }
}
