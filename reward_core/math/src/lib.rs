//! A math-answer verifier: MATH-style answers judged like a careful human grader, in linear time,
//! never hanging.
//!
//! [`math_equal`]`(pred, gold)` says whether a predicted answer equals the gold one. It never panics
//! and never raises: input it cannot read is judged by its normalised text alone, and is otherwise
//! not equal. There is no timeout because nothing here can run long: a few linear scans to find the
//! answer, one tokenizing pass, one parsing pass with a nesting limit ([`parse::MAX_DEPTH`]),
//! bounded exact arithmetic, and one bounded budget for sums and matrix products.
//!
//! Both arguments are read the same way, and every rule is symmetric: `math_equal(a, b) ==
//! math_equal(b, a)`, so a gold answer may be a full solution too (its boxes are its answer).
//!
//! # Where the answer is ([`extract`])
//! - **Boxes** first, and only boxes when a text has one: the last `\boxed{…}` / `\fbox{…}`, with the
//!   boxes before it that only connectors separate from it — spacing, `$`, `\quad`, punctuation,
//!   `and` / `or` (bare or in `\text{}`), a short label (`$x = \boxed{1}$ or $x = \boxed{2}$`). Joined
//!   boxes are one answer, a set: `\boxed{1} and \boxed{2}` = `1, 2`; `$\boxed{1}\boxed{2}$` =
//!   `\{1, 2\}`. An empty or unclosed last box is no answer, whatever the prose says.
//! - Else the last **answer phrase**: the word `answer` before `:`, `=`, `is`, `would be`, or math
//!   (`The final answer is $5$`, `Answer: 12 apples`, `Answer \[ 9 \]`, `**Answer:**`), or `####`.
//!   Its answer is the math right after it (with the segments connectors join to it; a segment
//!   that only names a variable is a mention: `Final Answer: The largest $n$ is 34.` states `34`),
//!   else the first number of its sentence, else the sentence. `to check our answer, we …` is no
//!   phrase.
//! - Else, in prose, the **last** math segment or number run, whichever comes last. Segments are
//!   `$…$`, `$$…$$`, `\(…\)`, `\[…\]`, `\begin{align*}…` (inline ones within one line; none but
//!   an environment across a paragraph break, a blank line, which LaTeX forbids in math; segments
//!   of two paragraphs are never joined into one answer); a segment
//!   that only names a variable (`The largest $n$ is 34.`) is a mention, not an answer. A `$`
//!   before a digit is money unless it closes like math (`$10,200 + $255 = $10,455`). Display math
//!   states its last line (`… \\ &= 6 - 5i`). Number runs skip `\text{}` asides. Segments of prose
//!   joined by connectors are one set only when they read alike (the same label, or the same
//!   shape, or one variable's numbered values): `$x = 1$ or $x = 2$` and `$x_1 = 2$, $x_2 = -3$`
//!   are sets, `$\sqrt{c^2-b^2}$, or $\sqrt{51}$` restates one answer,
//!   and `Then $c = 14,$ and $a_1 = 504.$` states `504`.
//!   A text with no box, phrase, segment or prose (two plain words in a row) is its own answer.
//! - Up to three plain words after a final number go (`12 apples` = `12`), and a `\text{…}` after
//!   a value (`7 \text{ marbles}` = `7`).
//!
//! [`extract_answer`] (the reward's and `grpo eval`'s reader) marks answers the same way but asks
//! for a mark: the solution tags, else the boxes, else an answer phrase; prose alone is missing.
//!
//! # What is normalised (the tokenizer, [`normalize`] shows its output)
//! - Dropped: `\left`, `\right`, `\big…`, `\displaystyle`, spacing (`\,` `\!` `\;` `\:` `\ ` `~`
//!   `\quad`), `$`, `\$`, degree marks (`^\circ`, `^{\circ}`, `\degree`, `°`: `90^\circ` = `90`), and
//!   unit words with their power: inside `\text{}`/`\mbox{}` (`15\mbox{ cm}^2` = `15`), or in plain
//!   letters at the end after a number (`5.4 cents` = `5.4`, `440{cm}^2` = `440`); `&` outside a
//!   matrix; display environments (`align*`) around their lines.
//! - `\text{}`, `\textbf{}`, `\mathrm{}`, `\mbox{}`, `\operatorname{}` are transparent; the letters
//!   inside form words (`\text{Evelyn}`); `and`/`or`, bare or in `\text{}`, separate list items
//!   (`19, 46, and 82` = `19, 46, 82`; `(11,7)or(7,11)`), and `{,}` between non-thousands is a comma.
//! - Letters are case-folded (`3R^2` = `3r^2`, `\text{(B)}` = `b`): Math-Verify does the same.
//! - Synonyms: `\dfrac`/`\tfrac`/`\cfrac` → `\frac`; `\cdot`, `\times` → `*`; `\div`, `÷` → `/`;
//!   `\leq`, `≤`, ASCII `<=` → `\le` (and `\ge`, `\ne` alike; `5!=120` is a factorial); `≈`, `∈`,
//!   `∪`, `±` → their commands; `\lbrace` → `\{`; `π`, `√`, `∞`, `−` → their commands; Greek letters
//!   (`β` = `\beta`); a function or constant name written bare (`sqrt(2)`, `2pi`, `sin x`, `inf`);
//!   a known command glued to the letters after it (`\pia^2` = `\pi a^2`, `\sinx` = `\sin x`).
//! - Thousands separators outside brackets, after a group of one to three digits, not in a
//!   denominator: `10,080`, `10,\!080`, `10{,}080` = `10080` (`(1,234)` stays a pair, `3/5,117/125`
//!   a list). A numeric base subscript is dropped when only one side has one (`2516_8` = `2516`, as
//!   Math-Verify); two different bases are not equal (`52_8` ≠ `52_10`; the last subscript counts).
//!
//! # What is compared
//! - Numbers and closed forms are evaluated **exactly** where possible: rationals (`\frac 34`,
//!   `0.75`, `3.210` = `3.21`, `-0` = `0`) and square roots of rationals, with `i` = √−1, in the
//!   field Q(√d) (`2\sqrt3` = `\sqrt{12}`, `\frac{1}{\sqrt2}` = `\frac{\sqrt2}{2}`, `1+2^{0.5}` =
//!   `1+\sqrt2`, `-4-2\cdot i` = `-4-2i`). Two exact values are equal only when identical
//!   (`\frac{1}{2^{98}}` ≠ `\frac{1}{2^{99}}`).
//! - Otherwise (π, e, trig, logs, other roots, exact overflow) in complex floating point: equal
//!   when within a relative tolerance of 1e-9 ([`num::REL_TOL`]) plus 1e-12 absolute. A power or
//!   factorial of exact numbers that leaves `f64` (`2^{4950}`, `2004!`) is a value of its own, equal
//!   to itself only (not to every other overflow).
//! - A written decimal against any other value: equal when the value rounded to the decimal's own
//!   number of places (at least 6; trailing zeros add none) is that decimal (`0.333333` = `\frac13`,
//!   `4.6666670` = `\frac{14}{3}`, `0.33` ≠ `\frac13`, `3.141593` = `\pi`), like Math-Verify's 6-place
//!   rounding of floats but never coarser than what was written (`0.5468751` ≠ `\frac{35}{64}`).
//! - Percent: `x\%` equals both `x` and `x/100` (`10\%` = `10` = `0.1`, `237.5\%` = `237.5`).
//! - Mixed numbers are mixed numbers: an integer followed by `\frac{p}{q}`, or in plain text by
//!   spaces and `p/q`, is their sum (`1\frac{4}{5}` = `\frac95`; `2 2/3` = `\frac83` =
//!   `2\frac{2}{3}`, never `2`, `\frac43` or `\frac23`; `-2 2/3` = `-\frac83`).
//! - Integers of any size compare exactly: one past the exact field (`i128`, 36 digits) is a value
//!   named by its digits, and an exact power past it (`2^{200}`) one named by its base and
//!   exponent, each equal to itself only (`10…01` ≠ `10…02`, `2^{200}` ≠ `2^{200} + 1`).
//! - Expressions with variables are compared at three fixed sample points (each variable gets a
//!   fixed irrational-looking value per point), so any algebraic rewrite is equal
//!   (`(a+5)(b+2)` = `ab+2a+5b+10`, `\cot x` = `\frac{\cos x}{\sin x}`), different functions not.
//! - `±`/`∓` expand to both values, which then form a set (`3 \pm 2\sqrt2` = `3+2\sqrt2, 3-2\sqrt2`).
//! - Ratios: `a : b` is `a/b` (`7:32` = `\frac{7}{32}`); `a : b : c` compares scaled to its first part.
//! - Clock times are times: `h:mm` and `h:mm:ss` (an hour up to 24, two-digit minutes and seconds
//!   up to 59), with an optional `am` / `pm` mark (`4:30 p.m.`). Two times are equal when they
//!   name the same time of day (`3:00 PM` = `15:00`; `4:30` without a mark = `4:30 am` = `4:30
//!   pm`), never as ratios (`12:00` ≠ `1:00`, `1:20` ≠ `2:40`, `12:00` ≠ `12`); a time against
//!   anything but a time is read as its ratio (`7:32` = `\frac{7}{32}`); `19:60` is a ratio.
//! - Matrices (`pmatrix`, `bmatrix`, `array`) compare shape and cells; sums, differences, scalar
//!   multiples, products and powers up to 8 of matrices are evaluated first.
//! - `\sum_{k=a}^{b}` / `\prod` of the product after them: term by term for integer limits (up to
//!   1000 terms, and 4,096 tokens read again in one answer: `\sum_{k=1}^{100} k^2` = `338350`);
//!   otherwise the sum is a value named by its limits and its body, read with `k` as a variable of
//!   its own (`\sum_{i=1}^n 3i` = `\sum_{k=1}^{n} k \cdot 3`; not its closed form).
//! - Collections (order rules as Math-Verify's): `\{…\}` sets and bare lists `a, b, c` are
//!   unordered and ignore repeats (`3, 5, 7` = `\{7,5,3\}`, `\{2,1,1\}` = `\{1,2\}`); tuples
//!   `(a, b)` are ordered and match a list in the order written; intervals `[a, b)` compare
//!   endpoints and which ends are closed (`(a, b)` is a tuple and an open interval at once; an
//!   infinite end is open however it is written); unions `A \cup B` are unordered, a union of finite
//!   sets is one set, intervals listed are their union. A one-element collection equals its element.
//! - Text: answers equal as normalised text are equal (`\text{Evelyn}` = `Evelyn`, `\text{(B)}` = `B`).
//!
//! # Relations and labels ([`reading`])
//! Every relation is read, when it can be, as a **value with an optional label**, and compared by
//! that value; one normal form is what keeps equality transitive (`-2 \le x \le 7`, `x \in [-2,7]`
//! and `[-2,7]` are all `[-2, 7]`).
//! - A label is a lone variable (`x`, `x_1`, `\theta`, `f(x)`) or more: names of points, segments
//!   and quantities joined by `+ - * / :`, raised to a number, wrapped in `| |`, `[ ]`,
//!   `\overline{}`, `\angle` (`AB`, `|AB|`, `m+n`, `CE^2`, `S:T`, `[ABC]`, `f(2)`), a tuple of
//!   them (`(p, q)`), a `\text{}` word. No number outside a subscript, an exponent or an argument:
//!   `2x + 1 = 5` has no label.
//! - `label = value` is its value (`(p,q) = (3,2)` = `(3,2)`, `AB = 4` = `4`); a label of more than
//!   one variable names only a constant. `x \in S` is `S`; an inequality on one lone variable is
//!   its interval of solutions (`x \le 3` = `(-\infty, 3]`, `x >= 2` = `[2, \infty)`), `x \ne 3` the
//!   line without 3. Two labelled values are equal when labels and values are; a labelled tuple
//!   matches another whatever the order of its labels (`y = 2, x = 1` = `(x, y) = (1, 2)`).
//! - A chain of `=` / `\approx` that ends in a constant states that final value, and also each
//!   earlier side that agrees with it (`\frac{6}{2} = 3` = `3`; `2\sqrt3 \approx 3.46` = `2\sqrt3`
//!   and = `3.46`; `15 + 75 = 120` = `120`); its first side labels it when it is a label
//!   (`f(3) = f(-3) + 6 = 8`), or when the chain has three sides or more, a computation
//!   (`\pi r^2 = 16\pi \approx 50.27` = `16\pi`, `z + \frac1z = \frac{-z^2}{z^2} = -1` = `-1`). **An equation with variables is
//!   not its right-hand side**: `2x + z = 5`, `3x = 6`, `x + 3 = 5` ≠ `5` (a number outside a
//!   subscript or exponent makes the left side no label; so `2y_1 + 2y_2 = 40` ≠ `40` too, which
//!   a solution may mean as a computed value). An equation in standard form
//!   (`5x-7y+11z+4=0`, `x + y + z = 0`) is an equation, not `0`. A chain of equal expressions
//!   states its last side.
//!   When a whole answer does not parse, the part after its last top-level `=` is read.
//! - A list of labelled values with distinct labels is one labelled tuple (`AB = 4, CD = 5` =
//!   `4, 5`); a label seen again starts the next one, and tuples or values under one label form a
//!   labelled set (`p=5,q=2;p=7,q=2` = `(5,2),(7,2)`; `x = 1 \text{ or } x = 2` = `1, 2`). Listed
//!   labelled values against a set compare as a set (`x_1 = 2, x_2 = 5` = `5, 2`).
//! - Relations that have no such reading (`2x + 3y = 6`, `x^2 + y^2 = 25`) are equal when `lhs −
//!   rhs` of one is a non-zero constant multiple of the other's (`5x-7y+11z+4=0` = `10x-14y+22z+8=0`),
//!   inequalities with a positive multiple (`x > 1` = `1 < x`).
//! - A bound on an absolute value is the relation it states on its variable: `|x - a| \le c` is
//!   `a - c \le x \le a + c`, `|x| > c` is `x \in (-\infty, -c) \cup (c, \infty)` (`|z| < 3` =
//!   `-3 < z < 3` = `z \in (-3, 3)`).
//!
//! # What is not accepted, and why
//! - A clock time read as a ratio against another time (`1:20` ≠ `2:40`), and an equation with
//!   variables against its right-hand side (`2x + z = 5` ≠ `5`): the same text is a question as
//!   often as an answer.
//! - Several answers against one: `\boxed{3}, \boxed{4}` ≠ `4` and `\boxed{3 \text{ or } 4}` ≠ `4`
//!   (listing candidates must not pay), including boxes a solution offers as alternatives ("either
//!   point is correct"): a set is a set.
//! - An answer outside the answer: the gold in a `\text{}` aside, in prose next to another boxed
//!   answer, after an empty box, or as digits of a longer number (`\boxed{51}` ≠ `5`).
//! - Closed forms of symbolic sums (`\sum_{k=1}^n k` ≠ `\frac{n(n+1)}{2}`), and the values of sums
//!   too long to add up within the budget (`\sum_{n=1}^{1000} \frac{1}{n^2+n}` ≠ `\frac{1000}{1001}`:
//!   13,000 tokens to read again), labels permuted against an unlabelled tuple (`(q,p) = (2,3)` ≠
//!   `(3,2)`: nothing says the gold is `(p, q)`), `and` of inequalities as an intersection
//!   (`x \ge 2 \text{ and } x \le 7` is a list of two intervals).
//! - Collections of more than [`types::MAX_ITEMS`] (64) elements, and two collections that take
//!   more than [`cmp::MAX_COMPARISONS`] comparisons to match without order: a set of 40 against
//!   itself reversed is equal (~2.4K comparisons), 25 sets of 25 against them reversed are not
//!   (MATH's longest lists have about ten elements). The same text is still equal.
//!
//! `math_equal(a, a)` holds for every `a` with non-empty normalised text, and `math_equal` is
//! symmetric.
//!
//! # Limits (what keeps every judgement linear)
//! Texts are read up to 1 MiB ([`lex::MAX_LEN`]) to find their answer, and an answer of more than
//! [`MAX_ANSWER`] bytes (2 KiB; the longest of ~99K answers and solutions in MATH, DAPO and GSM8K
//! is 621, of 3,782 model completions 663; long display math counts from where its last line
//! starts) is not read as math: it equals only the same text. In an
//! answer, groups nest at most [`parse::MAX_DEPTH`] deep; a `±` expression expands to at most 8
//! values; collections hold at most [`types::MAX_ITEMS`] elements (lists of at most 64 are grouped
//! by label); at most 64 boxes or segments join; exact values have at most 16 terms of `i128`
//! rationals and integer powers up to 256 (beyond, the floating-point samples decide); sums term by
//! term and matrix products share one budget of 4,096 steps per answer, and comparing two answers
//! one of 4,096 comparisons of their parts. Past a limit the answer is not parsed (or the
//! comparison is not equal) and only its normalised text can make it equal.
//!
//! # Modules
//! One pipeline, each stage a module that depends only on the ones after it: [`extract`] (where
//! the answer is) → [`lex`] (tokens, [`normalize`]) → [`parse`] (structure and values; its parts:
//! relations and ratios, sums and products, primaries, commands, values) → [`reading`] (relations
//! as labelled values) → [`cmp`] (the comparison rules) → [`num`] (exact and sampled values);
//! [`matrix`] is matrix arithmetic. [`types`] is the leaf of shared types (tokens, items, relations,
//! clock times) that keeps the graph free of cycles. Benches: `cargo bench -p math_equal`. The
//! false-positive property test: `tests/never_equal.rs`.

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
pub mod types;

use cmp::item_eq;
use parse::Parser;
use types::{Item, Tok};

/// The tokens of the answer of `s` (see [`extract`]): several pieces are joined by commas into
/// one list — always for boxes; for math segments of prose only when they read alike (`$x = 1$
/// or $x = 2$`, not `$\sqrt{c^2 - b^2}$, or $\sqrt{51}$`, which restates one answer).
fn answer_tokens(s: &str) -> Vec<Tok> {
    tokens_of(&extract::answer(s))
}

/// The tokens of an extracted answer (see [`answer_tokens`]).
fn tokens_of(ans: &extract::Answer) -> Vec<Tok> {
    let piece_tokens = |p: &extract::Piece| {
        let t = lex::tokenize(trailing_words(piece_text(p)));
        if p.display {
            last_line(t)
        } else {
            t
        }
    };
    if let [one] = ans.pieces.as_slice() {
        return piece_tokens(one); // the common case: no list to join
    }
    let toks: Vec<Vec<Tok>> = ans
        .pieces
        .iter()
        .map(piece_tokens)
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
        // `$x_1 = 2$, $x_2 = -3$`: one variable's numbered values are alike too
        let base = subscripted_base(&toks[0]);
        let numbered = base.is_some() && toks.iter().all(|t| subscripted_base(t) == base);
        if !numbered && !items.iter().all(|i| alike(i, &items[0])) {
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

/// The letter of an assignment to a subscripted variable (`x_1 = 2`, `x_{2} = -3`), if the tokens
/// are one.
fn subscripted_base(toks: &[Tok]) -> Option<char> {
    match toks {
        [Tok::Letter(c), Tok::P('_'), rest @ ..] => {
            let eq = rest.iter().position(|t| *t == Tok::P('='))?;
            let sub = &rest[..eq];
            let plain = |t: &Tok| matches!(t, Tok::Num { .. } | Tok::Letter(_) | Tok::P('{' | '}'));
            (!sub.is_empty() && sub.len() <= 4 && sub.iter().all(plain)).then_some(*c)
        }
        _ => None,
    }
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
        Item::Time(..) => 8,
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
    if let Some(t) = abs_bound(toks) {
        return Parser::new(&t).answer().ok();
    }
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

/// A bound on an absolute value, `|x - a| \le c` (`<`, `\ge`, `>`; `|x|`, `|x + a|`), written as
/// the relation on `x` it is: `a - c \le x \le a + c`, or for a lower bound `x \in (-\infty,
/// a - c] \cup [a + c, \infty)`. So `|z| < 3` = `-3 < z < 3` = `z \in (-3, 3)`.
fn abs_bound(toks: &[Tok]) -> Option<Vec<Tok>> {
    let [Tok::P('|'), var @ Tok::Letter(_), rest @ ..] = toks else {
        return None;
    };
    let close = rest.iter().position(|t| *t == Tok::P('|'))?;
    let (shift, after) = (&rest[..close], &rest[close + 1..]);
    let (op, bound) = after.split_first()?;
    let (upper, strict) = match op {
        Tok::Cmd(c) if c == "le" => (true, false),
        Tok::Cmd(c) if c == "ge" => (false, false),
        Tok::P('<') => (true, true),
        Tok::P('>') => (false, true),
        _ => return None,
    };
    let plain = |ts: &[Tok]| {
        !ts.is_empty()
            && ts.iter().all(|t| {
                !matches!(t, Tok::P('|' | '=' | '<' | '>' | ',') | Tok::Cmd(_))
                    || matches!(t, Tok::Cmd(c) if matches!(c.as_str(), "frac" | "sqrt" | "pi"))
            })
    };
    // the centre: `|x - a|` is `a`, `|x + a|` is `-a`, `|x|` is 0
    let centre: Vec<Tok> = match shift.split_first() {
        None => vec![Tok::Num {
            int: "0".into(),
            frac: String::new(),
            point: false,
        }],
        Some((Tok::P(sign @ ('-' | '+')), a)) if plain(a) => {
            let mut c = vec![Tok::P('-'), Tok::P('(')];
            c.extend_from_slice(a);
            c.push(Tok::P(')'));
            if *sign == '-' {
                c.drain(..1);
            }
            c
        }
        _ => return None,
    };
    if !plain(bound) {
        return None;
    }
    let end = |sign: char| {
        let mut e = vec![Tok::P('(')];
        e.extend_from_slice(&centre);
        e.extend([Tok::P(')'), Tok::P(sign), Tok::P('(')]);
        e.extend_from_slice(bound);
        e.push(Tok::P(')'));
        e
    };
    let (lo, hi) = (end('-'), end('+'));
    let mut out = Vec::with_capacity(2 * lo.len() + 12);
    if upper {
        let op = if strict {
            Tok::P('<')
        } else {
            Tok::Cmd("le".into())
        };
        out.extend(lo);
        out.extend([op.clone(), var.clone(), op]);
        out.extend(hi);
    } else {
        let (open, close) = if strict { ('(', ')') } else { ('[', ']') };
        out.extend([var.clone(), Tok::Cmd("in".into()), Tok::P('('), Tok::P('-')]);
        out.extend([Tok::Cmd("infty".into()), Tok::P(',')]);
        out.extend(lo);
        out.extend([Tok::P(close), Tok::Cmd("cup".into()), Tok::P(open)]);
        out.extend(hi);
        out.extend([Tok::P(','), Tok::Cmd("infty".into()), Tok::P(')')]);
    }
    Some(out)
}

/// Longest answer (the text of its pieces, in bytes) that is read as math. The longest answer of
/// the ~99K texts of MATH (train and test, problems and solutions), DAPO, GSM8K and
/// `bench/math_kinds.py` is 621 bytes, of 3,782 completions of Qwen2.5-Coder-1.5B and Gemma-3-270M
/// 663 (a loop); a longer one is compared by its text, which bounds the tokenizer and the parser
/// to a few thousand characters (~1 ms at worst) whatever the length of the input.
pub const MAX_ANSWER: usize = 2 << 10;

/// The pieces of an answer longer than [`MAX_ANSWER`], trimmed; None for a shorter one.
fn long_answer<'a>(ans: &extract::Answer<'a>) -> Option<Vec<&'a str>> {
    let len: usize = ans.pieces.iter().map(|p| piece_text(p).len()).sum();
    (len > MAX_ANSWER).then(|| ans.pieces.iter().map(|p| p.text.trim()).collect())
}

/// The text of a piece that is read: all of it, but for display math longer than [`MAX_ANSWER`]
/// only from where its last line starts (see [`display_tail`]).
fn piece_text<'a>(p: &extract::Piece<'a>) -> &'a str {
    if p.display && p.text.len() > MAX_ANSWER {
        display_tail(p.text)
    } else {
        p.text
    }
}

/// Display math cut to where its last line starts: after its last row break `\\` outside a
/// matrix that has something after it, the line [`last_line`] keeps. So a long `align*` still
/// states its last line (one forward pass).
fn display_tail(text: &str) -> &str {
    let b = text.as_bytes();
    // the end of the last character that is neither spacing nor a backslash
    let content = b
        .iter()
        .rposition(|c| !c.is_ascii_whitespace() && *c != b'\\')
        .map_or(0, |k| k + 1);
    let (mut depth, mut cut, mut i) = (0usize, 0usize, 0usize);
    while i < b.len() {
        if b[i] != b'\\' {
            i += 1;
            continue;
        }
        let rest = &text[i + 1..];
        if let Some(env) = rest
            .strip_prefix("begin{")
            .or_else(|| rest.strip_prefix("end{"))
        {
            let name: String = env
                .chars()
                .take_while(|c| *c != '}')
                .take(32)
                .filter(char::is_ascii_alphabetic)
                .collect();
            if !lex::is_display_env(&name) {
                depth = if rest.starts_with('b') {
                    depth + 1
                } else {
                    depth.saturating_sub(1)
                };
            }
        } else if rest.starts_with('\\') && depth == 0 && i + 2 < content {
            cut = i + 2;
        }
        i += 2; // the backslash and the character after it
    }
    &text[cut..]
}

/// Whether `pred` is a correct answer for `gold` (see the module docs for the rules).
pub fn math_equal(pred: &str, gold: &str) -> bool {
    let (ap, ag) = (extract::answer(pred), extract::answer(gold));
    match (long_answer(&ap), long_answer(&ag)) {
        (None, None) => {}
        (a, b) => return a.is_some() && a == b, // past the limit: the same text only
    }
    let tp = tokens_of(&ap);
    let tg = tokens_of(&ag);
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
        // In an order that does not depend on which is the prediction, so that the answer stays
        // symmetric when the comparison budget runs out (it is then not equal both ways).
        (Some(p), Some(g)) if texts(&ap).cmp(texts(&ag)).is_lt() => item_eq(&p, &g),
        (Some(p), Some(g)) => item_eq(&g, &p),
        _ => false,
    }
}

/// The texts of an answer's pieces.
fn texts<'a>(ans: &'a extract::Answer) -> impl Iterator<Item = &'a str> {
    ans.pieces.iter().map(|p| p.text)
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
