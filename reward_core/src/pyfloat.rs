//! Python's `float(str)`, exactly (CPython `Objects/floatobject.c` `PyFloat_FromString`).
//!
//! 1. `_PyUnicode_TransformDecimalAndSpaceToASCII`: a non-ASCII string has each Unicode space turned
//!    into `' '` and each `Nd` digit into its ASCII digit; any other non-ASCII character (or DEL)
//!    makes the string invalid. ASCII characters pass unchanged (so `\x1c` is *not* a space here).
//! 2. Strip ASCII whitespace (`Py_ISSPACE`: space, `\t\n\v\f\r`); nothing left → invalid.
//! 3. `_Py_string_to_number_with_underscores` (PEP 515): an `_` must sit between two digits.
//! 4. `PyOS_string_to_double`: sign, `inf`/`infinity`/`nan` in any case, decimal digits with an
//!    optional point (`3.`, `.5`) and exponent; correctly rounded; overflow gives ±inf. Rust's
//!    `f64::from_str` accepts the same grammar and rounds the same way.

use crate::unicode::{decimal_value, is_py_space};

/// `float(s)`, or `None` where Python raises `ValueError`.
pub fn py_float(s: &str) -> Option<f64> {
    if s.is_ascii() {
        parse_ascii(s.as_bytes())
    } else {
        let mut buf = Vec::with_capacity(s.len());
        for c in s.chars() {
            let cp = c as u32;
            if cp < 127 {
                buf.push(cp as u8);
            } else if is_py_space(c) {
                buf.push(b' ');
            } else {
                buf.push(b'0' + decimal_value(c)? as u8);
            }
        }
        parse_ascii(&buf)
    }
}

#[inline]
fn is_ascii_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

fn parse_ascii(b: &[u8]) -> Option<f64> {
    let start = b.iter().position(|&c| !is_ascii_space(c))?;
    let end = b.iter().rposition(|&c| !is_ascii_space(c))? + 1;
    let b = &b[start..end];
    if memchr::memchr(b'_', b).is_none() {
        return std::str::from_utf8(b).ok()?.parse().ok();
    }
    let mut clean = Vec::with_capacity(b.len());
    let mut prev = 0u8;
    for &c in b {
        if c == b'_' {
            if !prev.is_ascii_digit() {
                return None;
            }
        } else {
            if prev == b'_' && !c.is_ascii_digit() {
                return None;
            }
            clean.push(c);
        }
        prev = c;
    }
    if prev == b'_' {
        return None;
    }
    std::str::from_utf8(&clean).ok()?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::py_float;

    #[test]
    fn table() {
        let cases: &[(&str, Option<f64>)] = &[
            ("42", Some(42.0)),
            (" -0.5\n", Some(-0.5)),           // surrounding ASCII whitespace
            ("1_000", Some(1000.0)),           // PEP 515
            ("1__0", None),                    // double underscore
            ("_1", None),                      // leading underscore
            ("1_", None),                      // trailing underscore
            ("1_.5", None),                    // underscore before the point
            ("1e1_0", Some(1e10)),             // underscore in the exponent
            ("3.", Some(3.0)),                 // trailing point
            (".5", Some(0.5)),                 // leading point
            (".", None),                       // lone point
            ("1e", None),                      // exponent without digits
            ("1.e5", Some(1e5)),               // point then exponent
            ("InFiNiTy", Some(f64::INFINITY)), // any case
            ("-inf", Some(f64::NEG_INFINITY)), // signed
            ("1e999", Some(f64::INFINITY)),    // overflow
            ("1e-999", Some(0.0)),             // underflow
            ("0x10", None),                    // no hex
            ("1,234", None),                   // no thousands separator
            ("\u{663}\u{664}", Some(34.0)),    // Arabic-Indic digits
            ("\u{a0}7\u{3000}", Some(7.0)),    // Unicode spaces around
            ("\x1c7", None),                   // ASCII separators are not float() spaces
            ("7\u{b2}", None),                 // superscript two is not Nd
            ("", None),                        // empty
            ("\u{2003}", None),                // only a Unicode space
            ("1 2", None),                     // inner space
        ];
        for &(s, want) in cases {
            assert_eq!(py_float(s), want, "{s:?}");
        }
        assert!(py_float("-NaN").unwrap().is_nan());
    }
}
