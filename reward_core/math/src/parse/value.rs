//! Values the parser builds: numbers as written, combinations of ± branches, functions, powers
//! and factorials kept exact where they can be.

use crate::num::{Exact, Rat, Val, C};
use crate::types::{Item, Res, Tok, GREEK};

use super::MAX_BRANCHES;

pub(super) fn fnv(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    h
}

pub(super) fn num_val(int: &str, frac: &str, point: bool) -> Val {
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

pub(super) fn konst(z: C) -> Val {
    Val::float(z)
}

pub(super) fn one_val(item: Item) -> Res<Vec<Val>> {
    match item {
        Item::Val(v) => Ok(v),
        _ => Err(()),
    }
}

/// Cartesian combination of two multi-values, capped.
/// `acc = combine(acc, b, f)`, in place for single values (the common case: no allocation).
pub(super) fn combine_into(
    acc: &mut Vec<Val>,
    b: &[Val],
    f: impl Fn(&Val, &Val) -> Val,
) -> Res<()> {
    if let ([x], [y]) = (acc.as_mut_slice(), b) {
        *x = f(x, y);
        return Ok(());
    }
    *acc = combine(acc, b, f)?;
    Ok(())
}

pub(super) fn combine(a: &[Val], b: &[Val], f: impl Fn(&Val, &Val) -> Val) -> Res<Vec<Val>> {
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

/// `(-\infty, \infty)`.
pub(super) fn real_line() -> Item {
    let inf = |s: f64| Box::new(Item::Val(vec![Val::float(C::real(s * f64::INFINITY))]));
    Item::Interval {
        lo: inf(-1.0),
        hi: inf(1.0),
        lo_closed: false,
        hi_closed: false,
    }
}

pub(super) fn apply_power(vals: Vec<Val>, power: Option<&Vec<Val>>) -> Res<Vec<Val>> {
    match power {
        None => Ok(vals),
        Some(p) => combine(&vals, p, Val::pow),
    }
}

pub(super) fn trig(name: &str) -> Option<fn(C) -> C> {
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
pub(super) fn real_root(x: &Val, inv: &Val) -> Val {
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

pub(super) fn factorial(v: &Val) -> Val {
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
pub(super) fn quantize(x: f64) -> u64 {
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
pub(super) fn opaque(name: &str) -> Val {
    Val::var(fnv(name) ^ 0x6f70_6171_7565_2121)
}

/// `b^e`, with an exact base and exponent whose power leaves `f64` kept apart ([`opaque`]).
pub(super) fn big_pow(b: &Val, e: &Val) -> Val {
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

pub(super) fn is_int(e: &Exact) -> bool {
    e.as_rat().is_some_and(Rat::is_int)
}

pub(super) fn binom(n: &Val, k: &Val) -> Val {
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
pub(super) fn abs_val(v: &Val) -> Val {
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
pub(super) fn lone_var_tokens(toks: &[Tok]) -> bool {
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
