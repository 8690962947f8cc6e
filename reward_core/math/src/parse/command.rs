//! Commands (`\\frac`, `\\sqrt`, functions, `\\binom`) and big operators (`\\sum`, `\\prod`).

use crate::num::{Exact, Rat, Val, C};
use crate::types::{Item, Res, Tok, GREEK};

use super::value::{
    apply_power, binom, combine, fnv, konst, one_val, quantize, real_line, real_root, trig,
};
use super::{Parser, MAX_SUMMED};

impl Parser<'_> {
    /// `\sum_{k=a}^{b} body` / `\prod`: the body is the product after the limits. Integer limits
    /// (at most [`MAX_SUMMED`] terms, within [`WORK_BUDGET`]) are evaluated term by term, reading
    /// the body again with `k` bound to each value; otherwise the sum is a value named by its
    /// limits and its body, evaluated with `k` as a variable of its own (so `\sum_{i=1}^n 3i` =
    /// `\sum_{k=1}^{n} k \cdot 3`).
    pub(super) fn big_op(&mut self, sum: bool) -> Res<Item> {
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
    pub(super) fn big_op_terms(
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
    pub(super) fn eat_letter_arg(&mut self, c: char) -> bool {
        let hit = self.pending.is_none()
            && self.toks.get(self.pos..self.pos + 3)
                == Some(&[Tok::P('{'), Tok::Letter(c), Tok::P('}')][..]);
        if hit {
            self.pos += 3;
        }
        hit
    }

    /// The value bound to an index variable `name`, if one is.
    pub(super) fn bound(&self, name: &str) -> Option<Val> {
        if self.binds.is_empty() {
            return None;
        }
        self.binds
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
    }

    pub(super) fn command(&mut self, name: &str) -> Res<Item> {
        let one = |v: Val| Ok(Item::Val(vec![v]));
        match name {
            "frac" => {
                let a = one_val(self.arg()?)?;
                let b = one_val(self.arg()?)?;
                Ok(Item::Val(combine(&a, &b, Val::div)?))
            }
            "sqrt" => self.sqrt(),
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
            "log" | "ln" | "lg" => self.log(name),
            _ => self.named(name),
        }
    }

    /// `\sqrt{x}`, `\sqrt[n]{x}`.
    fn sqrt(&mut self) -> Res<Item> {
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
                let inv = combine(&[Val::exact(Exact::rat(Rat::ONE))], &n, Val::div)?;
                Ok(Item::Val(combine(&x, &inv, real_root)?))
            }
        }
    }

    /// `\log_b x`, `\ln x`, `\lg x`, with a power (`\log^2 x`).
    fn log(&mut self, name: &str) -> Res<Item> {
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

    /// Any other command: a trigonometric function, a decorated symbol, a Greek letter, an angle.
    fn named(&mut self, name: &str) -> Res<Item> {
        let one = |v: Val| Ok(Item::Val(vec![v]));
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
