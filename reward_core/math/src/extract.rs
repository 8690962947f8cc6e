//! Where the answer is in a text (one pass per rule, no regular expressions, no backtracking).
//!
//! A text is read the way a human grader reads a solution (the rules are listed in the module docs
//! of `math`, "Where the answer is"): boxes first, and boxes only when there is one; then the final
//! "answer" phrasing; then the last math segment or number of the prose. The result is one or more
//! segments of the text; several segments are one answer, a set (`\boxed{1} and \boxed{2}`).

use std::sync::OnceLock;

use memchr::memmem::{Finder, FinderRev};

use crate::lex::MAX_LEN;

/// Most segments one answer is made of (`\boxed{1}, \boxed{2}, …`); further ones are dropped.
pub const MAX_SEGMENTS: usize = 64;
/// Longest prose read as a text answer when it holds no number and no math.
const MAX_TEXT_ANSWER: usize = 256;
/// Longest text between two boxes (or math segments) that can still join them into one answer.
const MAX_GAP: usize = 96;

/// Where the answer of a text is: one piece or several (a set), or none (an empty or unclosed
/// last box).
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Answer<'a> {
    pub pieces: Vec<Piece<'a>>,
    /// The pieces are boxes (several boxes are always one set); else math segments of prose,
    /// which are one set only when they read alike (see `math::answer_tokens`).
    pub boxed: bool,
}

/// One piece of an answer: its text, and whether it is display math (`\[…\]`, `$$…$$`,
/// `\begin{align*}`), whose last line is what it states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Piece<'a> {
    pub text: &'a str,
    pub display: bool,
}

impl<'a> Piece<'a> {
    fn plain(text: &'a str) -> Self {
        Piece {
            text,
            display: false,
        }
    }
}

/// The answer of `s` (see [`Answer`] and the module docs).
pub fn answer(s: &str) -> Answer<'_> {
    let s = clip(s);
    if let Some(boxes) = boxed_chain(s) {
        return Answer {
            pieces: boxes.into_iter().map(Piece::plain).collect(),
            boxed: true,
        };
    }
    let segs = math_segments(s);
    let skip = Skip::new(s, &segs);
    let pieces =
        after_anchor(s, &segs, &skip).map_or_else(|| in_prose(s, &segs, &skip), |(p, _)| p);
    Answer {
        pieces,
        boxed: false,
    }
}

/// The segments' texts of [`answer`], for tests and callers that need no more.
pub fn answer_segments(s: &str) -> Vec<&str> {
    answer(s).pieces.iter().map(|p| p.text).collect()
}

/// No box and no answer phrase: the last math segment or number run of the prose, whichever is
/// last; a text that is no prose is its own answer.
fn in_prose<'a>(s: &'a str, segs: &[Seg], skip: &Skip) -> Vec<Piece<'a>> {
    if segs.is_empty() && !is_prose(s, skip) {
        return vec![Piece::plain(s)];
    }
    // The last math segment that is more than a mention of a variable (`the largest $n$ is 34`).
    let real = segs
        .iter()
        .rposition(|g| !is_mention(&s[g.inner.0..g.inner.1]));
    // A number run before that segment loses to it (and no run reaches into a segment): only the
    // prose after it is searched.
    let from = real.map_or(0, |k| segs[k].end);
    match last_number_run(s, skip, from, s.len()) {
        Some((a, e)) => vec![Piece::plain(&s[a..e])],
        None => match real.or(segs.len().checked_sub(1)) {
            Some(k) => segment_chain(s, segs, k),
            // prose with no number and no math: a short text answer (`all real numbers`), else none
            None if s.len() <= MAX_TEXT_ANSWER => vec![Piece::plain(s)],
            None => Vec::new(),
        },
    }
}

/// `s` cut to [`MAX_LEN`] bytes (at a character boundary).
fn clip(s: &str) -> &str {
    if s.len() <= MAX_LEN {
        return s;
    }
    let mut end = MAX_LEN;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// A searcher for `pat`, built once per process (building one costs about as much as searching a
/// short answer, and every answer is searched for the same few patterns).
fn finder(cell: &'static OnceLock<Finder<'static>>, pat: &'static str) -> &'static Finder<'static> {
    cell.get_or_init(|| Finder::new(pat))
}
static BOXED: OnceLock<Finder<'static>> = OnceLock::new();
static FBOX: OnceLock<Finder<'static>> = OnceLock::new();
static TEXT: OnceLock<Finder<'static>> = OnceLock::new();
static ANSWER: OnceLock<Finder<'static>> = OnceLock::new();

// ---- boxes ---------------------------------------------------------------------------------------

/// The boxes of a text from the last one back: every `\boxed` and `\fbox` is found in one
/// forward pass each (SIMD), then walked back, so reading a chain of boxes is linear.
struct Boxes {
    /// (start, end of the command) of each box command, in order; `k` of them are left.
    at: Vec<(usize, usize)>,
    k: usize,
}

impl Boxes {
    fn new(s: &str) -> Self {
        let b = s.as_bytes();
        let mut at: Vec<(usize, usize)> = finder(&BOXED, "\\boxed")
            .find_iter(b)
            .map(|i| (i, i + 6))
            .chain(finder(&FBOX, "\\fbox").find_iter(b).map(|i| (i, i + 5)))
            .collect();
        at.sort_unstable();
        let k = at.len();
        Boxes { at, k }
    }
    /// The last box starting before `before`: (its start, the end of its command).
    fn before(&mut self, before: usize) -> Option<(usize, usize)> {
        while self.k > 0 && self.at[self.k - 1].0 >= before {
            self.k -= 1;
        }
        self.k.checked_sub(1).map(|j| self.at[j])
    }
}

/// The content of the box whose command ends at `after` (`{…}` with braces matched, looked for
/// before `limit`; or `\boxed 5`, up to a space or `$`), and where the box ends.
fn box_content(s: &str, after: usize, limit: usize) -> Option<(usize, usize, usize)> {
    let b = s.as_bytes();
    let mut i = after;
    while i < limit && b[i].is_ascii_whitespace() {
        i += 1;
    }
    if i < limit && b[i] == b'{' {
        let mut depth = 0usize;
        for (j, &c) in b.iter().enumerate().take(limit).skip(i) {
            match c {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some((i + 1, j, j + 1));
                    }
                }
                _ => {}
            }
        }
        return None;
    }
    // `\boxed 5`: a command name continues with a letter (`\boxedx` is no box)
    if i == after || i >= limit {
        return None;
    }
    let end = s[i..limit]
        .find(|c: char| c.is_whitespace() || c == '$')
        .map_or(limit, |k| i + k);
    (end > i).then_some((i, end, end))
}

/// The boxes of `s` that form its answer: the last one, with the ones before it that only
/// connectors separate from it (`\boxed{1} and \boxed{2}`, `$\boxed{1}\boxed{2}$`). None when `s`
/// has no box; empty when the last box is unclosed.
fn boxed_chain(s: &str) -> Option<Vec<&str>> {
    boxed_span(s).map(|(boxes, _)| boxes)
}

/// [`boxed_chain`], and the text from the first of its boxes to the end of the last.
fn boxed_span(s: &str) -> Option<(Vec<&str>, &str)> {
    let mut boxes = Boxes::new(s);
    let (start, after) = boxes.before(s.len())?;
    let Some((a, b, last_end)) = box_content(s, after, s.len()) else {
        return Some((Vec::new(), ""));
    };
    let mut out = vec![&s[a..b]];
    let mut first = start;
    while out.len() < MAX_SEGMENTS {
        let Some((st, af)) = boxes.before(first) else {
            break;
        };
        // a box inside the one after it (`\boxed{\boxed{5}}`) is that box
        let Some((a, b, end)) = box_content(s, af, first) else {
            break;
        };
        if !is_connector(&s[end..first]) {
            break;
        }
        out.push(&s[a..b]);
        first = st;
    }
    out.reverse();
    Some((out, &s[first..last_end]))
}

/// The text of a completion that holds its answer, when it says so: its boxes (one box: the
/// content; several joined boxes: from the first to the last, `\boxed{1} and \boxed{2}`), else
/// an answer phrase and the sentence after it (`The final answer is $5$`, `#### 72`). None for
/// prose without either: a reward needs the answer marked.
pub fn marked_answer(s: &str) -> Option<&str> {
    let s = clip(s);
    if let Some((boxes, span)) = boxed_span(s) {
        return match boxes.as_slice() {
            [] => None,
            [one] => Some(one),
            _ => Some(span),
        };
    }
    let segs = math_segments(s);
    let skip = Skip::new(s, &segs);
    after_anchor(s, &segs, &skip).map(|(_, span)| span)
}

/// Whether `gap`, the text between two answers, only joins them: spacing, math delimiters,
/// punctuation, `and`/`or` (bare or in `\text{}`), and a short label before the second answer
/// (`$x = \boxed{1}$ and $y = \boxed{2}$`).
fn is_connector(gap: &str) -> bool {
    if gap.len() > MAX_GAP {
        return false;
    }
    let b = gap.as_bytes();
    let mut i = 0;
    let mut label = false; // a label (`y =`) was read: only spacing may follow it
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() || b",;.&$*{}~".contains(&c) {
            i += 1;
            continue;
        }
        if c == b'\\' {
            let name_end = b[i + 1..]
                .iter()
                .position(|c| !c.is_ascii_alphabetic())
                .map_or(b.len(), |k| i + 1 + k);
            let name = &gap[i + 1..name_end];
            if name.is_empty() {
                // `\,` `\;` `\ ` `\(` `\)` `\[` `\]` `\\`
                if b.get(i + 1).is_some_and(|c| b" ,;:!()[]\\".contains(c)) {
                    i += 2;
                    continue;
                }
                return false;
            }
            if !matches!(
                name,
                "quad" | "qquad" | "text" | "textbf" | "mbox" | "mathrm" | "textrm" | "hspace"
            ) {
                return false;
            }
            i = name_end;
            continue;
        }
        if label {
            return false;
        }
        if c.is_ascii_alphabetic() {
            let end = b[i..]
                .iter()
                .position(|c| !c.is_ascii_alphanumeric() && *c != b'_')
                .map_or(b.len(), |k| i + k);
            let word = gap[i..end].to_ascii_lowercase();
            let rest = gap[end..].trim_start();
            if word == "and" || word == "or" {
                i = end;
                continue;
            }
            if end - i <= 3 && rest.starts_with('=') {
                label = true;
                i = gap.len() - rest.len() + 1;
                continue;
            }
        }
        return false;
    }
    true
}

// ---- math segments ------------------------------------------------------------------------------

/// A math segment of prose: `$…$`, `$$…$$`, `\(…\)`, `\[…\]` (inline ones within one line).
#[derive(Debug, Clone, Copy)]
pub struct Seg {
    pub start: usize,
    pub end: usize,
    pub inner: (usize, usize),
    pub display: bool,
}

impl Seg {
    fn piece<'a>(&self, s: &'a str) -> Piece<'a> {
        Piece {
            text: &s[self.inner.0..self.inner.1],
            display: self.display,
        }
    }
}

/// The math segments of `s`, in order. A `$` followed by a digit opens one only if it is closed on
/// its line by a `$` after a non-space and before no digit: `$10,200 + $255` is money, not math.
pub fn math_segments(s: &str) -> Vec<Seg> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    // The next `\]`, `\)`, `$$`, newline, `\end{align*}`… at or after the search position (searched once each: the position
    // only grows, so a found one stays the next until passed, and a missing one stays missing).
    let mut next: [Option<Option<usize>>; BLANK + 1] = [None; BLANK + 1];
    let mut finders: [Option<Finder<'static>>; BLANK + 1] = Default::default();
    let mut find = |k: usize, pat: &'static str, from: usize| -> Option<usize> {
        match next[k] {
            Some(None) => return None,
            Some(Some(p)) if p >= from => return Some(p),
            _ => {}
        }
        // (a searcher is built once per pattern: `$$ $$ $$ …` looks for `$$` once per segment)
        let f = finders[k].get_or_insert_with(|| Finder::new(pat));
        let r = b.get(from..).and_then(|t| f.find(t)).map(|p| from + p);
        next[k] = Some(r);
        r
    };
    let mut i = 0;
    while i < b.len() {
        let (open, kind, close) = match b[i] {
            b'\\' if b.get(i + 1) == Some(&b'[') => (2, 0, "\\]"),
            b'\\' if b.get(i + 1) == Some(&b'(') => (2, 1, "\\)"),
            b'\\' if s[i..].starts_with("\\begin{") => match display_env(&s[i + 6..]) {
                Some(k) => (6 + DISPLAY_ENVS[k].0.len(), 4 + k, DISPLAY_ENVS[k].1),
                None => {
                    i += 2;
                    continue;
                }
            },
            b'\\' => {
                i += 2; // `\$` is a dollar sign
                continue;
            }
            b'$' if b.get(i + 1) == Some(&b'$') => (2, 2, "$$"),
            b'$' => {
                match inline_close(b, i) {
                    Some(k) => {
                        out.push(Seg {
                            start: i,
                            end: k + 1,
                            inner: (i + 1, k),
                            display: false,
                        });
                        i = k + 1;
                    }
                    None => i += 1,
                }
                continue;
            }
            _ => {
                i += 1;
                continue;
            }
        };
        let Some(k) = find(kind, close, i + open) else {
            i += open;
            continue;
        };
        if kind == 1 && find(3, "\n", i + open).is_some_and(|nl| nl < k) {
            i += open; // `\( … \)` is inline: within one line
            continue;
        }
        if kind < 4 && find(BLANK, "\n\n", i + open).is_some_and(|nl| nl < k) {
            i += open; // no math but an environment spans a paragraph break (LaTeX forbids it)
            continue;
        }
        out.push(Seg {
            start: i,
            end: k + close.len(),
            inner: (i + open, k),
            display: kind != 1,
        });
        i = k + close.len();
    }
    out
}

/// The search slot of the next blank line in [`math_segments`] (after those of the closings).
const BLANK: usize = 4 + DISPLAY_ENVS.len();

/// Display environments (`\begin{align*}`…): the text after `\begin` and the closing command.
const DISPLAY_ENVS: [(&str, &str); 10] = [
    ("{align*}", "\\end{align*}"),
    ("{align}", "\\end{align}"),
    ("{equation*}", "\\end{equation*}"),
    ("{equation}", "\\end{equation}"),
    ("{eqnarray*}", "\\end{eqnarray*}"),
    ("{eqnarray}", "\\end{eqnarray}"),
    ("{gather*}", "\\end{gather*}"),
    ("{gather}", "\\end{gather}"),
    ("{multline*}", "\\end{multline*}"),
    ("{multline}", "\\end{multline}"),
];

/// Which display environment `rest` (the text after `\begin`) opens.
fn display_env(rest: &str) -> Option<usize> {
    DISPLAY_ENVS
        .iter()
        .position(|(open, _)| rest.starts_with(open))
}

/// The `$` that closes the inline segment opened at `open`, on the same line.
fn inline_close(b: &[u8], open: usize) -> Option<usize> {
    let money = b.get(open + 1).is_some_and(u8::is_ascii_digit);
    let mut j = open + 1;
    while j < b.len() {
        match b[j] {
            b'\n' => return None,
            b'\\' => j += 2,
            b'$' => {
                if !money {
                    return (j > open + 1).then_some(j);
                }
                let after_digit = b.get(j + 1).is_some_and(u8::is_ascii_digit);
                if !b[j - 1].is_ascii_whitespace() && !after_digit {
                    return Some(j);
                }
                return None;
            }
            _ => j += 1,
        }
    }
    None
}

/// The segment at index `k` with the segments before it that only connectors separate from it
/// (`$x = 1$ or $x = 2$`).
fn segment_chain<'a>(s: &'a str, segs: &[Seg], k: usize) -> Vec<Piece<'a>> {
    let mut out = vec![segs[k].piece(s)];
    let mut j = k;
    while j > 0 && out.len() < MAX_SEGMENTS {
        let (prev, next) = (segs[j - 1], segs[j]);
        let gap = &s[prev.end..next.start];
        // (a paragraph break ends the answer: segments of two paragraphs are never one)
        if gap.trim().is_empty() || !is_connector(gap) || gap.contains("\n\n") {
            break;
        }
        out.push(prev.piece(s));
        j -= 1;
    }
    out.reverse();
    out
}

/// A math segment that only names a variable (`$n$`, `$AB$`, `$x_1$`, `$a_{12}$`): a mention, not
/// an answer.
fn is_mention(inner: &str) -> bool {
    let t = inner.trim().as_bytes();
    if t.len() > 9 {
        return false; // longer than `abc_{123}` (and every segment of a text is asked)
    }
    let (name, sub) = match t.iter().position(|&c| c == b'_') {
        Some(k) => (&t[..k], &t[k + 1..]),
        None => (t, &t[t.len()..]),
    };
    let sub = sub
        .strip_prefix(b"{")
        .and_then(|x| x.strip_suffix(b"}"))
        .unwrap_or(sub);
    !name.is_empty()
        && name.len() <= 3
        && name.iter().all(u8::is_ascii_alphabetic)
        && sub.len() <= 3
        && sub.iter().all(u8::is_ascii_alphanumeric)
}

// ---- prose ---------------------------------------------------------------------------------------

/// Byte ranges of `s` that prose rules do not read: math segments and `\text{…}` asides.
#[derive(Debug)]
pub struct Skip {
    /// For each byte, the end of the skipped range that holds it, or 0 (empty when nothing is
    /// skipped): one look-up per byte, however many ranges a text has.
    ends: Vec<u32>,
}

impl Skip {
    fn new(s: &str, segs: &[Seg]) -> Skip {
        let mut ranges: Vec<(usize, usize)> = segs.iter().map(|g| (g.start, g.end)).collect();
        let b = s.as_bytes();
        let text = finder(&TEXT, "\\text{");
        let mut i = 0;
        while let Some(k) = text.find(&b[i..]) {
            let open = i + k + 5;
            let mut depth = 0usize;
            let mut end = b.len();
            for (j, &c) in b.iter().enumerate().skip(open) {
                match c {
                    b'{' => depth += 1,
                    b'}' => {
                        depth -= 1;
                        if depth == 0 {
                            end = j + 1;
                            break;
                        }
                    }
                    _ => {}
                }
            }
            ranges.push((i + k, end));
            i = end;
            if i >= b.len() {
                break;
            }
        }
        ranges.sort_unstable();
        Skip::of(&ranges, b.len())
    }
    /// No range skipped.
    fn none() -> Skip {
        Skip { ends: Vec::new() }
    }
    /// A byte belongs to the last range that starts at or before it, if that one reaches it.
    fn of(ranges: &[(usize, usize)], len: usize) -> Skip {
        if ranges.is_empty() {
            return Skip::none();
        }
        let mut ends = vec![0u32; len];
        for (k, &(a, e)) in ranges.iter().enumerate() {
            let next = ranges.get(k + 1).map_or(len, |r| r.0);
            for x in &mut ends[a.min(len)..e.min(next).min(len)] {
                *x = e as u32; // (texts are at most `MAX_LEN` bytes)
            }
        }
        Skip { ends }
    }
    /// The end of the skipped range that holds `i`, if one does.
    fn at(&self, i: usize) -> Option<usize> {
        self.ends
            .get(i)
            .and_then(|&e| (e != 0).then_some(e as usize))
    }
}

/// Prose: two plain words in a row (`the answer`, `red apples`) outside math and `\text{}`.
fn is_prose(s: &str, skip: &Skip) -> bool {
    words_in_row(s, skip, 2)
}

/// Whether `s` has `n` plain words in a row: runs of two or more letters between spaces or
/// punctuation, not command names, not `and` / `or` (which join answers).
fn words_in_row(s: &str, skip: &Skip, n: usize) -> bool {
    let b = s.as_bytes();
    let mut i = 0;
    let mut row = 0;
    while i < b.len() {
        if let Some(e) = skip.at(i) {
            i = e;
            row = 0;
            continue;
        }
        if b[i] == b'\\' {
            // a command name is no word
            i += 1;
            while i < b.len() && b[i].is_ascii_alphabetic() {
                i += 1;
            }
            row = 0;
            continue;
        }
        if b[i].is_ascii_alphabetic() {
            let start = i;
            while i < b.len() && b[i].is_ascii_alphabetic() {
                i += 1;
            }
            let next = b.get(i).copied().unwrap_or(b' ');
            let prev = if start == 0 { b' ' } else { b[start - 1] };
            let word = &s[start..i];
            let plain = i - start >= 2
                && b" \n\t,.;:!?)".contains(&next)
                && b" \n\t(".contains(&prev)
                && !word.eq_ignore_ascii_case("and")
                && !word.eq_ignore_ascii_case("or");
            if plain {
                row += 1;
                if row >= n {
                    return true;
                }
            } else {
                row = 0;
            }
            continue;
        }
        if !matches!(b[i], b' ' | b'\t' | b'\n') {
            row = 0;
        }
        i += 1;
    }
    false
}

/// Whether `b[i]` can be in a number run of prose (`288 / 4 = 72`, `$10,200 + $255`, `3.5`): a
/// full stop only before a digit.
fn run_char(b: &[u8], i: usize) -> bool {
    let c = b[i];
    c.is_ascii_digit()
        || b",+-*/^()=%$ ".contains(&c)
        || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit))
        || (c == b':' // a clock time or a ratio (`3:00`, `7:32`)
            && i > 0
            && b[i - 1].is_ascii_digit()
            && b.get(i + 1).is_some_and(u8::is_ascii_digit))
}

/// The last run of numbers and arithmetic in `s[from..to]` outside skipped ranges, trimmed to
/// start and end with a digit or bracket; runs joined by `and`/`or` are one (`3 and 5`).
fn last_number_run(s: &str, skip: &Skip, from: usize, to: usize) -> Option<(usize, usize)> {
    number_runs(s, skip, from, to).last().copied()
}

fn number_runs(s: &str, skip: &Skip, from: usize, to: usize) -> Vec<(usize, usize)> {
    let b = s.as_bytes();
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut i = from;
    while i < to {
        if let Some(e) = skip.at(i) {
            i = e;
            continue;
        }
        if !b[i].is_ascii_digit() || (i > 0 && b[i - 1].is_ascii_alphabetic()) {
            i += 1;
            continue;
        }
        // extend left over run characters, then right
        let mut a = i;
        while a > from && run_char(b, a - 1) && skip.at(a - 1).is_none() {
            a -= 1;
        }
        let mut e = i;
        while e < to && run_char(b, e) && skip.at(e).is_none() {
            e += 1;
        }
        let (mut a, mut e) = trim_run(b, a, e);
        // `By 16:00, 2100 - 2100 = 100`: a list item is no relation, the relation starts after it
        if let Some(eq) = s[a..e].find('=') {
            if let Some(c) = s[a..a + eq].rfind(", ") {
                (a, e) = trim_run(b, a + c + 2, e);
            }
        }
        if e > a {
            match runs.last_mut() {
                Some(last) if joined(&s[last.1..a]) => last.1 = e,
                _ => runs.push((a, e)),
            }
        }
        i = e.max(i + 1);
    }
    runs
}

/// Whether the text between two number runs is `and` / `or` (with commas and spaces).
fn joined(gap: &str) -> bool {
    if gap.len() > 8 {
        return false;
    }
    let t = gap.trim_matches(|c: char| c == ',' || c.is_whitespace());
    t.eq_ignore_ascii_case("and") || t.eq_ignore_ascii_case("or")
}

/// A run without what cannot start or end an answer (`, `, `= `, a full stop, unmatched brackets).
fn trim_run(b: &[u8], mut a: usize, mut e: usize) -> (usize, usize) {
    let (mut open, mut close) = (0usize, 0usize);
    for &c in &b[a..e] {
        open += usize::from(c == b'(');
        close += usize::from(c == b')');
    }
    let step = |i: usize, open: &mut usize, close: &mut usize| match b[i] {
        b'(' => *open -= 1,
        b')' => *close -= 1,
        _ => {}
    };
    loop {
        let before = (a, e);
        while a < e && !(b[a].is_ascii_digit() || b"(-.$".contains(&b[a])) {
            step(a, &mut open, &mut close);
            a += 1;
        }
        while e > a && !(b[e - 1].is_ascii_digit() || b")%".contains(&b[e - 1])) {
            step(e - 1, &mut open, &mut close);
            e -= 1;
        }
        // a leading `.` that starts no decimal
        if a < e && b[a] == b'.' && !b.get(a + 1).is_some_and(u8::is_ascii_digit) {
            a += 1;
        }
        // unmatched brackets at the ends (`(so 5`, `5)`)
        while a < e && open > close && b[a] == b'(' {
            open -= 1;
            a += 1;
        }
        while e > a && close > open && b[e - 1] == b')' {
            close -= 1;
            e -= 1;
        }
        if (a, e) == before {
            return (a, e);
        }
    }
}

// ---- "the answer is" ----------------------------------------------------------------------------

/// The answer after the last answer phrase with something after it: `The final answer is $5$`,
/// `Answer: 12 apples`, `Answer \[ 9 \]`, `#### 72`. Math right after the phrase is the answer
/// (with the segments that connectors join to it); else the first number of its sentence; else the
/// sentence.
fn after_anchor<'a>(s: &'a str, segs: &[Seg], skip: &Skip) -> Option<(Vec<Piece<'a>>, &'a str)> {
    // (most answers have neither a `w` nor a `#`: no copy of the text for them)
    memchr::memchr3(b'w', b'W', b'#', s.as_bytes())?;
    let lower = s.to_ascii_lowercase();
    let b = lower.as_bytes();
    // the word `answer` (`answers`, `reanswer` are not the phrase), found in one forward pass
    let answers = finder(&ANSWER, "answer")
        .find_iter(b)
        .filter(|&at| {
            (at == 0 || !b[at - 1].is_ascii_alphabetic())
                && !b.get(at + 6).is_some_and(u8::is_ascii_alphabetic)
        })
        .collect();
    let hashes = FinderRev::new("####");
    let mut anchors = Anchors {
        lower: &lower,
        answers,
        hashes: memchr::memchr(b'#', b).and_then(|_| hashes.rfind(b)),
        finder: hashes,
    };
    for _ in 0..8 {
        let (at, len) = anchors.prev()?;
        if let Some((a, end)) = anchored(s, segs, skip, at + len) {
            return Some((a, &s[at..end]));
        }
    }
    None
}

/// The answer phrases of a text from the last one back: the word `answer` (`final answer`,
/// `answer:`, `the answer is`) and `####` (GSM8K), each searched once.
struct Anchors<'a> {
    lower: &'a str,
    /// Where the word `answer` is, in order; the ones not yet walked back over.
    answers: Vec<usize>,
    /// The last `####` not yet walked back over.
    hashes: Option<usize>,
    finder: FinderRev<'static>,
}

impl Anchors<'_> {
    /// The previous phrase: (position, length).
    fn prev(&mut self) -> Option<(usize, usize)> {
        match (self.answers.last().copied(), self.hashes) {
            (Some(x), Some(y)) if y > x => {}
            (Some(x), _) => {
                self.answers.pop();
                return Some((x, 6));
            }
            (None, Some(_)) => {}
            (None, None) => return None,
        }
        let y = self.hashes?;
        self.hashes = self.finder.rfind(&self.lower.as_bytes()[..y]);
        Some((y, 4))
    }
}

fn anchored<'a>(
    s: &'a str,
    segs: &[Seg],
    skip: &Skip,
    after: usize,
) -> Option<(Vec<Piece<'a>>, usize)> {
    // The phrase's tail: `:`, `=`, `is`, `would be`, or math right after the word (`Answer \[ 9 \]`);
    // `**` and `\text{}` wrappers around the phrase. `to check our answer, we …` is no phrase.
    let rest = &s[after..];
    let t = rest.trim_start_matches(|c: char| c.is_whitespace() || "*}".contains(c));
    let marked = t.starts_with([':', '=']);
    let mut t = t.trim_start_matches(|c: char| c.is_whitespace() || "*:=}".contains(c));
    let mut phrase =
        marked || t.starts_with(['$', '\\']) || t.starts_with(|c: char| c.is_ascii_digit());
    for w in ["is", "would be", "will be", "should be", "must be"] {
        if let Some(r) = t.strip_prefix(w) {
            if !r.starts_with(|c: char| c.is_ascii_alphabetic()) {
                t = r.trim_start_matches(|c: char| c.is_whitespace() || "*:=}".contains(c));
                phrase = true;
                break;
            }
        }
    }
    if !phrase {
        return None;
    }
    let start = s.len() - t.len();
    // the sentence: up to a full stop before a space or the end, or a blank line
    let b = s.as_bytes();
    let mut end = start;
    let mut k = segs.partition_point(|g| g.start < end); // the first segment at or after `end`
    while end < b.len() {
        while segs.get(k).is_some_and(|g| g.start < end) {
            k += 1;
        }
        if let Some(g) = segs.get(k).filter(|g| g.start == end) {
            end = g.end;
            continue;
        }
        let c = b[end];
        let stop = (c == b'.' && !b.get(end + 1).is_some_and(u8::is_ascii_digit))
            || (c == b'\n' && b.get(end + 1) == Some(&b'\n'))
            || c == b'\n' && end > start + 2;
        if stop {
            break;
        }
        end += 1;
    }
    if end <= start {
        return None;
    }
    // math in the sentence, not far after the phrase
    // (a segment that only names a variable is a mention: `Final Answer: The largest $n$ is 34.`)
    if let Some(k) = segs.iter().position(|g| {
        g.start >= start
            && g.start < end
            && g.start - start <= 40
            && !is_mention(&s[g.inner.0..g.inner.1])
    }) {
        let mut out = vec![segs[k].piece(s)];
        let mut j = k;
        while j + 1 < segs.len() && out.len() < MAX_SEGMENTS {
            let gap = &s[segs[j].end..segs[j + 1].start];
            if gap.trim().is_empty() || !is_connector(gap) {
                break;
            }
            j += 1;
            out.push(segs[j].piece(s));
        }
        return Some((out, end.max(segs[j].end)));
    }
    // (without the markdown bold that closes it: `**Answer: 12**`)
    let sentence = s[start..end].trim().trim_end_matches('*').trim_end();
    if sentence.is_empty() {
        return None;
    }
    // `12 apples`, `therefore 5`: the first number of a sentence with words in it
    if words_in_row(sentence, &Skip::none(), 1) {
        if let Some(&(a, e)) = number_runs(s, skip, start, end).first() {
            return Some((vec![Piece::plain(&s[a..e])], end));
        }
    }
    Some((vec![Piece::plain(sentence)], end))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn where_the_answer_is() {
        let cases: &[(&str, &[&str])] = &[
            ("so \\boxed{5}.", &["5"]),
            ("\\boxed{1} and \\boxed{2}", &["1", "2"]),
            ("$\\boxed{1}\\boxed{2}$", &["1", "2"]),
            (
                "$\\boxed{1}$ \\quad\\text{and}\\quad $\\boxed{2}$",
                &["1", "2"],
            ),
            ("$x=\\boxed{1}$ or $y = \\boxed{2}$", &["1", "2"]),
            ("\\boxed{3} is wrong; the answer is \\boxed{4}", &["4"]),
            ("\\boxed{}", &[""]),
            ("\\boxed{5", &[]),
            ("The largest $n$ is 34.", &["34"]),
            ("Answer \\[ 9 \\]", &[" 9 "]),
            ("so \\( x = 4 \\). This is the answer.", &[" x = 4 "]),
            (
                "It costs $10,200 + $255 = $10,455 in all.",
                &["$10,200 + $255 = $10,455"],
            ),
            (
                "The final answer is $\\frac12$. I hope it is correct.",
                &["\\frac12"],
            ),
            ("The answer is: 12 apples.", &["12"]),
            ("#### 72", &["72"]),
            ("He buys 288 / 4 = 72 snowshoes.", &["288 / 4 = 72"]),
            ("x = 3", &["x = 3"]),
            ("12, 34, and 56", &["12, 34, and 56"]),
            ("$3$ or $4$", &["3", "4"]),
            ("first $2$\nthen 5 and $x = 7$", &["x = 7"]),
            ("so it is $5\n$ or so", &["$5"]), // no inline math across lines
        ];
        for &(text, want) in cases {
            assert_eq!(answer_segments(text), want, "{text:?}");
        }
    }
}
