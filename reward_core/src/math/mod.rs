//! A math-answer verifier: MATH-style answers judged like Math-Verify, in linear time, never hanging.
//!
//! [`math_equal`]`(pred, gold)` says whether a predicted answer equals the gold one. It never panics
//! and never raises: input it cannot read is judged by its normalised text alone, and is otherwise
//! not equal. There is no timeout because nothing here can run long: one tokenizing pass, one
//! parsing pass with a nesting limit ([`parse::MAX_DEPTH`]), bounded exact arithmetic.
//!
//! # What is normalised (the tokenizer, [`normalize`] shows its output)
//! - `\boxed{…}` / `\fbox{…}`: the last one is the answer; else the last `$…$` / `$$…$$` segment of
//!   a text that has one; `$`, `\(`, `\)`, `\[`, `\]` are dropped. Prose around the answer goes:
//!   everything up to the last "answer is" / "answer:" (`The final answer is 5.` = `5`), and up
//!   to three plain words after a final number (`12 apples` = `12`).
//! - Dropped: `\left`, `\right`, `\big…`, `\displaystyle`, spacing (`\,` `\!` `\;` `\:` `\ ` `~`
//!   `\quad`), `\$`, degree marks (`^\circ`, `^{\circ}`, `\degree`, `°`: `90^\circ` = `90`), and unit
//!   words with their power: inside `\text{}`/`\mbox{}` (`15\mbox{ cm}^2` = `15`), or in plain
//!   letters at the end after a number (`5.4 cents` = `5.4`).
//! - `\text{}`, `\textbf{}`, `\mathrm{}`, `\mbox{}`, `\operatorname{}` are transparent; the letters
//!   inside form words (`\text{Evelyn}`); `\text{ or }`/`\text{ and }` separate list items.
//! - Letters are case-folded (`3R^2` = `3r^2`, `\text{(B)}` = `b`): Math-Verify does the same.
//! - Synonyms: `\dfrac`/`\tfrac`/`\cfrac` → `\frac`; `\cdot`, `\times` → `*`; `\div` → `/`; `\leq`,
//!   `\geq`, `\neq`, `≤`… → one form; `\lbrace` → `\{`; `π`, `√`, `∞`, `−` → their commands.
//! - Thousands separators outside brackets: `10,080`, `10,\!080`, `10{,}080` = `10080` (inside
//!   brackets `(1,234)` stays a pair). A numeric base subscript is dropped when only one side has
//!   one (`2516_8` = `2516`, as Math-Verify); two different bases are not equal (`52_8` ≠ `52_10`).
//!
//! # What is compared
//! - Numbers and closed forms are evaluated **exactly** where possible: rationals (`\frac 34`,
//!   `0.75`, `3.210` = `3.21`, `-0` = `0`) and square roots of rationals, with `i` = √−1, in the
//!   field Q(√d) (`2\sqrt3` = `\sqrt{12}`, `\frac{1}{\sqrt2}` = `\frac{\sqrt2}{2}`, `1+2^{0.5}` =
//!   `1+\sqrt2`, `-4-2\cdot i` = `-4-2i`). Two exact values are equal only when identical
//!   (`\frac{1}{2^{98}}` ≠ `\frac{1}{2^{99}}`).
//! - Otherwise (π, e, trig, logs, other roots, exact overflow) in complex floating point: equal
//!   when within a relative tolerance of 1e-9 ([`num::REL_TOL`]) plus 1e-12 absolute.
//! - A written decimal against any other value: equal when the value rounded to the decimal's own
//!   number of places (at least 6; trailing zeros add none) is that decimal (`0.333333` = `\frac13`,
//!   `4.6666670` = `\frac{14}{3}`, `0.33` ≠ `\frac13`, `3.141593` = `\pi`), like Math-Verify's 6-place
//!   rounding of floats but never coarser than what was written (`0.5468751` ≠ `\frac{35}{64}`).
//! - Percent: `x\%` equals both `x` and `x/100` (`10\%` = `10` = `0.1`, `237.5\%` = `237.5`).
//! - Mixed numbers: an integer followed by `\frac{p}{q}` is their sum (`1\frac{4}{5}` = `\frac95`).
//! - Expressions with variables are compared at three fixed sample points (each variable gets a
//!   fixed irrational-looking value per point), so any algebraic rewrite is equal
//!   (`(a+5)(b+2)` = `ab+2a+5b+10`, `\cot x` = `\frac{\cos x}{\sin x}`), different functions not.
//! - `±`/`∓` expand to both values, which then form a set (`3 \pm 2\sqrt2` = `3+2\sqrt2, 3-2\sqrt2`).
//! - Collections (order rules as Math-Verify's): `\{…\}` sets and bare lists `a, b, c` are
//!   unordered (`3, 5, 7` = `\{7,5,3\}`); tuples `(a, b)` are ordered and match a list in the order
//!   written; intervals `[a, b)` compare endpoints and which ends are closed (`(a, b)` is a tuple
//!   and an open interval at once; an infinite end is open however it is written); unions
//!   `A \cup B` are unordered; matrices (`pmatrix`, `bmatrix`,
//!   `array`) compare shape and cells. A one-element collection equals its element.
//! - Relations: an assignment `x = 3` (a lone variable such as `x`, `x_1`, `\theta` or `f(x)` on
//!   the left, or `x \in S`) equals its right-hand side `3` (either side may be the assignment; the
//!   rule is symmetric). An inequality on one variable equals the interval of its solutions
//!   (`x \le 3` = `(-\infty, 3]`, `1 < x \le 2` = `(1, 2]`). Two equations
//!   are equal when `lhs − rhs` of one is a non-zero constant multiple of the other's
//!   (`5x-7y+11z+4=0` = `10x-14y+22z+8=0`), inequalities with a positive multiple (`x > 1` = `1 < x`).
//! - Text: answers equal as normalised text are equal (`\text{Evelyn}` = `Evelyn`, `\text{(B)}` = `B`).
//!
//! `math_equal(a, a)` holds for every `a` with non-empty normalised text, and `math_equal` is
//! symmetric.
//!
//! # Limits (what keeps every judgement linear)
//! Answers are read up to 1 MiB ([`lex::MAX_LEN`]); groups nest at most [`parse::MAX_DEPTH`] deep; a
//! `±` expression expands to at most 8 values; collections hold at most [`parse::MAX_ITEMS`]
//! elements; exact values have at most 16 terms of `i128` rationals and integer powers up to 256
//! (beyond, the floating-point samples decide). Past a limit the answer is not parsed and only its
//! normalised text can make it equal.

// Arithmetic reads best with short names and inherent `add`/`mul` on plain-data numbers (no
// operator traits: these ops are partial). Casts are between sample floats and small integers.
#![allow(
    clippy::many_single_char_names,
    clippy::should_implement_trait,
    clippy::return_self_not_must_use,
    clippy::cast_precision_loss,
    clippy::cast_possible_wrap,
    clippy::cast_sign_loss,
    clippy::result_unit_err,
    clippy::match_same_arms,
    clippy::needless_range_loop,
    clippy::single_match_else
)]

pub mod cmp;
pub mod extract;
pub mod lex;
pub mod matrix;
pub mod num;
pub mod parse;
pub mod reading;

use cmp::item_eq;
use lex::Tok;
use parse::{Item, Parser};

/// The tokens of the answer of `s` (see [`extract`]): several pieces are joined by commas into
/// one list — always for boxes; for math segments of prose only when they read alike (`$x = 1$
/// or $x = 2$`, not `$\sqrt{c^2 - b^2}$, or $\sqrt{51}$`, which restates one answer).
fn answer_tokens(s: &str) -> Vec<Tok> {
    let ans = extract::answer(s);
    let toks: Vec<Vec<Tok>> = ans
        .pieces
        .iter()
        .map(|p| {
            let t = lex::tokenize(trailing_words(p.text));
            if p.display {
                last_line(t)
            } else {
                t
            }
        })
        .filter(|t| !t.is_empty())
        .collect();
    if toks.len() > 1 && !ans.boxed {
        let items: Vec<Option<Item>> = toks.iter().map(|t| parse_tokens(t)).collect();
        let alike = |a: &Option<Item>, b: &Option<Item>| match (a, b) {
            (
                Some(Item::Labelled { label: Some(x), .. }),
                Some(Item::Labelled { label: Some(y), .. }),
            ) => item_eq(x, y),
            (Some(x), Some(y)) => shape(x) == shape(y),
            _ => false,
        };
        if !items.iter().all(|i| alike(i, &items[0])) {
            return toks.into_iter().last().unwrap_or_default();
        }
    }
    let mut out = Vec::new();
    for t in toks {
        if !matches!(out.last(), None | Some(Tok::P(','))) {
            out.push(Tok::P(','));
        }
        out.extend(t);
    }
    out
}

/// What kind of answer an item is, for joining prose segments: a constant, an expression, a
/// labelled value, a relation, a collection.
fn shape(item: &Item) -> u8 {
    match item {
        Item::Val(v) if v.iter().all(|x| !x.vars) => 0,
        Item::Val(_) => 1,
        Item::Labelled { label: Some(_), .. } => 2,
        Item::Labelled { .. } | Item::Alt(_) => 0,
        Item::Relation(..) => 3,
        Item::Tuple(_) | Item::Interval { .. } => 4,
        Item::Set(_) | Item::Union(_) => 5,
        Item::Text(_) => 6,
        Item::Matrix(_) | Item::Ratio(_) => 7,
    }
}

/// Display math states its last line (`\begin{align*} … \\ &= 6 - 5i \end{align*}`): the tokens
/// after the last row break outside a matrix, without alignment marks and a leading `=`.
fn last_line(toks: Vec<Tok>) -> Vec<Tok> {
    let mut depth = 0usize;
    let mut start = 0;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::Begin(_) => depth += 1,
            Tok::End(_) => depth = depth.saturating_sub(1),
            Tok::RowSep if depth == 0 && toks[i + 1..].iter().any(|t| *t != Tok::RowSep) => {
                start = i + 1;
            }
            _ => {}
        }
    }
    let mut depth = 0usize;
    let mut line: Vec<Tok> = Vec::with_capacity(toks.len() - start);
    for t in toks.into_iter().skip(start) {
        match t {
            Tok::Begin(_) => depth += 1,
            Tok::End(_) => depth = depth.saturating_sub(1),
            Tok::P('&') | Tok::RowSep if depth == 0 => continue,
            _ => {}
        }
        line.push(t);
    }
    let lead = line
        .iter()
        .take_while(|t| matches!(t, Tok::P('=' | ',')))
        .count();
    line.drain(..lead);
    line
}

/// `12 apples`, `5.4 red cents.`: up to three plain words after a number (or a closing bracket)
/// at the end are prose, not part of the answer (Math-Verify drops them too).
fn trailing_words(s: &str) -> &str {
    let mut t = s.trim_end().trim_end_matches('.');
    for _ in 0..3 {
        let Some(sp) = t.rfind(' ') else { break };
        let word = &t[sp + 1..];
        let before = t[..sp].trim_end();
        let ends_value = before.ends_with(|c: char| c.is_ascii_digit() || c == '}' || c == ')');
        if word.len() >= 3 && word.bytes().all(|c| c.is_ascii_alphabetic()) && ends_value {
            t = before;
        } else {
            break;
        }
    }
    if t.len() == s.trim_end().trim_end_matches('.').len() {
        s
    } else {
        t
    }
}

/// The normalised text of an answer (tokenized and rendered back; idempotent).
pub fn normalize(s: &str) -> String {
    lex::render(&answer_tokens(s))
}

/// A parsed answer, or None when it cannot be read as math.
pub fn parse_answer(s: &str) -> Option<Item> {
    parse_tokens(&answer_tokens(s))
}

/// The parsed answer; when the whole does not parse, the part after its last top-level `=`
/// (`(1-2) + \dots + (99-100) = 50(-1) = -50` states `-50`).
fn parse_tokens(toks: &[Tok]) -> Option<Item> {
    if let Ok(item) = Parser::new(toks).answer() {
        return Some(item);
    }
    let mut depth = 0usize;
    let mut last_eq = None;
    for (i, t) in toks.iter().enumerate() {
        match t {
            Tok::P('(' | '[' | '{') | Tok::SetOpen | Tok::Begin(_) => depth += 1,
            Tok::P(')' | ']' | '}') | Tok::SetClose | Tok::End(_) => {
                depth = depth.saturating_sub(1);
            }
            Tok::P('=') if depth == 0 => last_eq = Some(i),
            _ => {}
        }
    }
    let rest = &toks[last_eq? + 1..];
    Parser::new(rest).answer().ok()
}

/// Whether `pred` is a correct answer for `gold` (see the module docs for the rules).
pub fn math_equal(pred: &str, gold: &str) -> bool {
    let tp = answer_tokens(pred);
    let tg = answer_tokens(gold);
    if tp.is_empty() || tg.is_empty() {
        return false;
    }
    // Same normalised text: equal. (Compared as rendered text: comparing the token vectors walks
    // one small heap string per number in each, several times slower on a 100K-character answer.)
    if tp.len() == tg.len() && lex::render(&tp) == lex::render(&tg) {
        return true;
    }
    if let (Some(a), Some(b)) = (text_key(&tp), text_key(&tg)) {
        if a == b {
            return true;
        }
    }
    let (bp, bg) = (base_subscripts(&tp), base_subscripts(&tg));
    if let (Some(p), Some(g)) = (bp.last(), bg.last()) {
        if p != g {
            return false; // `2516_8` ≠ `2516_9` (either equals `2516`); the answer's base is last
        }
    }
    match (parse_tokens(&tp), parse_tokens(&tg)) {
        (Some(p), Some(g)) => item_eq(&g, &p),
        _ => false,
    }
}

/// The base subscripts written on numbers (`2516_8`, `4210_{5}`), in order.
fn base_subscripts(toks: &[Tok]) -> Vec<&str> {
    let mut out = Vec::new();
    for (i, w) in toks.windows(2).enumerate() {
        if let [Tok::Num { .. }, Tok::P('_')] = w {
            match (toks.get(i + 2), toks.get(i + 3)) {
                (Some(Tok::Num { int, .. }), _)
                | (Some(Tok::P('{')), Some(Tok::Num { int, .. })) => {
                    out.push(int.as_str());
                }
                _ => {}
            }
        }
    }
    out
}

/// Letters and words only (parentheses aside): the text they spell (`\text{Evelyn}`, `Evelyn`).
fn text_key(toks: &[Tok]) -> Option<String> {
    let mut key = String::new();
    for t in toks {
        match t {
            Tok::Letter(c) => key.push(*c),
            Tok::Word(w) => key.push_str(w),
            Tok::P('(' | ')' | '{' | '}') => {}
            _ => return None,
        }
    }
    (!key.is_empty()).then_some(key)
}

/// [`math_equal`] over pairs, in parallel when enabled (see [`crate::parallel`]).
pub fn math_equal_batch(preds: &[&str], golds: &[&str]) -> Result<Vec<bool>, crate::Error> {
    if preds.len() != golds.len() {
        return Err(crate::Error::LengthMismatch {
            what: "gold",
            expected: preds.len(),
            got: golds.len(),
        });
    }
    let total = preds.iter().chain(golds).map(|s| s.len()).sum();
    Ok(crate::parallel::map_indices(preds.len(), total, |i| {
        math_equal(preds[i], golds[i])
    }))
}

/// The answer a completion gives: the text between the last `solution_start` and the
/// `solution_end` after it; else its box (several joined boxes: from the first to the last, so
/// that [`math_equal`] reads them as one set); else an answer phrase with its sentence (`The final
/// answer is $5$.`, `#### 72`); None when there is none of these (an empty or unclosed box
/// included). Prose alone is no marked answer: a format reward needs one.
pub fn extract_answer<'a>(
    text: &'a str,
    solution_start: &str,
    solution_end: &str,
) -> Option<&'a str> {
    if !solution_start.is_empty() {
        if let Some(i) = text.rfind(solution_start) {
            let rest = &text[i + solution_start.len()..];
            if let Some(j) = (!solution_end.is_empty())
                .then(|| rest.find(solution_end))
                .flatten()
            {
                return Some(&rest[..j]);
            }
        }
    }
    extract::marked_answer(text)
}

#[cfg(test)]
mod tests;
