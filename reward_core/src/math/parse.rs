//! Tokens → answer structure, evaluating arithmetic as it goes (see `num`).
//!
//! Recursive descent with an explicit nesting limit ([`MAX_DEPTH`]): a deeper answer is an error
//! (the caller then judges by text), so no input can exhaust the stack. Every token is consumed at
//! most once (no backtracking), and ± expansion and collection sizes are capped, so the work is
//! linear in the input.

use super::lex::Tok;
use super::matrix;
use super::num::{Exact, Rat, Val, C};
use super::reading::{group_labelled, label_tokens, reading, Label};

/// Deepest nesting of groups/arguments accepted.
pub const MAX_DEPTH: usize = 48;
/// Most values a ± expression expands to.
const MAX_BRANCHES: usize = 8;
/// Most elements of a tuple, set, list or matrix.
pub const MAX_ITEMS: usize = 64;
/// Most terms of a sum, and factors of a product: no answer is longer (past it, only the text
/// can make an answer equal).
const MAX_TERMS: usize = 4096;
/// Most terms of a `\sum` / `\prod` evaluated one by one.
const MAX_SUMMED: usize = 1000;
/// Most work beyond one pass, in one answer: tokens read again to evaluate sums term by term,
/// and cell operations of matrix arithmetic.
const WORK_BUDGET: usize = 1 << 12;

/// Relations, normalised so that `>`/`≥` become `<`/`≤` with the sides swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rel {
    Eq,
    /// `\approx`: equal up to the places of a written decimal, or within 1 %.
    Approx,
    Ne,
    Lt,
    Le,
    In,
}

/// A parsed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An expression; more than one value after `±`.
    Val(Vec<Val>),
    /// Words (text answers such as `\text{Evelyn}`).
    Text(String),
    /// `(a, b, …)`: ordered.
    Tuple(Vec<Item>),
    /// `\{a, b\}` or a bare `a, b` list: unordered.
    Set(Vec<Item>),
    Interval {
        lo: Box<Item>,
        hi: Box<Item>,
        lo_closed: bool,
        hi_closed: bool,
    },
    Union(Vec<Item>),
    Matrix(Vec<Vec<Item>>),
    /// `a op b op c …` (`ops.len() == sides.len() - 1`) that has no reading as a value (an
    /// equation such as `2x + 3y = 6`, a false chain `2 = 3`), and which sides are a lone variable.
    Relation(Vec<Item>, Vec<Rel>, Vec<bool>),
    /// A relation read as a value, with the label it names if any: an assignment `x = 3`,
    /// `(p, q) = (3, 2)`, `AB = 4`, `x \in S`; an inequality on one variable as the interval of its
    /// solutions (`1 < x \le 2` is `x` labelling `(1, 2]`); a chain of equal constants
    /// (`\frac{6}{2} = 3`, no label). `raw` is the relation as written, when there is one.
    Labelled {
        label: Option<Box<Item>>,
        value: Box<Item>,
        raw: Option<Box<Item>>,
    },
    /// Readings of one answer that are all equal (the sides of `2\sqrt3 \approx 3.46`).
    Alt(Vec<Item>),
    /// `a : b : c`, three parts or more, scaled so that the first part is 1 (`a : b` is `a/b`).
    Ratio(Vec<Val>),
    /// A clock time `h:mm` or `h:mm:ss` (see [`Clock`]), with its reading as a ratio for the
    /// comparison against anything that is not a time (`7:32` = `\frac{7}{32}`).
    Time(Clock, Box<Item>),
}

/// A clock time: seconds past midnight modulo 12 hours, and `Some(pm)` when the half of the day
/// is known (an `am`/`pm` mark, or an hour of 0 or 13 to 23). Two times are equal when their
/// seconds are, and their halves when both are known (`4:30` = `4:30 pm` = `16:30` ≠ `4:30 am`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub secs: u32,
    pub pm: Option<bool>,
}

impl Clock {
    pub fn same(self, other: Clock) -> bool {
        self.secs == other.secs && (self.pm.is_none() || other.pm.is_none() || self.pm == other.pm)
    }
}

pub type Res<T> = Result<T, ()>;

/// A clock time at the start of `toks`: `h:mm` or `h:mm:ss`, an hour of one or two digits up to
/// 24, minutes and seconds of two digits up to 59 (`19:60` and `3:5` are ratios); with the number
/// of tokens it takes. Its half of the day is known from a 24-hour hour only (an `am` / `pm` mark after it is read by the parser).
pub fn clock(toks: &[Tok]) -> Option<(Clock, usize)> {
    let plain = |t: &Tok, lo: usize, hi: usize, max: u32| match t {
        Tok::Num { int, frac, point }
            if !point && frac.is_empty() && (lo..=hi).contains(&int.len()) =>
        {
            int.parse::<u32>().ok().filter(|v| *v <= max)
        }
        _ => None,
    };
    let (h, m) = match toks {
        [a, Tok::P(':'), b, ..] => (plain(a, 1, 2, 24)?, plain(b, 2, 2, 59)?),
        _ => return None,
    };
    let (s, len) = match toks.get(3..5) {
        Some([Tok::P(':'), c]) => (plain(c, 2, 2, 59)?, 5),
        _ => (0, 3),
    };
    let pm = match h {
        0 => Some(false),
        13..=24 => Some(true),
        _ => None,
    };
    Some((
        Clock {
            secs: (h % 12) * 3600 + m * 60 + s,
            pm,
        },
        len,
    ))
}

/// An `am` / `pm` mark after a time (`4:30pm`, `4:30 p.m.`, `\text{ PM}`): Some(pm) and its
/// number of tokens.
fn clock_mark(toks: &[Tok]) -> (Option<bool>, usize) {
    let pm = match toks.first() {
        Some(Tok::Word(w)) if w == "am" || w == "pm" => return (Some(w == "pm"), 1),
        Some(Tok::Letter(c @ ('a' | 'p'))) => *c == 'p',
        _ => return (None, 0),
    };
    let mut k = 1;
    while toks.get(k) == Some(&Tok::P('.')) {
        k += 1;
    }
    match toks.get(k) {
        Some(Tok::Letter('m')) => (Some(pm), k + 1),
        // `\text{ p.m.}` loses its `m.` as a unit of length
        None => (Some(pm), k),
        _ => (None, 0),
    }
}

/// A time with the `am` / `pm` mark that follows it, if any.

#[derive(Debug)]
pub struct Parser<'a> {
    toks: &'a [Tok],
    pos: usize,
    depth: usize,
    /// A digit split off a multi-digit number (`\frac34`, `x^23`): the rest of that number.
    pending: Option<Tok>,
    /// Index variables of the `\sum`/`\prod` being read, innermost last, and their values.
    binds: Vec<(String, Val)>,
    /// Work that sums and matrix arithmetic may still do (see [`WORK_BUDGET`]).
    budget: usize,
}

fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

fn num_val(int: &str, frac: &str, point: bool) -> Val {
    // i128 digits without an allocation; None past 36 digits.
    let mut n: Option<i128> = Some(0);
    for b in int.bytes().chain(frac.bytes()) {
        n = n.and_then(|v| v.checked_mul(10)?.checked_add(i128::from(b - b'0')));
    }
    let exact = if int.len() + frac.len() <= 36 {
        n.and_then(|n| {
            let den = 10i128.checked_pow(u32::try_from(frac.len()).ok()?)?;
            Rat::new(n, den)
        })
    } else {
        None
    };
    let mut v = match exact {
        Some(r) => Val::exact(Exact::rat(r)),
        // an integer past the exact field is a value of its own, named by its digits: integers
        // of any size compare exactly (never two overflows alike)
        None if !point || frac.bytes().all(|d| d == b'0') => {
            let digits = int.trim_start_matches('0');
            opaque(&format!("int {digits}"))
        }
        None => {
            let text = format!("{}.{}", if int.is_empty() { "0" } else { int }, frac);
            Val::float(C::real(text.parse::<f64>().unwrap_or(f64::NAN)))
        }
    };
    if point {
        // Trailing zeros add no precision: `4.6666670` is read as written to 6 places.
        v.dec = u32::try_from(frac.trim_end_matches('0').len()).ok();
    }
    v
}

fn konst(z: C) -> Val {
    Val::float(z)
}

fn one_val(item: Item) -> Res<Vec<Val>> {
    match item {
        Item::Val(v) => Ok(v),
        _ => Err(()),
    }
}

/// Cartesian combination of two multi-values, capped.
/// `acc = combine(acc, b, f)`, in place for single values (the common case: no allocation).
fn combine_into(acc: &mut Vec<Val>, b: &[Val], f: impl Fn(&Val, &Val) -> Val) -> Res<()> {
    if let ([x], [y]) = (acc.as_mut_slice(), b) {
        *x = f(x, y);
        return Ok(());
    }
    *acc = combine(acc, b, f)?;
    Ok(())
}

fn combine(a: &[Val], b: &[Val], f: impl Fn(&Val, &Val) -> Val) -> Res<Vec<Val>> {
    if let ([x], [y]) = (a, b) {
        return Ok(vec![f(x, y)]);
    }
    if a.len() * b.len() > MAX_BRANCHES {
        return Err(());
    }
    Ok(a.iter()
        .flat_map(|x| b.iter().map(|y| f(x, y)).collect::<Vec<_>>())
        .collect())
}

impl<'a> Parser<'a> {
    pub fn new(toks: &'a [Tok]) -> Self {
        Parser {
            toks,
            pos: 0,
            depth: 0,
            pending: None,
            binds: Vec::new(),
            budget: WORK_BUDGET,
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.pending.as_ref().or_else(|| self.toks.get(self.pos))
    }
    fn bump(&mut self) -> Option<Tok> {
        if let Some(t) = self.pending.take() {
            return Some(t);
        }
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn eat(&mut self, t: &Tok) -> bool {
        if self.peek() == Some(t) {
            self.bump();
            true
        } else {
            false
        }
    }
    fn expect(&mut self, t: &Tok) -> Res<()> {
        if self.eat(t) {
            Ok(())
        } else {
            Err(())
        }
    }
    fn enter(&mut self) -> Res<()> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            Err(())
        } else {
            Ok(())
        }
    }
    fn leave(&mut self) {
        self.depth -= 1;
    }

    /// The whole answer: one item, or a bare comma list (a set).
    pub fn answer(&mut self) -> Res<Item> {
        if self.peek().is_none() {
            return Err(());
        }
        let mut items = vec![self.relation()?];
        while matches!(self.peek(), Some(Tok::P(',' | ';'))) {
            self.bump();
            if self.peek().is_none() {
                break; // a trailing comma
            }
            items.push(self.relation()?);
            if items.len() > MAX_ITEMS {
                return Err(());
            }
        }
        if self.peek().is_some() {
            return Err(());
        }
        Ok(if items.len() == 1 {
            items.pop().ok_or(())?
        } else {
            group_labelled(items)
        })
    }

    fn rel_op(&self) -> Option<(Rel, bool)> {
        match self.peek()? {
            Tok::P('=') => Some((Rel::Eq, false)),
            Tok::P('<') => Some((Rel::Lt, false)),
            Tok::P('>') => Some((Rel::Lt, true)),
            Tok::Cmd(c) => match c.as_str() {
                "le" => Some((Rel::Le, false)),
                "ge" => Some((Rel::Le, true)),
                "ne" => Some((Rel::Ne, false)),
                "in" => Some((Rel::In, false)),
                "equiv" => Some((Rel::Eq, false)),
                "approx" | "simeq" | "thickapprox" => Some((Rel::Approx, false)),
                _ => None,
            },
            _ => None,
        }
    }

    /// One side of a relation, whether it was a lone variable (`x`, `\\theta`, `x_1`, `f(x)`), and
    /// whether it can label a value (a lone variable, `AB`, `|AB|`, `a+b`, `(p, q)`, `S : T`).
    fn side(&mut self) -> Res<(Item, bool, Label)> {
        let start = (self.pos, self.pending.is_some());
        let item = self.ratio()?;
        let toks = (!start.1 && self.pending.is_none())
            .then(|| self.toks.get(start.0..self.pos))
            .flatten();
        let lone = toks.is_some_and(lone_var_tokens);
        let label = lone || toks.is_some_and(label_tokens);
        // a label that sums names (`x + y + z`) is a left side of an equation when it `= 0`
        let sum = label
            && !lone
            && toks.is_some_and(|t| t.iter().any(|t| matches!(t, Tok::P('+' | '-'))));
        Ok((
            item,
            lone,
            if sum {
                Label::Sum
            } else if label {
                Label::Yes
            } else {
                Label::No
            },
        ))
    }

    /// `a : b` (read as `a/b`), `a : b : c` (a [`Item::Ratio`]), or one union.
    fn ratio(&mut self) -> Res<Item> {
        let start = self.pos;
        if let Some((c, len)) = clock(&self.toks[start..]) {
            // a clock time, with its reading as a ratio when it has one (`12:00` has none)
            let written = &self.toks[start..start + len];
            let ratio = Parser::new(written)
                .ratio_plain()
                .unwrap_or_else(|()| Item::Text(super::lex::render(written)));
            self.pos = start + len;
            let (mark, n) = clock_mark(&self.toks[self.pos..]);
            self.pos += n;
            let pm = mark.or(c.pm);
            return Ok(Item::Time(Clock { secs: c.secs, pm }, Box::new(ratio)));
        }
        self.ratio_plain()
    }

    fn ratio_plain(&mut self) -> Res<Item> {
        let first = self.union()?;
        self.ratio_rest(first)
    }

    /// The rest of a ratio after its first part.
    fn ratio_rest(&mut self, first: Item) -> Res<Item> {
        if self.peek() != Some(&Tok::P(':')) {
            return Ok(first);
        }
        let mut parts = one_val(first)?;
        if parts.len() != 1 {
            return Err(());
        }
        while self.eat(&Tok::P(':')) {
            let v = one_val(self.union()?)?;
            if v.len() != 1 || parts.len() >= MAX_ITEMS {
                return Err(());
            }
            parts.extend(v);
        }
        if let [a, b] = parts.as_slice() {
            return Ok(Item::Val(vec![a.div(b)]));
        }
        let first = parts[0].clone();
        Ok(Item::Ratio(parts.iter().map(|v| v.div(&first)).collect()))
    }

    fn relation(&mut self) -> Res<Item> {
        let (first, lone, label) = self.side()?;
        let mut sides = vec![first];
        let mut lones = vec![lone];
        let mut labels = vec![label];
        let mut ops = Vec::new();
        let mut flipped = None;
        while let Some((op, flip)) = self.rel_op() {
            self.bump();
            // `≤ =` or `==`: one relation
            while self.eat(&Tok::P('=')) {}
            // only inequalities have a direction (`x = 3 > 2` reads left to right)
            if matches!(op, Rel::Lt | Rel::Le) && *flipped.get_or_insert(flip) != flip {
                return Err(()); // mixed directions: not a chain we compare
            }
            ops.push(op);
            let (side, lone, label) = self.side()?;
            sides.push(side);
            lones.push(lone);
            labels.push(label);
            if sides.len() > MAX_ITEMS {
                return Err(());
            }
        }
        if ops.is_empty() {
            return sides.pop().ok_or(());
        }
        if flipped == Some(true) {
            sides.reverse();
            ops.reverse();
            lones.reverse();
            labels.reverse();
        }
        Ok(match reading(&sides, &ops, &lones, &labels) {
            Some((label, value)) => Item::Labelled {
                label: label.map(Box::new),
                value: Box::new(value),
                raw: Some(Box::new(Item::Relation(sides, ops, lones))),
            },
            None => Item::Relation(sides, ops, lones),
        })
    }

    fn union(&mut self) -> Res<Item> {
        let first = self.expr()?;
        if !matches!(self.peek(), Some(Tok::Cmd(c)) if c == "cup") {
            return Ok(first);
        }
        let mut parts = vec![first];
        while self.eat(&Tok::Cmd("cup".into())) {
            parts.push(self.expr()?);
            if parts.len() > MAX_ITEMS {
                return Err(());
            }
        }
        Ok(Item::Union(parts))
    }

    /// A sum: `[±] term ((+|-|±|∓) term)*`. A lone non-value term (tuple, set, text…) passes through.
    fn expr(&mut self) -> Res<Item> {
        let mut sign: Option<char> = None;
        match self.peek() {
            Some(Tok::P('-')) => {
                self.bump();
                sign = Some('-');
            }
            Some(Tok::P('+')) => {
                self.bump();
            }
            Some(Tok::Cmd(c)) if c == "pm" || c == "mp" => {
                self.bump();
                sign = Some('±');
            }
            _ => {}
        }
        let first = self.term()?;
        let is_op = |t: Option<&Tok>| match t {
            Some(Tok::P('+' | '-')) => true,
            Some(Tok::Cmd(c)) => c == "pm" || c == "mp",
            _ => false,
        };
        if sign.is_none() && !is_op(self.peek()) {
            return Ok(first);
        }
        if let Item::Matrix(_) = first {
            return self.matrix_sum(&first, sign);
        }
        let mut acc = one_val(first)?;
        acc = match sign {
            Some('-') => acc
                .iter()
                .map(|v| {
                    let mut n = v.neg();
                    n.pct = v.pct;
                    n
                })
                .collect(),
            Some(_) => combine(
                &acc,
                &[
                    Val::exact(Exact::rat(Rat::ONE)),
                    Val::exact(Exact::rat(Rat::int(-1))),
                ],
                Val::mul,
            )?,
            None => acc,
        };
        let mut terms = 1;
        while is_op(self.peek()) {
            terms += 1;
            if terms > MAX_TERMS {
                return Err(());
            }
            let op = self.bump();
            let rhs = one_val(self.term()?)?;
            match op {
                Some(Tok::P('+')) => combine_into(&mut acc, &rhs, Val::add)?,
                Some(Tok::P('-')) => combine_into(&mut acc, &rhs, Val::sub)?,
                _ => {
                    let mut both = combine(&acc, &rhs, Val::add)?;
                    both.extend(combine(&acc, &rhs, Val::sub)?);
                    if both.len() > MAX_BRANCHES {
                        return Err(());
                    }
                    acc = both;
                }
            }
        }
        Ok(Item::Val(acc))
    }

    /// Takes `cost` from the work budget, or fails when it is spent.
    fn charge(&mut self, cost: usize) -> Res<()> {
        self.budget = self.budget.checked_sub(cost).ok_or(())?;
        Ok(())
    }

    /// `A ± B ± …` for matrices of one shape (after an optional sign on `A`).
    fn matrix_sum(&mut self, first: &Item, sign: Option<char>) -> Res<Item> {
        let mut acc = matrix::cells(first)?;
        match sign {
            Some('-') => {
                self.charge(matrix::size(&acc))?;
                acc = matrix::scale(&acc, &Val::exact(Exact::rat(Rat::int(-1))));
            }
            Some(_) => return Err(()),
            None => {}
        }
        loop {
            let sub = match self.peek() {
                Some(Tok::P('+')) => false,
                Some(Tok::P('-')) => true,
                Some(Tok::Cmd(c)) if c == "pm" || c == "mp" => return Err(()),
                _ => break,
            };
            self.bump();
            let rhs = matrix::cells(&self.term()?)?;
            self.charge(matrix::size(&acc))?;
            acc = matrix::add(&acc, &rhs, sub)?;
        }
        Ok(matrix::item(acc))
    }

    /// The rest of a product whose value so far is the matrix `acc`: more matrices (multiplied)
    /// and scalars (scaling), joined by `*` or juxtaposition.
    fn matrix_product(&mut self, mut acc: matrix::M) -> Res<Item> {
        loop {
            match self.peek() {
                Some(Tok::P('*')) => {
                    self.bump();
                }
                _ if self.starts_implicit() => {}
                _ => break,
            }
            let f = self.factor()?;
            acc = match f {
                Item::Matrix(_) => {
                    let rhs = matrix::cells(&f)?;
                    self.charge(matrix::product_cost(&acc, &rhs))?;
                    matrix::mul(&acc, &rhs)?
                }
                _ => match one_val(f)?.as_slice() {
                    [s] => {
                        self.charge(matrix::size(&acc))?;
                        matrix::scale(&acc, s)
                    }
                    _ => return Err(()),
                },
            };
        }
        Ok(matrix::item(acc))
    }

    /// `\sum_{k=a}^{b} body` / `\prod`: the body is the product after the limits. Integer limits
    /// (at most [`MAX_SUMMED`] terms, within [`WORK_BUDGET`]) are evaluated term by term, reading
    /// the body again with `k` bound to each value; otherwise the sum is a value named by its
    /// limits and its body, evaluated with `k` as a variable of its own (so `\sum_{i=1}^n 3i` =
    /// `\sum_{k=1}^{n} k \cdot 3`).
    fn big_op(&mut self, sum: bool) -> Res<Item> {
        self.expect(&Tok::P('_'))?;
        let braced = self.eat(&Tok::P('{'));
        let name = match self.bump() {
            Some(Tok::Letter(c)) => c.to_string(),
            Some(Tok::Cmd(c)) if GREEK.contains(&c.as_str()) => c,
            _ => return Err(()),
        };
        self.expect(&Tok::P('='))?;
        self.enter()?;
        let lo = if braced { self.expr() } else { self.arg() };
        self.leave();
        let lo = one_val(lo?)?;
        if braced {
            self.expect(&Tok::P('}'))?;
        }
        self.expect(&Tok::P('^'))?;
        let hi = one_val(self.arg()?)?;
        let ([lo], [hi]) = (lo.as_slice(), hi.as_slice()) else {
            return Err(());
        };
        if self.pending.is_some() {
            return Err(());
        }
        let start = self.pos;
        let index = Val::var(fnv(&format!("\u{1}index{}", self.binds.len())));
        self.binds.push((name.clone(), index));
        self.enter()?;
        let body = self.term();
        self.leave();
        self.binds.pop();
        let body = one_val(body?)?;
        let ([body], None) = (body.as_slice(), &self.pending) else {
            return Err(());
        };
        let end = self.pos;
        let int = |v: &Val| {
            v.exact
                .as_ref()
                .and_then(Exact::as_rat)
                .filter(|r| r.is_int())
                .map(|r| r.num)
        };
        if let (Some(a), Some(b)) = (int(lo), int(hi)) {
            let count = usize::try_from(b.saturating_sub(a).saturating_add(1)).ok();
            let cost = count.map(|c| c.saturating_mul(end - start + 1));
            if let (Some(count), Some(cost)) = (count, cost) {
                if count <= MAX_SUMMED && cost <= self.budget {
                    self.budget -= cost;
                    return self.big_op_terms(sum, &name, a, b, start, end);
                }
            }
        }
        let mut h = fnv(if sum { "\u{1}sum" } else { "\u{1}prod" });
        for v in [lo, hi, body] {
            for z in v.s {
                h = (h ^ quantize(z.re)).wrapping_mul(0x0100_0000_01b3);
                h = (h ^ quantize(z.im)).wrapping_mul(0x0100_0000_01b3);
            }
        }
        Ok(Item::Val(vec![Val::var(h)]))
    }

    /// The sum (or product) of the body `toks[start..end]` for the index from `a` to `b`.
    fn big_op_terms(
        &mut self,
        sum: bool,
        name: &str,
        a: i128,
        b: i128,
        start: usize,
        end: usize,
    ) -> Res<Item> {
        let mut acc = Val::exact(Exact::rat(if sum { Rat::ZERO } else { Rat::ONE }));
        let mut k = a;
        while k <= b {
            let mut sub = Parser {
                toks: &self.toks[start..end],
                pos: 0,
                depth: self.depth,
                pending: None,
                binds: self.binds.clone(),
                budget: self.budget,
            };
            sub.binds
                .push((name.to_owned(), Val::exact(Exact::rat(Rat::int(k)))));
            let v = one_val(sub.term()?)?;
            if sub.peek().is_some() || v.len() != 1 {
                return Err(());
            }
            self.budget = sub.budget;
            acc = if sum { acc.add(&v[0]) } else { acc.mul(&v[0]) };
            k += 1;
        }
        Ok(Item::Val(vec![acc]))
    }

    /// Whether the next tokens are `{c}` (and if so, reads them).
    fn eat_letter_arg(&mut self, c: char) -> bool {
        let hit = self.pending.is_none()
            && self.toks.get(self.pos..self.pos + 3)
                == Some(&[Tok::P('{'), Tok::Letter(c), Tok::P('}')][..]);
        if hit {
            self.pos += 3;
        }
        hit
    }

    /// The value bound to an index variable `name`, if one is.
    fn bound(&self, name: &str) -> Option<Val> {
        if self.binds.is_empty() {
            return None;
        }
        self.binds
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }

    /// Whether the next token can start a factor multiplied by juxtaposition.
    fn starts_implicit(&self) -> bool {
        match self.peek() {
            Some(Tok::Num { .. } | Tok::Letter(_) | Tok::Word(_) | Tok::P('(') | Tok::Begin(_)) => {
                true
            }
            Some(Tok::Cmd(c)) => !matches!(
                c.as_str(),
                "pm" | "mp"
                    | "cup"
                    | "le"
                    | "ge"
                    | "ne"
                    | "in"
                    | "approx"
                    | "equiv"
                    | "cap"
                    | "setminus"
            ),
            _ => false,
        }
    }

    /// A product: factors joined by `*`, `/` or juxtaposition. Mixed numbers: an integer followed
    /// by `\frac{int}{int}` is their sum (`1\frac{4}{5}` = 9/5).
    fn term(&mut self) -> Res<Item> {
        let first_is_int = matches!(self.peek(), Some(Tok::Num { point: false, .. }));
        let first = self.factor()?;
        let mixed_next =
            |p: &Self| first_is_int && matches!(p.peek(), Some(Tok::Cmd(c)) if c == "frac");
        if !matches!(self.peek(), Some(Tok::P('*' | '/'))) && !self.starts_implicit() {
            return Ok(first);
        }
        // Text times text: words side by side.
        if let Item::Text(mut t) = first {
            while let Some(Tok::Word(_) | Tok::Letter(_)) = self.peek() {
                match self.bump() {
                    Some(Tok::Word(w)) => {
                        t.push(' ');
                        t.push_str(&w);
                    }
                    Some(Tok::Letter(c)) => {
                        t.push(' ');
                        t.push(c);
                    }
                    _ => {}
                }
            }
            return Ok(Item::Text(t));
        }
        if let Item::Matrix(_) = first {
            return self.matrix_product(matrix::cells(&first)?);
        }
        let mut mixed = mixed_next(self);
        let mut acc = one_val(first)?;
        let mut factors = 1;
        loop {
            factors += 1;
            if factors > MAX_TERMS {
                return Err(());
            }
            let op = match self.peek() {
                Some(Tok::P('*')) => {
                    self.bump();
                    '*'
                }
                Some(Tok::P('/')) => {
                    self.bump();
                    '/'
                }
                _ if self.starts_implicit() => ' ',
                _ => break,
            };
            let rhs = self.factor()?;
            if let Item::Matrix(_) = rhs {
                // a scalar times a matrix (`2\begin{pmatrix}…`)
                let [s] = acc.as_slice() else { return Err(()) };
                if op == '/' {
                    return Err(());
                }
                let m = matrix::cells(&rhs)?;
                self.charge(matrix::size(&m))?;
                return self.matrix_product(matrix::scale(&m, s));
            }
            let rhs = one_val(rhs)?;
            match op {
                '/' => combine_into(&mut acc, &rhs, Val::div)?,
                ' ' if mixed
                    && rhs
                        .iter()
                        .all(|v| v.exact.as_ref().and_then(Exact::as_rat).is_some()) =>
                {
                    combine_into(&mut acc, &rhs, |a, b| {
                        // 3\frac12 = 3 + 1/2; −3\frac12 is handled by the sum's sign (−(3+½)).
                        a.add(b)
                    })?;
                }
                _ => combine_into(&mut acc, &rhs, Val::mul)?,
            }
            mixed = false;
        }
        Ok(Item::Val(acc))
    }

    /// A factor: `[-]primary` with postfix `^e`, `!`, `%`, `_sub`.
    fn factor(&mut self) -> Res<Item> {
        if self.eat(&Tok::P('-')) {
            self.enter()?;
            let f = self.factor()?;
            self.leave();
            if let Item::Matrix(_) = f {
                let minus = Val::exact(Exact::rat(Rat::int(-1)));
                let m = matrix::cells(&f)?;
                self.charge(matrix::size(&m))?;
                return Ok(matrix::item(matrix::scale(&m, &minus)));
            }
            let v = one_val(f)?;
            return Ok(Item::Val(v.iter().map(Val::neg).collect()));
        }
        while self.eat(&Tok::P('+')) {} // unary plus (a loop: `+++…` must not recurse)
        let mut item = self.primary()?;
        loop {
            match self.peek() {
                Some(Tok::P('^')) => {
                    self.bump();
                    let e = one_val(self.arg()?)?;
                    if let Item::Matrix(_) = item {
                        let n = e.first().and_then(|v| v.exact.as_ref()?.as_rat());
                        let n = n.filter(|r| r.is_int() && e.len() == 1).ok_or(())?.num;
                        let m = matrix::cells(&item)?;
                        let times = usize::try_from(n.clamp(1, matrix::MAX_POWER)).unwrap_or(1);
                        self.charge(matrix::product_cost(&m, &m).saturating_mul(times))?;
                        item = matrix::item(matrix::pow(&m, n)?);
                        continue;
                    }
                    let b = one_val(item)?;
                    item = Item::Val(combine(&b, &e, big_pow)?);
                }
                Some(Tok::P('!')) => {
                    self.bump();
                    let b = one_val(item)?;
                    item = Item::Val(b.iter().map(factorial).collect());
                }
                Some(Tok::Percent) => {
                    self.bump();
                    let b = one_val(item)?;
                    let hundred = Val::exact(Exact::rat(Rat::int(100)));
                    item = Item::Val(
                        b.iter()
                            .map(|v| {
                                let mut p = v.div(&hundred);
                                p.pct = true;
                                p.dec = v.dec;
                                p
                            })
                            .collect(),
                    );
                }
                Some(Tok::P('\'')) => {
                    self.bump();
                }
                _ => break,
            }
        }
        Ok(item)
    }

    /// The argument of `\frac`, `\sqrt`, `^`: a `{group}`, one digit of a number, or one primary.
    fn arg(&mut self) -> Res<Item> {
        match self.peek() {
            Some(Tok::P('{')) => {
                self.bump();
                self.enter()?;
                let v = self.relation()?;
                self.leave();
                self.expect(&Tok::P('}'))?;
                Ok(v)
            }
            Some(Tok::Num { int, frac, point }) if !*point && int.len() > 1 => {
                let (int, frac) = (int.clone(), frac.clone());
                let first = &int[..1];
                let rest = Tok::Num {
                    int: int[1..].to_owned(),
                    frac,
                    point: false,
                };
                self.bump();
                self.pending = Some(rest);
                Ok(Item::Val(vec![num_val(first, "", false)]))
            }
            Some(Tok::P('-')) => {
                self.bump();
                self.enter()?;
                let v = one_val(self.arg()?)?;
                self.leave();
                Ok(Item::Val(v.iter().map(Val::neg).collect()))
            }
            _ => {
                self.enter()?;
                let v = self.primary();
                self.leave();
                v
            }
        }
    }

    /// Items up to a closing token, separated by `,`/`;`; returns them and the closer.
    fn list_until(&mut self, closers: &[Tok]) -> Res<(Vec<Item>, Tok)> {
        self.enter()?;
        let mut items = Vec::new();
        if let Some(t) = self.peek() {
            if closers.contains(t) {
                let t = t.clone();
                self.bump();
                self.leave();
                return Ok((items, t));
            }
        }
        loop {
            items.push(self.relation()?);
            if items.len() > MAX_ITEMS {
                return Err(());
            }
            match self.bump() {
                Some(Tok::P(',' | ';')) => {}
                Some(t) if closers.contains(&t) => {
                    self.leave();
                    return Ok((items, t));
                }
                _ => return Err(()),
            }
        }
    }

    #[allow(clippy::too_many_lines)] // one match over the token kinds
    fn primary(&mut self) -> Res<Item> {
        // Borrowed from the token slice (no clone of its strings) unless it is a split-off digit.
        let tok: std::borrow::Cow<'a, Tok> = match self.pending.take() {
            Some(t) => std::borrow::Cow::Owned(t),
            None => {
                let toks: &'a [Tok] = self.toks;
                let t = toks.get(self.pos).ok_or(())?;
                self.pos += 1;
                std::borrow::Cow::Borrowed(t)
            }
        };
        match &*tok {
            Tok::Num { int, frac, point } => {
                let v = num_val(int, frac, *point);
                // `2516_8`, `4210_{5}`: a base subscript is dropped (as Math-Verify does); two
                // different bases are told apart in `math_equal` (see `base_subscripts`).
                if self.eat(&Tok::P('_')) {
                    self.subscript_text()?;
                }
                Ok(Item::Val(vec![v]))
            }
            Tok::Letter(c) => {
                let mut buf = [0u8; 4];
                let mut long = String::new(); // `x_1`: the name with its subscript
                if self.eat(&Tok::P('_')) {
                    let sub = self.subscript_text()?;
                    long.push(*c);
                    long.push('_');
                    long.push_str(&sub);
                }
                let name: &str = if long.is_empty() {
                    c.encode_utf8(&mut buf)
                } else {
                    &long
                };
                if let Some(v) = self.bound(name) {
                    return Ok(Item::Val(vec![v]));
                }
                Ok(Item::Val(vec![match name {
                    "e" => konst(C::real(std::f64::consts::E)),
                    "i" => Val::exact(Exact::i()),
                    _ => Val::var(fnv(name)),
                }]))
            }
            Tok::Word(w) => Ok(Item::Text(w.clone())),
            Tok::P('(' | '[') => {
                let open = *tok == Tok::P('[');
                let (mut items, close) = self.list_until(&[Tok::P(')'), Tok::P(']')])?;
                let close_sq = close == Tok::P(']');
                match items.len() {
                    0 => Err(()),
                    1 if open == close_sq => items.pop().ok_or(()),
                    2 if open || close_sq => {
                        let hi = items.pop().ok_or(())?;
                        let lo = items.pop().ok_or(())?;
                        Ok(Item::Interval {
                            lo: Box::new(lo),
                            hi: Box::new(hi),
                            lo_closed: open,
                            hi_closed: close_sq,
                        })
                    }
                    _ if !open && !close_sq => Ok(Item::Tuple(items)),
                    _ => Err(()),
                }
            }
            Tok::P('{') => {
                let (mut items, _) = self.list_until(&[Tok::P('}')])?;
                match items.len() {
                    0 => Err(()),
                    1 => items.pop().ok_or(()),
                    _ => Ok(Item::Set(items)),
                }
            }
            Tok::SetOpen => {
                let (items, _) = self.list_until(&[Tok::SetClose])?;
                Ok(Item::Set(items))
            }
            Tok::P('|') => {
                self.enter()?;
                let v = one_val(self.expr()?)?;
                self.leave();
                self.expect(&Tok::P('|'))?;
                Ok(Item::Val(v.iter().map(abs_val).collect()))
            }
            Tok::Begin(env) => self.matrix(env),
            Tok::Cmd(name) => self.command(name),
            _ => Err(()),
        }
    }

    fn subscript_text(&mut self) -> Res<String> {
        let mut s = String::new();
        let mut depth = 0usize;
        loop {
            let t = self.bump().ok_or(())?;
            match t {
                Tok::P('{') => depth += 1,
                Tok::P('}') => depth = depth.checked_sub(1).ok_or(())?,
                Tok::Num { int, frac, .. } => {
                    s.push_str(&int);
                    s.push_str(&frac);
                }
                Tok::Letter(c) => s.push(c),
                Tok::Word(w) | Tok::Cmd(w) => s.push_str(&w),
                Tok::P(c) => s.push(c),
                _ => return Err(()),
            }
            if depth == 0 || s.len() > 64 {
                return Ok(s);
            }
        }
    }

    fn matrix(&mut self, env: &str) -> Res<Item> {
        if !matches!(
            env,
            "pmatrix" | "bmatrix" | "matrix" | "Bmatrix" | "array" | "smallmatrix"
        ) {
            return Err(());
        }
        if env == "array" && self.eat(&Tok::P('{')) {
            while !self.eat(&Tok::P('}')) {
                self.bump().ok_or(())?;
            }
        }
        self.enter()?;
        let mut rows: Vec<Vec<Item>> = vec![Vec::new()];
        loop {
            match self.peek() {
                Some(Tok::End(_)) => {
                    self.bump();
                    break;
                }
                Some(Tok::RowSep) => {
                    self.bump();
                    rows.push(Vec::new());
                }
                Some(Tok::P('&')) => {
                    self.bump();
                }
                None => return Err(()),
                _ => {
                    let cell = self.relation()?;
                    let row = rows.last_mut().ok_or(())?;
                    row.push(cell);
                    if row.len() > MAX_ITEMS || rows.len() > MAX_ITEMS {
                        return Err(());
                    }
                }
            }
        }
        self.leave();
        if rows.last().is_some_and(Vec::is_empty) {
            rows.pop();
        }
        let w = rows.first().map_or(0, Vec::len);
        if w == 0 || rows.iter().any(|r| r.len() != w) {
            return Err(());
        }
        Ok(Item::Matrix(rows))
    }

    /// A function's argument: `(…)`, `{…}`, or the juxtaposed factors that follow (`\sin 2x`).
    fn fn_arg(&mut self) -> Res<Vec<Val>> {
        self.enter()?;
        let r = if matches!(self.peek(), Some(Tok::P('(' | '{'))) {
            one_val(self.primary()?)
        } else {
            let mut acc = one_val(self.factor()?)?;
            while matches!(self.peek(), Some(Tok::Num { .. } | Tok::Letter(_))) {
                let rhs = one_val(self.factor()?)?;
                acc = combine(&acc, &rhs, Val::mul)?;
            }
            Ok(acc)
        };
        self.leave();
        r
    }

    fn command(&mut self, name: &str) -> Res<Item> {
        let exact1 = Val::exact(Exact::rat(Rat::ONE));
        let one = |v: Val| Ok(Item::Val(vec![v]));
        match name {
            "frac" => {
                let a = one_val(self.arg()?)?;
                let b = one_val(self.arg()?)?;
                Ok(Item::Val(combine(&a, &b, Val::div)?))
            }
            "sqrt" => {
                let index = if self.eat(&Tok::P('[')) {
                    self.enter()?;
                    let v = one_val(self.expr()?)?;
                    self.leave();
                    self.expect(&Tok::P(']'))?;
                    Some(v)
                } else {
                    None
                };
                let x = one_val(self.arg()?)?;
                let half = Val::exact(Exact::rat(Rat::new(1, 2).ok_or(())?));
                match index {
                    None => Ok(Item::Val(x.iter().map(|v| v.pow(&half)).collect())),
                    Some(n) => {
                        let inv = combine(&[exact1], &n, Val::div)?;
                        Ok(Item::Val(combine(&x, &inv, real_root)?))
                    }
                }
            }
            "pi" => one(konst(C::real(std::f64::consts::PI))),
            "infty" => one(konst(C::real(f64::INFINITY))),
            "emptyset" => Ok(Item::Set(Vec::new())),
            "exp" => {
                let x = self.fn_arg()?;
                Ok(Item::Val(
                    x.iter().map(|v| v.map(|_| None, C::exp)).collect(),
                ))
            }
            "binom" => {
                let n = one_val(self.arg()?)?;
                let k = one_val(self.arg()?)?;
                Ok(Item::Val(combine(&n, &k, binom)?))
            }
            "pm" | "mp" => Err(()),
            // `\mathbb{R}`: the real line, `(-\infty, \infty)`
            "mathbb" if self.eat_letter_arg('r') => Ok(real_line()),
            "sum" => self.big_op(true),
            "prod" => self.big_op(false),
            "log" | "ln" | "lg" => {
                let base = if name == "log" && self.eat(&Tok::P('_')) {
                    Some(one_val(self.arg()?)?)
                } else {
                    None
                };
                let power = self.fn_power()?;
                let x = self.fn_arg()?;
                let mut out: Vec<Val> = x.iter().map(|v| v.map(|_| None, C::ln)).collect();
                if name == "lg" {
                    let ten = Val::float(C::real(10f64.ln()));
                    out = combine(&out, &[ten], Val::div)?;
                }
                if let Some(b) = base {
                    let lb: Vec<Val> = b.iter().map(|v| v.map(|_| None, C::ln)).collect();
                    out = combine(&out, &lb, Val::div)?;
                }
                Ok(Item::Val(apply_power(out, power.as_ref())?))
            }
            _ => {
                if let Some(f) = trig(name) {
                    let power = self.fn_power()?;
                    let x = self.fn_arg()?;
                    let out: Vec<Val> = x.iter().map(|v| v.map(|_| None, f)).collect();
                    return Ok(Item::Val(apply_power(out, power.as_ref())?));
                }
                if matches!(
                    name,
                    "overline"
                        | "bar"
                        | "hat"
                        | "vec"
                        | "tilde"
                        | "widehat"
                        | "underline"
                        | "mathbb"
                        | "mathcal"
                        | "mathfrak"
                        | "mathscr"
                        | "overrightarrow"
                        | "arc"
                        | "widearc"
                ) {
                    return self.arg(); // a decorated symbol is its base
                }
                if GREEK.contains(&name) {
                    return one(self.bound(name).unwrap_or_else(|| Val::var(fnv(name))));
                }
                if matches!(name, "angle" | "measuredangle" | "triangle") {
                    // `\angle ABC`: a name, multiplied with the points that follow
                    return one(Val::var(fnv(name)));
                }
                Err(())
            }
        }
    }

    /// `\sin^2 x`: the power written right after a function name.
    fn fn_power(&mut self) -> Res<Option<Vec<Val>>> {
        if self.eat(&Tok::P('^')) {
            Ok(Some(one_val(self.arg()?)?))
        } else {
            Ok(None)
        }
    }
}

/// `(-\infty, \infty)`.
fn real_line() -> Item {
    let inf = |s: f64| Box::new(Item::Val(vec![Val::float(C::real(s * f64::INFINITY))]));
    Item::Interval {
        lo: inf(-1.0),
        hi: inf(1.0),
        lo_closed: false,
        hi_closed: false,
    }
}

fn apply_power(vals: Vec<Val>, power: Option<&Vec<Val>>) -> Res<Vec<Val>> {
    match power {
        None => Ok(vals),
        Some(p) => combine(&vals, p, Val::pow),
    }
}

pub const GREEK: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
    "ell",
];

fn trig(name: &str) -> Option<fn(C) -> C> {
    Some(match name {
        "sin" => C::sin,
        "cos" => C::cos,
        "tan" => |z: C| z.sin().div(z.cos()),
        "cot" => |z: C| z.cos().div(z.sin()),
        "sec" => |z: C| C::ONE.div(z.cos()),
        "csc" => |z: C| C::ONE.div(z.sin()),
        "arcsin" => |z: C| z.real_fn(f64::asin),
        "arccos" => |z: C| z.real_fn(f64::acos),
        "arctan" => |z: C| z.real_fn(f64::atan),
        "sinh" => |z: C| z.real_fn(f64::sinh),
        "cosh" => |z: C| z.real_fn(f64::cosh),
        "tanh" => |z: C| z.real_fn(f64::tanh),
        _ => return None,
    })
}

/// `x^(1/n)`, real for a negative x and odd n (`\sqrt[3]{-8}` = −2).
fn real_root(x: &Val, inv: &Val) -> Val {
    let r = x.pow(inv);
    if r.exact.is_some() || x.vars {
        return r;
    }
    let (z, e) = (x.s[0], inv.s[0]);
    if z.im == 0.0 && z.re < 0.0 && e.im == 0.0 && e.re != 0.0 {
        let n = 1.0 / e.re;
        if (n.round() - n).abs() < 1e-12 && (n.round() as i64) % 2 != 0 {
            return Val::float(C::real(-(-z.re).powf(e.re)));
        }
    }
    r
}

fn factorial(v: &Val) -> Val {
    if let Some(r) = v.exact.as_ref().and_then(Exact::as_rat) {
        if r.is_int() && (0..=33).contains(&r.num) {
            let mut acc: i128 = 1;
            for k in 2..=r.num {
                acc *= k;
            }
            return Val::exact(Exact::rat(Rat::int(acc)));
        }
        if r.is_int() && r.num > 33 {
            return opaque(&format!("{}!", r.num)); // `\frac{1}{2004!}`
        }
    }
    Val::float(C::NAN)
}

/// `x` rounded to 10 significant digits, as bits (to name a value by its samples).
fn quantize(x: f64) -> u64 {
    if !x.is_finite() || x == 0.0 {
        return x.to_bits();
    }
    let e = x.abs().log10().floor();
    let m = (x / 10f64.powf(e - 9.0)).round();
    m.to_bits() ^ (e as i64 as u64).rotate_left(32)
}

/// A number too large (or small) for both the exact field and `f64`, such as `2^{4950}` or
/// `2004!`: a value of its own, named by how it was written in exact terms, so that it equals
/// itself and nothing else (an overflow to ∞ would equal every other overflow).
fn opaque(name: &str) -> Val {
    Val::var(fnv(name) ^ 0x6f70_6171_7565_2121)
}

/// `b^e`, with an exact base and exponent whose power leaves `f64` kept apart ([`opaque`]).
fn big_pow(b: &Val, e: &Val) -> Val {
    let r = b.pow(e);
    let z = r.s[0];
    let lost = !z.is_finite() || (z.re == 0.0 && z.im == 0.0);
    match (&b.exact, &e.exact) {
        // an exact power past the exact field is kept apart even when `f64` holds it:
        // `2^{200}` ≠ `2^{200} + 1`, which `f64` cannot tell apart
        (Some(x), Some(y))
            if r.exact.is_none() && (lost || is_int(x) && is_int(y)) && !x.0.is_empty() =>
        {
            opaque(&format!("{x:?}^{y:?}"))
        }
        _ => r,
    }
}

fn is_int(e: &Exact) -> bool {
    e.as_rat().is_some_and(Rat::is_int)
}

fn binom(n: &Val, k: &Val) -> Val {
    let as_int = |v: &Val| {
        v.exact
            .as_ref()
            .and_then(Exact::as_rat)
            .filter(|r| r.is_int())
            .map(|r| r.num)
    };
    if let (Some(n), Some(k)) = (as_int(n), as_int(k)) {
        if (0..=n).contains(&k) && n <= 120 {
            let mut acc: i128 = 1;
            for j in 0..k.min(n - k) {
                acc = match acc.checked_mul(n - j) {
                    Some(x) => x / (j + 1),
                    None => return Val::float(C::NAN),
                };
            }
            return Val::exact(Exact::rat(Rat::int(acc)));
        }
    }
    Val::float(C::NAN)
}

/// `|x|`: exact for rationals, else on the samples.
fn abs_val(v: &Val) -> Val {
    if let Some(r) = v.exact.as_ref().and_then(Exact::as_rat) {
        return Val::exact(Exact::rat(Rat {
            num: r.num.saturating_abs(),
            den: r.den,
        }));
    }
    let mut a = v.map(|_| None, |z| C::real(z.abs()));
    a.vars = v.vars;
    a
}

/// Whether the tokens of a relation side are one variable: `x`, `\\theta`, `x_1`, `x_{12}`, or a
/// function of variables `f(x)`, `f(x, y)` (not `e` or `i`, which are numbers).
fn lone_var_tokens(toks: &[Tok]) -> bool {
    let var = |t: &Tok| match t {
        Tok::Letter(c) => *c != 'e' && *c != 'i',
        Tok::Cmd(c) => GREEK.contains(&c.as_str()),
        _ => false,
    };
    match toks {
        [v] => var(v),
        [v, Tok::P('_'), Tok::Num { .. } | Tok::Letter(_)] => var(v),
        [v, Tok::P('_'), Tok::P('{'), inner @ .., Tok::P('}')] => {
            var(v)
                && inner.len() <= 4
                && inner
                    .iter()
                    .all(|t| matches!(t, Tok::Num { .. } | Tok::Letter(_)))
        }
        [v, Tok::P('('), args @ .., Tok::P(')')] => {
            var(v)
                && !args.is_empty()
                && args.iter().enumerate().all(|(k, t)| {
                    if k % 2 == 0 {
                        var(t)
                    } else {
                        *t == Tok::P(',')
                    }
                })
                && args.len() % 2 == 1
        }
        _ => false,
    }
}
