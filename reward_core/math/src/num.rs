//! Numbers of the verifier: exact values in Q(√d) (i is √-1) and complex floating-point samples.
//!
//! Every expression is evaluated twice at once: exactly, as a sum of rational multiples of square
//! roots of square-free integers (None as soon as an operation leaves that field or an `i128`
//! overflows), and in complex `f64` at [`K`] sample points (each variable gets a fixed value per
//! point). Two values are equal when their exact forms are equal, or, when either has none, when
//! every sample agrees within [`REL_TOL`] (relative) / [`ABS_TOL`] (absolute).

use std::cmp::Ordering;

/// Number of sample points at which expressions with variables are evaluated.
pub const K: usize = 3;
/// Relative tolerance of the floating-point comparison (values with no exact form).
pub const REL_TOL: f64 = 1e-9;
/// Absolute tolerance of the floating-point comparison (so `\sin\pi` = 0).
pub const ABS_TOL: f64 = 1e-12;
/// Most terms an exact value may have before it is given up (keeps products bounded).
const MAX_TERMS: usize = 16;

/// A complex number.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct C {
    pub re: f64,
    pub im: f64,
}

impl C {
    pub const ZERO: C = C { re: 0.0, im: 0.0 };
    pub const ONE: C = C { re: 1.0, im: 0.0 };
    pub const NAN: C = C {
        re: f64::NAN,
        im: f64::NAN,
    };

    pub fn real(re: f64) -> C {
        C { re, im: 0.0 }
    }
    pub fn add(self, o: C) -> C {
        C {
            re: self.re + o.re,
            im: self.im + o.im,
        }
    }
    pub fn sub(self, o: C) -> C {
        C {
            re: self.re - o.re,
            im: self.im - o.im,
        }
    }
    pub fn neg(self) -> C {
        C {
            re: -self.re,
            im: -self.im,
        }
    }
    pub fn mul(self, o: C) -> C {
        if self.im == 0.0 && o.im == 0.0 {
            return C::real(self.re * o.re); // keeps ±inf real
        }
        C {
            re: self.re * o.re - self.im * o.im,
            im: self.re * o.im + self.im * o.re,
        }
    }
    pub fn div(self, o: C) -> C {
        if o.im == 0.0 {
            return C {
                re: self.re / o.re,
                im: if self.im == 0.0 { 0.0 } else { self.im / o.re },
            };
        }
        let d = o.re * o.re + o.im * o.im;
        C {
            re: (self.re * o.re + self.im * o.im) / d,
            im: (self.im * o.re - self.re * o.im) / d,
        }
    }
    pub fn abs(self) -> f64 {
        self.re.hypot(self.im)
    }
    pub fn is_finite(self) -> bool {
        self.re.is_finite() && self.im.is_finite()
    }
    pub fn exp(self) -> C {
        let r = self.re.exp();
        if self.im == 0.0 {
            return C::real(r);
        }
        C {
            re: r * self.im.cos(),
            im: r * self.im.sin(),
        }
    }
    pub fn ln(self) -> C {
        if self.im == 0.0 && self.re > 0.0 {
            return C::real(self.re.ln());
        }
        C {
            re: self.abs().ln(),
            im: self.im.atan2(self.re),
        }
    }
    pub fn sqrt(self) -> C {
        if self.im == 0.0 {
            return if self.re >= 0.0 {
                C::real(self.re.sqrt())
            } else {
                C {
                    re: 0.0,
                    im: (-self.re).sqrt(),
                }
            };
        }
        let r = self.abs();
        let re = ((r + self.re) / 2.0).sqrt();
        let im = ((r - self.re) / 2.0).sqrt().copysign(self.im);
        C { re, im }
    }
    pub fn powi(self, n: i64) -> C {
        let mut base = if n < 0 { C::ONE.div(self) } else { self };
        let mut e = n.unsigned_abs();
        let mut acc = C::ONE;
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.mul(base);
            }
            base = base.mul(base);
            e >>= 1;
        }
        acc
    }
    pub fn pow(self, b: C) -> C {
        if b.im == 0.0 && b.re.fract() == 0.0 && b.re.abs() <= 4096.0 {
            return self.powi(b.re as i64);
        }
        if self.im == 0.0 && b.im == 0.0 && self.re >= 0.0 {
            return C::real(self.re.powf(b.re));
        }
        if self.re == 0.0 && self.im == 0.0 {
            return if b.re > 0.0 { C::ZERO } else { C::NAN };
        }
        b.mul(self.ln()).exp()
    }
    pub fn sin(self) -> C {
        C {
            re: self.re.sin() * self.im.cosh(),
            im: self.re.cos() * self.im.sinh(),
        }
    }
    pub fn cos(self) -> C {
        C {
            re: self.re.cos() * self.im.cosh(),
            im: -(self.re.sin() * self.im.sinh()),
        }
    }
    /// Real-only functions (inverse trig, hyperbolic): NaN off the real line.
    pub fn real_fn(self, f: fn(f64) -> f64) -> C {
        if self.im == 0.0 {
            C::real(f(self.re))
        } else {
            C::NAN
        }
    }
}

/// Whether two samples are equal within the stated tolerances (infinities equal when identical).
pub fn close(a: C, b: C) -> bool {
    if !a.is_finite() || !b.is_finite() {
        return a.re == b.re && a.im == b.im && !a.re.is_nan() && !a.im.is_nan();
    }
    let d = a.sub(b).abs();
    d <= REL_TOL * a.abs().max(b.abs()) + ABS_TOL
}

fn gcd(mut a: u128, mut b: u128) -> u128 {
    // 64-bit division is several times faster than 128-bit: use it when both fit.
    if let (Ok(x), Ok(y)) = (u64::try_from(a), u64::try_from(b)) {
        let (mut x, mut y) = (x, y);
        while y != 0 {
            (x, y) = (y, x % y);
        }
        return u128::from(x);
    }
    while b != 0 {
        (a, b) = (b, a % b);
    }
    a
}

/// A reduced fraction (den > 0).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rat {
    pub num: i128,
    pub den: i128,
}

impl Rat {
    pub const ZERO: Rat = Rat { num: 0, den: 1 };
    pub const ONE: Rat = Rat { num: 1, den: 1 };

    pub fn new(num: i128, den: i128) -> Option<Rat> {
        if den == 0 {
            return None;
        }
        if den == 1 {
            return Some(Rat { num, den });
        }
        let g = gcd(num.unsigned_abs(), den.unsigned_abs());
        let g = i128::try_from(g).ok()?;
        let (mut n, mut d) = (num / g, den / g);
        if d < 0 {
            n = n.checked_neg()?;
            d = d.checked_neg()?;
        }
        Some(Rat { num: n, den: d })
    }
    pub fn int(n: i128) -> Rat {
        Rat { num: n, den: 1 }
    }
    pub fn add(self, o: Rat) -> Option<Rat> {
        if self.den == 1 && o.den == 1 {
            return Some(Rat::int(self.num.checked_add(o.num)?));
        }
        let g = i128::try_from(gcd(self.den.unsigned_abs(), o.den.unsigned_abs())).ok()?;
        let l = (self.den / g).checked_mul(o.den)?;
        let a = self.num.checked_mul(l / self.den)?;
        let b = o.num.checked_mul(l / o.den)?;
        Rat::new(a.checked_add(b)?, l)
    }
    pub fn neg(self) -> Option<Rat> {
        Some(Rat {
            num: self.num.checked_neg()?,
            den: self.den,
        })
    }
    pub fn mul(self, o: Rat) -> Option<Rat> {
        if self.den == 1 && o.den == 1 {
            return Some(Rat::int(self.num.checked_mul(o.num)?)); // integers: no gcd
        }
        let g1 = i128::try_from(gcd(self.num.unsigned_abs(), o.den.unsigned_abs()))
            .ok()?
            .max(1);
        let g2 = i128::try_from(gcd(o.num.unsigned_abs(), self.den.unsigned_abs()))
            .ok()?
            .max(1);
        Rat::new(
            (self.num / g1).checked_mul(o.num / g2)?,
            (self.den / g2).checked_mul(o.den / g1)?,
        )
    }
    pub fn recip(self) -> Option<Rat> {
        Rat::new(self.den, self.num)
    }
    pub fn to_f64(self) -> f64 {
        // i64 → f64 is one instruction; i128 → f64 a library call.
        let f = |x: i128| i64::try_from(x).map_or(x as f64, |v| v as f64);
        if self.den == 1 {
            f(self.num)
        } else {
            f(self.num) / f(self.den)
        }
    }
    pub fn is_int(self) -> bool {
        self.den == 1
    }
}

/// `n = s² · t` with `t` square-free: `(s, t)`; None if `n` cannot be factored cheaply.
fn square_free(n: i128) -> Option<(i128, i128)> {
    if n == 0 {
        return Some((0, 1));
    }
    let sign = n.signum();
    let mut m = n.unsigned_abs();
    let mut s: u128 = 1;
    let mut t: u128 = 1;
    let mut d: u128 = 2;
    while d <= 1000 && d * d <= m {
        let mut e = 0;
        while m % d == 0 {
            m /= d;
            e += 1;
        }
        for _ in 0..e / 2 {
            s = s.checked_mul(d)?;
        }
        if e % 2 == 1 {
            t *= d;
        }
        d += if d == 2 { 1 } else { 2 };
    }
    if m > 1 {
        // m has no prime factor ≤ 1000: it is p, p·q or p² when below 1000³.
        let r = isqrt(m);
        if r * r == m {
            s = s.checked_mul(r)?;
        } else if m < 1_000_000_000 {
            t = t.checked_mul(m)?;
        } else {
            return None;
        }
    }
    Some((i128::try_from(s).ok()?, i128::try_from(t).ok()? * sign))
}

fn isqrt(n: u128) -> u128 {
    if n < 2 {
        return n;
    }
    let mut x = (n as f64).sqrt() as u128;
    while x * x > n {
        x -= 1;
    }
    while (x + 1) * (x + 1) <= n {
        x += 1;
    }
    x
}

/// An exact value: Σ coeff·√rad, rad square-free (negative rad: i·√|rad|), sorted, no zero coeff.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exact(pub Vec<(Rat, i128)>);

impl Exact {
    pub fn rat(r: Rat) -> Exact {
        if r.num == 0 {
            Exact(Vec::new())
        } else {
            Exact(vec![(r, 1)])
        }
    }
    pub fn i() -> Exact {
        Exact(vec![(Rat::ONE, -1)])
    }
    pub fn as_rat(&self) -> Option<Rat> {
        match self.0.as_slice() {
            [] => Some(Rat::ZERO),
            [(c, 1)] => Some(*c),
            _ => None,
        }
    }
    fn push(terms: &mut Vec<(Rat, i128)>, c: Rat, r: i128) -> Option<()> {
        match terms.binary_search_by(|t| t.1.cmp(&r)) {
            Ok(i) => {
                let s = terms[i].0.add(c)?;
                if s.num == 0 {
                    terms.remove(i);
                } else {
                    terms[i].0 = s;
                }
            }
            Err(i) => {
                if c.num != 0 {
                    terms.insert(i, (c, r));
                }
            }
        }
        (terms.len() <= MAX_TERMS).then_some(())
    }
    pub fn add(&self, o: &Exact) -> Option<Exact> {
        // Rationals (the common case) without the merge.
        if let ([(a, 1)], [(b, 1)]) = (self.0.as_slice(), o.0.as_slice()) {
            return Some(Exact::rat(a.add(*b)?));
        }
        let mut t = self.0.clone();
        for &(c, r) in &o.0 {
            Self::push(&mut t, c, r)?;
        }
        Some(Exact(t))
    }
    pub fn neg(&self) -> Option<Exact> {
        let t: Option<Vec<_>> = self.0.iter().map(|&(c, r)| Some((c.neg()?, r))).collect();
        Some(Exact(t?))
    }
    pub fn mul(&self, o: &Exact) -> Option<Exact> {
        let mut t = Vec::new();
        for &(c1, r1) in &self.0 {
            for &(c2, r2) in &o.0 {
                // √r1·√r2 = g·√((r1/g)(r2/g)), g = gcd; two negatives give a factor −1.
                let g = i128::try_from(gcd(r1.unsigned_abs(), r2.unsigned_abs())).ok()?;
                let mut c = c1.mul(c2)?.mul(Rat::int(g))?;
                if r1 < 0 && r2 < 0 {
                    c = c.neg()?;
                }
                let rad = (r1.abs() / g).checked_mul(r2.abs() / g)?;
                let rad = if (r1 < 0) == (r2 < 0) { rad } else { -rad };
                Self::push(&mut t, c, rad)?;
            }
        }
        Some(Exact(t))
    }
    pub fn recip(&self) -> Option<Exact> {
        match self.0.as_slice() {
            // 1/(c√r) = √r / (c·r)
            [(c, r)] => Some(Exact(vec![(c.mul(Rat::int(*r))?.recip()?, *r)])),
            // 1/(a√r + b√s) = (a√r − b√s) / (a²r − b²s)
            [(a, r), (b, s)] => {
                let den = a
                    .mul(*a)?
                    .mul(Rat::int(*r))?
                    .add(b.mul(*b)?.mul(Rat::int(*s))?.neg()?)?;
                let k = den.recip()?;
                let mut t = Vec::new();
                Self::push(&mut t, a.mul(k)?, *r)?;
                Self::push(&mut t, b.mul(k)?.neg()?, *s)?;
                Some(Exact(t))
            }
            _ => None,
        }
    }
    pub fn powi(&self, n: i64) -> Option<Exact> {
        if n.unsigned_abs() > 256 {
            return None;
        }
        let mut base = if n < 0 { self.recip()? } else { self.clone() };
        let mut e = n.unsigned_abs();
        let mut acc = Exact::rat(Rat::ONE);
        while e > 0 {
            if e & 1 == 1 {
                acc = acc.mul(&base)?;
            }
            e >>= 1;
            if e > 0 {
                base = base.mul(&base)?;
            }
        }
        Some(acc)
    }
    /// √ of a rational: √(p/q) = √(p·q)/q.
    pub fn sqrt(&self) -> Option<Exact> {
        let r = self.as_rat()?;
        let (s, t) = square_free(r.num.checked_mul(r.den)?)?;
        let c = Rat::new(s, r.den)?;
        Some(if s == 0 {
            Exact(Vec::new())
        } else {
            Exact(vec![(c, t)])
        })
    }
    pub fn to_c(&self) -> C {
        let mut z = C::ZERO;
        for &(c, r) in &self.0 {
            let root = if r < 0 {
                C {
                    re: 0.0,
                    im: (r.unsigned_abs() as f64).sqrt(),
                }
            } else {
                C::real((r as f64).sqrt())
            };
            z = z.add(C::real(c.to_f64()).mul(root));
        }
        z
    }
}

/// A value: exact form (if any) and samples, with what the comparison rules need to know.
#[derive(Debug, Clone, PartialEq)]
pub struct Val {
    pub exact: Option<Exact>,
    pub s: [C; K],
    /// Depends on a variable.
    pub vars: bool,
    /// A bare decimal literal: the number of digits written after the point.
    pub dec: Option<u32>,
    /// Written as a percentage `x\%` (the value is x/100; x itself also matches).
    pub pct: bool,
}

impl Val {
    pub fn exact(e: Exact) -> Val {
        let z = e.to_c();
        Val {
            exact: Some(e),
            s: [z; K],
            vars: false,
            dec: None,
            pct: false,
        }
    }
    pub fn float(z: C) -> Val {
        Val {
            exact: None,
            s: [z; K],
            vars: false,
            dec: None,
            pct: false,
        }
    }
    /// A variable: fixed, distinct, irrational-looking values per sample point.
    pub fn var(id: u64) -> Val {
        let mut s = [C::ZERO; K];
        for (k, z) in s.iter_mut().enumerate() {
            let h = (id.wrapping_mul(0x9E37_79B9_7F4A_7C15)
                ^ (k as u64 + 1).wrapping_mul(0xBF58_476D_1CE4_E5B9))
            .wrapping_mul(0x94D0_49BB_1331_11EB);
            *z = C::real(0.35 + (h >> 11) as f64 / (1u64 << 53) as f64 * 1.9);
        }
        Val {
            exact: None,
            s,
            vars: true,
            dec: None,
            pct: false,
        }
    }
    fn bin(
        &self,
        o: &Val,
        fe: impl Fn(&Exact, &Exact) -> Option<Exact>,
        fc: impl Fn(C, C) -> C,
    ) -> Val {
        let exact = match (&self.exact, &o.exact) {
            (Some(a), Some(b)) => fe(a, b),
            _ => None,
        };
        let mut s = [C::ZERO; K];
        for k in 0..K {
            s[k] = fc(self.s[k], o.s[k]);
        }
        let mut v = Val {
            exact,
            s,
            vars: self.vars || o.vars,
            dec: None,
            pct: false,
        };
        v.fix();
        v
    }
    /// Keep the samples of an exact value exact (no drift from the float path).
    fn fix(&mut self) {
        if let Some(e) = &self.exact {
            self.s = [e.to_c(); K];
        }
    }
    pub fn add(&self, o: &Val) -> Val {
        self.bin(o, Exact::add, C::add)
    }
    pub fn sub(&self, o: &Val) -> Val {
        self.bin(o, |a, b| a.add(&b.neg()?), C::sub)
    }
    pub fn mul(&self, o: &Val) -> Val {
        self.bin(o, Exact::mul, C::mul)
    }
    pub fn div(&self, o: &Val) -> Val {
        self.bin(o, |a, b| a.mul(&b.recip()?), C::div)
    }
    pub fn neg(&self) -> Val {
        let mut v = self.map(Exact::neg, C::neg);
        v.dec = self.dec;
        v
    }
    pub fn map(&self, fe: impl Fn(&Exact) -> Option<Exact>, fc: impl Fn(C) -> C) -> Val {
        let mut v = Val {
            exact: self.exact.as_ref().and_then(fe),
            s: self.s.map(fc),
            vars: self.vars,
            dec: None,
            pct: false,
        };
        v.fix();
        v
    }
    pub fn pow(&self, e: &Val) -> Val {
        let exact = match (&self.exact, e.exact.as_ref().and_then(Exact::as_rat)) {
            (Some(b), Some(r)) if r.is_int() => i64::try_from(r.num).ok().and_then(|n| b.powi(n)),
            (Some(b), Some(r)) if r.den == 2 => {
                i64::try_from(r.num).ok().and_then(|n| b.sqrt()?.powi(n))
            }
            _ => None,
        };
        let mut s = [C::ZERO; K];
        for k in 0..K {
            s[k] = self.s[k].pow(e.s[k]);
        }
        let mut v = Val {
            exact,
            s,
            vars: self.vars || e.vars,
            dec: None,
            pct: false,
        };
        v.fix();
        v
    }
    pub fn is_infinite(&self) -> bool {
        self.s[0].re.is_infinite()
    }
}

fn round_to(x: f64, places: u32) -> f64 {
    let p = 10f64.powi(places as i32);
    (x * p).round() / p
}

/// `a == b` under the value rules (see the module docs of `math`).
pub fn val_eq(a: &Val, b: &Val) -> bool {
    if a.pct || b.pct {
        let hundred = Val::exact(Exact::rat(Rat::int(100)));
        let (p, q) = if a.pct { (a, b) } else { (b, a) };
        let mut whole = p.mul(&hundred);
        whole.dec = p.dec;
        let mut plain = p.clone();
        plain.pct = false;
        let mut q = q.clone();
        q.pct = false;
        return val_eq(&plain, &q) || val_eq(&whole, &q);
    }
    if let (Some(x), Some(y)) = (&a.exact, &b.exact) {
        if x == y {
            return true;
        }
        if a.dec.is_none() && b.dec.is_none() {
            return false;
        }
    }
    if a.vars != b.vars {
        return false;
    }
    // A written decimal against a value: equal when the value, rounded to the decimal's own
    // places (at least 6), is that decimal (so 0.333333 = 1/3 but 0.33 ≠ 1/3).
    if let Some(places) = match (a.dec, b.dec) {
        (Some(p), None) | (None, Some(p)) => Some(p.max(6)),
        _ => None,
    } {
        let (x, y) = (a.s[0], b.s[0]);
        if x.im.abs() > ABS_TOL || y.im.abs() > ABS_TOL || !x.is_finite() || !y.is_finite() {
            return false;
        }
        return round_to(x.re, places) == round_to(y.re, places);
    }
    a.s.iter().zip(&b.s).all(|(&x, &y)| close(x, y))
}

/// Whether `a = c·b` for one constant `c ≠ 0` (positive when `positive`) at every sample.
pub fn proportional(a: &Val, b: &Val, positive: bool) -> bool {
    let zero_a = a.s.iter().all(|z| z.abs() <= ABS_TOL);
    let zero_b = b.s.iter().all(|z| z.abs() <= ABS_TOL);
    if zero_a || zero_b {
        return zero_a && zero_b;
    }
    let r0 = a.s[0].div(b.s[0]);
    if !r0.is_finite()
        || r0.abs() <= ABS_TOL
        || (positive && (r0.re <= 0.0 || r0.im.abs() > ABS_TOL))
    {
        return false;
    }
    a.s.iter().zip(&b.s).all(|(&x, &y)| close(x, r0.mul(y)))
}

/// A total order on values for sorting set elements (by first sample).
pub fn order(a: &Val, b: &Val) -> Ordering {
    let (x, y) = (a.s[0], b.s[0]);
    x.re.total_cmp(&y.re).then(x.im.total_cmp(&y.im))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(n: i128, d: i128) -> Exact {
        Exact::rat(Rat::new(n, d).unwrap())
    }

    #[test]
    fn radicals_are_exact() {
        let s12 = q(12, 1).sqrt().unwrap();
        let two_s3 = q(2, 1).mul(&q(3, 1).sqrt().unwrap()).unwrap();
        assert_eq!(s12, two_s3);
        // (1+√2)(1−√2) = −1
        let r2 = q(2, 1).sqrt().unwrap();
        let a = q(1, 1).add(&r2).unwrap();
        let b = q(1, 1).add(&r2.neg().unwrap()).unwrap();
        assert_eq!(a.mul(&b).unwrap(), q(-1, 1));
        // 1/(1+√2) = √2 − 1
        assert_eq!(a.recip().unwrap(), r2.add(&q(-1, 1)).unwrap());
        // i·i = −1, √−4 = 2i
        assert_eq!(Exact::i().mul(&Exact::i()).unwrap(), q(-1, 1));
        assert_eq!(q(-4, 1).sqrt().unwrap(), Exact(vec![(Rat::int(2), -1)]));
    }

    #[test]
    fn overflow_gives_up_exactness() {
        assert!(q(2, 1).powi(200).is_none());
        assert_eq!(q(2, 1).powi(10).unwrap(), q(1024, 1));
    }
}
