//! Sums, products and powers: `expr` → `term` → `factor`, with ± branches, implicit
//! products (`2x`, `3\\sqrt2`) and matrix arithmetic.

use crate::matrix;
use crate::num::{Exact, Rat, Val};
use crate::types::{Item, Res, Tok};

use super::value::{big_pow, combine, combine_into, factorial, one_val};
use super::{Parser, MAX_BRANCHES, MAX_TERMS};

impl Parser<'_> {
    /// A sum: `[±] term ((+|-|±|∓) term)*`. A lone non-value term (tuple, set, text…) passes through.
    pub(super) fn expr(&mut self) -> Res<Item> {
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
    pub(super) fn charge(&mut self, cost: usize) -> Res<()> {
        self.budget = self.budget.checked_sub(cost).ok_or(())?;
        Ok(())
    }

    /// `A ± B ± …` for matrices of one shape (after an optional sign on `A`).
    pub(super) fn matrix_sum(&mut self, first: &Item, sign: Option<char>) -> Res<Item> {
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
    pub(super) fn matrix_product(&mut self, mut acc: matrix::M) -> Res<Item> {
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

    /// Whether the next token can start a factor multiplied by juxtaposition.
    pub(super) fn starts_implicit(&self) -> bool {
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
    pub(super) fn term(&mut self) -> Res<Item> {
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
    pub(super) fn factor(&mut self) -> Res<Item> {
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
}
