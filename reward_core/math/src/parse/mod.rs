//! Tokens → answer structure, evaluating arithmetic as it goes (see `num`).
//!
//! Recursive descent with an explicit nesting limit ([`MAX_DEPTH`]): a deeper answer is an error
//! (the caller then judges by text), so no input can exhaust the stack. Every token is consumed at
//! most once (no backtracking), and ± expansion and collection sizes are capped, so the work is
//! linear in the input.

use crate::num::Val;
use crate::reading::{group_labelled, label_tokens, reading, Label};
use crate::types::{Clock, Item, Rel, Res, Tok, MAX_ITEMS};

mod command;
mod expr;
mod primary;
mod value;

use value::{lone_var_tokens, one_val};

/// Deepest nesting of groups/arguments accepted.
pub const MAX_DEPTH: usize = 48;
/// Most values a ± expression expands to.
const MAX_BRANCHES: usize = 8;
/// Most terms of a sum, and factors of a product: no answer is longer (past it, only the text
/// can make an answer equal).
const MAX_TERMS: usize = 4096;
/// Most terms of a `\sum` / `\prod` evaluated one by one.
const MAX_SUMMED: usize = 1000;
/// Most work beyond one pass, in one answer: tokens read again to evaluate sums term by term,
/// and cell operations of matrix arithmetic.
const WORK_BUDGET: usize = 1 << 12;

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
                .unwrap_or_else(|()| Item::Text(crate::lex::render(written)));
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
}
