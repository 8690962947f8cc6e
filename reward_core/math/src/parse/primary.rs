//! Primaries: numbers, names, groups, collections, matrices, and the arguments of functions.

use crate::num::{Exact, Val, C};
use crate::types::{Item, Res, Tok, MAX_ITEMS};

use super::value::{abs_val, combine, fnv, konst, num_val, one_val};
use super::Parser;

impl<'a> Parser<'a> {
    /// The argument of `\frac`, `\sqrt`, `^`: a `{group}`, one digit of a number, or one primary.
    pub(super) fn arg(&mut self) -> Res<Item> {
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
    pub(super) fn list_until(&mut self, closers: &[Tok]) -> Res<(Vec<Item>, Tok)> {
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

    pub(super) fn primary(&mut self) -> Res<Item> {
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

    pub(super) fn subscript_text(&mut self) -> Res<String> {
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

    pub(super) fn matrix(&mut self, env: &str) -> Res<Item> {
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
    pub(super) fn fn_arg(&mut self) -> Res<Vec<Val>> {
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

    /// `\sin^2 x`: the power written right after a function name.
    pub(super) fn fn_power(&mut self) -> Res<Option<Vec<Val>>> {
        if self.eat(&Tok::P('^')) {
            Ok(Some(one_val(self.arg()?)?))
        } else {
            Ok(None)
        }
    }
}
