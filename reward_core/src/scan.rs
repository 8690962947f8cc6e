//! Linear-time scanners equivalent to the seeds' regexes and string methods.
//!
//! Seed 000 (`FORMAT_REGEX`, `NUMERIC_REGEX`, with the tags `re.escape`d, DOTALL, `re.search`):
//!
//! * `FORMAT = {RE}.*?{SS}(.+?){SE}[\s]*$` matches iff, with `r` the first occurrence of `RE` and
//!   `s` the first occurrence of `SS` at or after `r + len(RE)`, some occurrence `e` of `SE`
//!   starts at least one character after `s + len(SS)` and everything after `e + len(SE)` is
//!   whitespace (`$` without MULTILINE also matches before a final `\n`, which is whitespace
//!   anyway). `group(1)` is `text[s + len(SS) .. smallest such e]`. (An earlier `r` or `s` can
//!   always replace a later one, so the leftmost-first answer is the one above.)
//! * `NUMERIC = {SS}.*?[\s]*([-]?[\d\.\,]{1,})` matches from the first `SS`; the capture starts at
//!   the first position `p` after it where `text[p]` is in `Nd ∪ {'.', ','}`, or is `'-'` followed
//!   by such a character, and runs over the longest stretch of that class.
//!
//! Counting is Python's `str.count`: non-overlapping, left to right (memchr's `find_iter` too).

use memchr::memmem::Finder;

use crate::unicode::{is_decimal, py_rstrip, py_strip};

/// What one pass over a completion finds for the four seed-000 rewards.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Scan000<'a> {
    /// `FORMAT_REGEX.search(text).group(1)` (not stripped).
    pub format: Option<&'a str>,
    /// `NUMERIC_REGEX.search(text).group(1)`.
    pub numeric: Option<&'a str>,
    /// `text.count(tag)` for reasoning_end, solution_start, solution_end, capped at 2.
    pub counts: [u8; 3],
}

/// Compiled tags: one searcher per tag plus the first bytes of the three seed-000 tags.
#[derive(Debug, Clone)]
pub struct TagScanner {
    reasoning_start: Finder<'static>,
    reasoning_end: Finder<'static>,
    solution_start: Finder<'static>,
    solution_end: Finder<'static>,
    first_bytes: [u8; 3],
}

impl TagScanner {
    /// Tags must be non-empty (checked by [`crate::Scorer::new`]).
    pub fn new(
        reasoning_start: &str,
        reasoning_end: &str,
        solution_start: &str,
        solution_end: &str,
    ) -> Self {
        let f = |t: &str| Finder::new(t.as_bytes()).into_owned();
        Self {
            reasoning_start: f(reasoning_start),
            reasoning_end: f(reasoning_end),
            solution_start: f(solution_start),
            solution_end: f(solution_end),
            first_bytes: [
                reasoning_end.as_bytes()[0],
                solution_start.as_bytes()[0],
                solution_end.as_bytes()[0],
            ],
        }
    }

    /// One left-to-right pass over the candidate positions (bytes that start a tag, found with
    /// SIMD `memchr3`) tracking everything the seed-000 rewards need.
    pub fn scan000<'a>(&self, text: &'a str) -> Scan000<'a> {
        let b = text.as_bytes();
        let re = self.reasoning_end.needle();
        let ss = self.solution_start.needle();
        let se = self.solution_end.needle();
        let mut r: Option<usize> = None; // first RE
        let mut s: Option<usize> = None; // first SS at or after r + len(RE)
        let mut ss_first: Option<usize> = None;
        let mut counts = [0u8; 3];
        let mut free = [0usize; 3]; // end of the last counted occurrence, per tag
        let [b0, b1, b2] = self.first_bytes;
        let candidates: Box<dyn Iterator<Item = usize>> = if b0 == b1 && b1 == b2 {
            Box::new(memchr::memchr_iter(b0, b))
        } else {
            Box::new(memchr::memchr3_iter(b0, b1, b2, b))
        };
        for p in candidates {
            let rest = &b[p..];
            if starts_with(rest, re) {
                if p >= free[0] {
                    counts[0] = counts[0].saturating_add(1).min(2);
                    free[0] = p + re.len();
                }
                r.get_or_insert(p);
            }
            if starts_with(rest, ss) {
                if p >= free[1] {
                    counts[1] = counts[1].saturating_add(1).min(2);
                    free[1] = p + ss.len();
                }
                ss_first.get_or_insert(p);
                if s.is_none() && r.is_some_and(|r| p >= r + re.len()) {
                    s = Some(p);
                }
            }
            if starts_with(rest, se) && p >= free[2] {
                counts[2] = counts[2].saturating_add(1).min(2);
                free[2] = p + se.len();
            }
        }
        // After the pass, while the tail is still in cache: `SE` at `e` ends the match iff everything
        // after it is whitespace, i.e. `e + len(SE) >= ws` (start of the trailing whitespace), and
        // `(.+?)` took at least one character (bytes inside a character cannot start `SE`, so one
        // byte is enough). The smallest such `e` wins.
        let format = s.and_then(|s| {
            let cap = s + ss.len();
            let ws = py_rstrip(text).len();
            let from = (cap + 1).max(ws.saturating_sub(se.len()));
            let e = from + self.solution_end.find(b.get(from..)?)?;
            Some(&text[cap..e])
        });
        let numeric = ss_first.and_then(|p| numeric_capture(&text[p + ss.len()..]));
        Scan000 {
            format,
            numeric,
            counts,
        }
    }

    /// Seed 001 `strict_format_reward_func`'s test:
    /// `r.count(RS) == 2 and r.count(RE) == 2 and SS in r and r.rstrip().endswith(SE)`.
    pub fn strict001(&self, text: &str) -> bool {
        let b = text.as_bytes();
        self.reasoning_start.find_iter(b).take(3).count() == 2
            && self.reasoning_end.find_iter(b).take(3).count() == 2
            && self.solution_start.find(b).is_some()
            && py_rstrip(text)
                .as_bytes()
                .ends_with(self.solution_end.needle())
    }

    /// Seed 001's extraction: if `SS in r and SE in r`,
    /// `r.split(SS)[-1].split(SE)[0].strip()`, else `None`.
    pub fn boxed001<'a>(&self, text: &'a str) -> Option<&'a str> {
        let b = text.as_bytes();
        self.solution_end.find(b)?;
        let ss = self.solution_start.needle();
        // split() cuts at non-overlapping occurrences from the left; the last piece follows the
        // last of them.
        let last = self.solution_start.find_iter(b).last()?;
        let piece = &text[last + ss.len()..];
        let head = match self.solution_end.find(piece.as_bytes()) {
            Some(i) => &piece[..i],
            None => piece,
        };
        Some(py_strip(head))
    }
}

/// If a character of `[\d\.\,]` (Unicode `\d`) starts at byte `i`, its length in bytes.
#[inline]
fn class_len(rest: &str, i: usize) -> Option<usize> {
    let b = *rest.as_bytes().get(i)?;
    if b < 0x80 {
        return (b.is_ascii_digit() || b == b'.' || b == b',').then_some(1);
    }
    let c = rest[i..].chars().next()?;
    is_decimal(c).then(|| c.len_utf8())
}

/// Index of the first byte at or after `from` that can start a capture: an ASCII digit, `.`, `,`,
/// `-` (all in `0x2C..=0x39`, with `/` as a harmless false positive) or any non-ASCII byte (a
/// Unicode digit's first byte). Eight bytes at a time (SWAR), since loops without a number after
/// the solution tag make this scan the whole completion.
#[inline]
fn next_candidate(b: &[u8], from: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let mut i = from;
    while i + 8 <= b.len() {
        let mut chunk = [0u8; 8];
        chunk.copy_from_slice(&b[i..i + 8]);
        let w = u64::from_le_bytes(chunk);
        let v = w & !HI; // low 7 bits of each byte: adding below cannot carry across bytes
        let ge_lo = v.wrapping_add(LO * (0x80 - 0x2C)); // high bit set iff byte >= 0x2C
        let ge_hi = v.wrapping_add(LO * (0x80 - 0x3A)); // high bit set iff byte >= 0x3A
        let hits = (w | (ge_lo & !ge_hi)) & HI;
        if hits != 0 {
            return Some(i + (hits.trailing_zeros() / 8) as usize);
        }
        i += 8;
    }
    b[i..]
        .iter()
        .position(|&c| (0x2C..=0x39).contains(&c) || c >= 0x80)
        .map(|k| i + k)
}

/// `hay.starts_with(tag)`, checking the last byte first: most candidates are rejected there
/// without a `memcmp` call.
#[inline]
fn starts_with(hay: &[u8], tag: &[u8]) -> bool {
    hay.len() >= tag.len() && hay[tag.len() - 1] == tag[tag.len() - 1] && hay[..tag.len()] == *tag
}

/// `[\s]*([-]?[\d\.\,]{1,})` searched lazily from the start of `rest` (see the module docs).
/// A table skips the bytes that cannot start the capture; non-ASCII characters are decoded.
pub fn numeric_capture(rest: &str) -> Option<&str> {
    let b = rest.as_bytes();
    let mut i = 0;
    let start = loop {
        i = next_candidate(b, i)?;
        let c = b[i];
        if class_len(rest, i).is_some() || (c == b'-' && class_len(rest, i + 1).is_some()) {
            break i;
        }
        i += if c < 0x80 {
            1
        } else {
            rest[i..].chars().next().map_or(1, char::len_utf8)
        };
    };
    let mut end = if b[start] == b'-' { start + 1 } else { start };
    while let Some(n) = class_len(rest, end) {
        end += n;
    }
    Some(&rest[start..end])
}

/// `re.fullmatch(r"-?\d+", s)`.
pub fn is_int_literal(s: &str) -> bool {
    let digits = s.strip_prefix('-').unwrap_or(s);
    !digits.is_empty() && digits.chars().all(is_decimal)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seed() -> TagScanner {
        TagScanner::new(
            "<start_working_out>",
            "<end_working_out>",
            "<SOLUTION>",
            "</SOLUTION>",
        )
    }

    #[test]
    fn format_table() {
        let t = seed();
        let cases: &[(&str, Option<&str>)] = &[
            ("<end_working_out><SOLUTION>42</SOLUTION>", Some("42")), // well formed
            ("<end_working_out><SOLUTION>42</SOLUTION>\n \t", Some("42")), // trailing whitespace
            ("<end_working_out><SOLUTION>42</SOLUTION>.", None),      // text after the end tag
            ("<end_working_out><SOLUTION></SOLUTION>", None),         // empty capture
            (
                "<end_working_out><SOLUTION></SOLUTION></SOLUTION>",
                Some("</SOLUTION>"),
            ), // lazy but non-empty
            ("<SOLUTION>1</SOLUTION><end_working_out>", None),        // wrong order
            (
                "<end_working_out>x<SOLUTION>1</SOLUTION>y</SOLUTION>",
                Some("1</SOLUTION>y"),
            ), // last SE valid
            (
                "<end_working_out><SOLUTION>a<SOLUTION>b</SOLUTION>",
                Some("a<SOLUTION>b"),
            ), // first SS
            ("<end_working_out><SOLUTION>1</SOLUTION>\u{3000}", Some("1")), // Unicode space
            ("<end_working_out><SOLUTION>1</SOLUTION>\u{200b}", None), // zero-width space is not \s
        ];
        for &(text, want) in cases {
            assert_eq!(t.scan000(text).format, want, "{text:?}");
        }
    }

    #[test]
    fn numeric_table() {
        let cases: &[(&str, Option<&str>)] = &[
            (" 42", Some("42")),
            ("x -1,234.5y", Some("-1,234.5")),
            ("--5", Some("-5")),
            ("- 5", Some("5")),
            ("abc", None),
            ("\u{663}\u{664}", Some("\u{663}\u{664}")),
            ("...", Some("...")),
            ("-", None),
        ];
        for &(text, want) in cases {
            assert_eq!(numeric_capture(text), want, "{text:?}");
        }
    }

    #[test]
    fn counts_non_overlapping() {
        let t = TagScanner::new("aa", "aa", "b", "c");
        assert_eq!(t.scan000("aaa").counts, [1, 0, 0]);
        assert_eq!(t.scan000("aaaa").counts, [2, 0, 0]);
    }

    #[test]
    fn boxed() {
        let t = TagScanner::new("<<", ">>", "<<\\boxed{", "}>>");
        assert_eq!(t.boxed001("<<a>> <<\\boxed{ 7 }>>"), Some("7"));
        assert_eq!(t.boxed001("<<\\boxed{1}>> <<\\boxed{2"), Some("2"));
        assert_eq!(t.boxed001("<<\\boxed{1"), None);
        assert!(t.strict001("<<a>> <<\\boxed{7}>>  \n"));
        assert!(!t.strict001("<<a>> <<\\boxed{7}>> x"));
        assert!(is_int_literal("-12"));
        assert!(!is_int_literal("-"));
        assert!(!is_int_literal("1.0"));
    }
}
