//! The false-positive budget: pairs that must never be equal, 100,000 of them, none let through.
//!
//! Each pair is one value and a different value in the same shape (what a policy would have to
//! write to be paid for a wrong answer that looks right): clock times, mixed numbers, intervals with
//! one end changed, sets with one element changed, equations with one coefficient changed, the gold
//! inside a longer wrong expression, and integers too large for any machine number.
//!
//! `FP_DUMP=pairs.tsv cargo test -p math_equal --test never_equal -- --ignored dump` writes a
//! sample of the pairs (gold, prediction, shape; tab-separated) for `bench/bench_math_fp.py`.

use math_equal::math_equal;
use proptest::prelude::*;
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, TestRunner};

/// Cases the property runs; every case is one pair, checked both ways.
const PAIRS: u32 = 100_000;

fn gcd(a: i64, b: i64) -> i64 {
    if b == 0 {
        a.abs()
    } else {
        gcd(b, a % b)
    }
}

/// A number as a model writes it: an integer, a fraction or a decimal.
fn num(n: i64) -> String {
    n.to_string()
}

/// Two different clock times (`h:mm`, maybe with seconds or an am/pm mark on both).
fn times() -> impl Strategy<Value = (String, String, &'static str)> {
    (1u32..=12, 0u32..60, 1u32..=12, 0u32..60, 0u8..4).prop_map(|(h, m, h2, m2, form)| {
        let (h2, m2) = if (h, m) == (h2, m2) {
            (h, (m + 1) % 60)
        } else {
            (h2, m2)
        };
        let t = |h: u32, m: u32| match form {
            0 => format!("{h}:{m:02}"),
            1 => format!("{h}:{m:02} PM"),
            2 => format!("{h}:{m:02}:00"),
            _ => format!("{h}:{m:02}\\text{{ a.m.}}"),
        };
        (t(h, m), t(h2, m2), "time")
    })
}

/// A mixed number `a b/c` against the values a misreading gives: `a`, `b/c`, `a·b/c`, another
/// whole part, another numerator.
fn mixed() -> impl Strategy<Value = (String, String, &'static str)> {
    (
        1i64..40,
        2i64..13,
        any::<prop::sample::Index>(),
        0u8..6,
        any::<bool>(),
    )
        .prop_map(|(a, c, at, wrong, latex)| {
            // a proper fraction in lowest terms
            let coprime: Vec<i64> = (1..c).filter(|b| gcd(*b, c) == 1).collect();
            let b = coprime[at.index(coprime.len())];
            let gold = if latex {
                format!("{a}\\frac{{{b}}}{{{c}}}")
            } else {
                format!("{a} {b}/{c}")
            };
            let (n, d) = match wrong {
                0 => (a, 1),
                1 => (b, c),
                2 => (a * b, c),
                3 => ((a + 1) * c + b, c),
                4 => (a * c + b + 1, c),
                _ => (a * c - b, c), // `-(a - b/c)` misread as `a - b/c`
            };
            // a misreading that gives a + b/c after all (`a·b/c` can) is another wrong value
            let (n, d) = if n * c == (a * c + b) * d {
                (n + 1, d)
            } else {
                (n, d)
            };
            let pred = match wrong {
                3 if !latex => format!("{} {b}/{c}", a + 1),
                4 if !latex => format!("{a} {}/{c}", b + 1),
                _ if d == 1 => num(n),
                _ => format!("\\frac{{{n}}}{{{d}}}"),
            };
            (gold, pred, "mixed")
        })
}

/// An interval and the same interval with one end moved (`[a, b)` / `a \le x < b`).
fn intervals() -> impl Strategy<Value = (String, String, &'static str)> {
    (
        -50i64..50,
        1i64..50,
        1i64..10,
        any::<bool>(),
        any::<bool>(),
        0u8..3,
    )
        .prop_map(|(a, len, d, lo_closed, hi_closed, form)| {
            let b = a + len;
            let (a2, b2) = if form == 1 { (a - d, b) } else { (a, b + d) };
            let write = |a: i64, b: i64, as_relation: bool| {
                if as_relation {
                    let op = |closed| if closed { "\\le" } else { "<" };
                    format!("{a} {} x {} {b}", op(lo_closed), op(hi_closed))
                } else {
                    let l = if lo_closed { '[' } else { '(' };
                    let r = if hi_closed { ']' } else { ')' };
                    format!("{l}{a}, {b}{r}")
                }
            };
            (write(a, b, false), write(a2, b2, form == 2), "interval")
        })
}

/// A set and the same set with one element replaced by a value not in it.
fn sets() -> impl Strategy<Value = (String, String, &'static str)> {
    (
        prop::collection::btree_set(-30i64..30, 2..6),
        any::<prop::sample::Index>(),
        1i64..20,
        any::<bool>(),
    )
        .prop_map(|(set, at, d, braces)| {
            let items: Vec<i64> = set.iter().copied().collect();
            let k = at.index(items.len());
            let mut other = items.clone();
            let mut v = items[k] + d;
            while set.contains(&v) {
                v += 1;
            }
            other[k] = v;
            other.reverse();
            let write = |xs: &[i64]| {
                let inner = xs
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ");
                if braces {
                    format!("\\{{{inner}\\}}")
                } else {
                    inner
                }
            };
            (write(&items), write(&other), "set")
        })
}

/// An equation and the same equation with one coefficient changed.
fn equations() -> impl Strategy<Value = (String, String, &'static str)> {
    (
        prop::array::uniform3(1i64..12),
        -20i64..20,
        0usize..4,
        1i64..6,
        0u8..3,
    )
        .prop_map(|(coef, c, which, d, form)| {
            let k = [coef[0], coef[1], coef[2], c];
            // the coefficients the form writes: x, y, z and the constant, or x, y and the constant
            let used: &[usize] = if form == 0 { &[0, 1, 2, 3] } else { &[0, 1, 3] };
            let mut k2 = k;
            k2[used[which % used.len()]] += d;
            let write = |k: [i64; 4]| match form {
                0 => format!("{}x + {}y - {}z = {}", k[0], k[1], k[2], k[3]),
                1 => format!("y = {}x^2 + {}x + {}", k[0], k[1], k[3]),
                _ => format!("{}x - {}y = {}", k[0], k[1], k[3]),
            };
            (write(k), write(k2), "equation")
        })
}

/// The gold inside a longer wrong expression: added to, multiplied, raised, rooted, listed with
/// another value, placed in a tuple, or the right-hand side of an equation.
fn inside() -> impl Strategy<Value = (String, String, &'static str)> {
    let gold = prop_oneof![
        (2i64..999).prop_map(|n| n.to_string()),
        (1i64..30, 2i64..30).prop_map(|(p, q)| {
            let g = gcd(p, q);
            let (p, q) = (p / g, q / g);
            if q == 1 {
                format!("\\frac{{{p}}}{{{}}}", p + 1)
            } else {
                format!("\\frac{{{p}}}{{{q}}}")
            }
        }),
        (1i64..7, 0usize..6).prop_map(|(k, i)| {
            // a square-free radicand
            format!("{k}\\sqrt{{{}}}", [2, 3, 5, 6, 7, 10][i])
        }),
        (2i64..9).prop_map(|n| format!("{n}\\pi")),
    ];
    (gold, 2i64..9, 0u8..8).prop_map(|(g, k, how)| {
        let pred = match how {
            0 => format!("{g} + {k}"),
            1 => format!("{k}{g}"),
            2 => format!("{g}^{k}"),
            3 => format!("\\sqrt{{{g}}}"),
            4 => format!("{g}, {k}{g}"),
            5 => format!("({g}, {k})"),
            6 => format!("{g} x"),
            _ => format!("{k}x + z = {g}"), // an equation is not its right-hand side
        };
        (g, pred, "inside")
    })
}

/// Two integers past every machine number that differ in one digit.
fn big_integers() -> impl Strategy<Value = (String, String, &'static str)> {
    ("[1-9][0-9]{38,320}", any::<prop::sample::Index>(), 1u8..10).prop_map(|(n, at, d)| {
        let mut digits = n.clone().into_bytes();
        let k = at.index(digits.len());
        digits[k] = b'0' + (digits[k] - b'0' + d) % 10;
        if k == 0 && digits[0] == b'0' {
            digits[0] = if n.as_bytes()[0] == b'1' { b'2' } else { b'1' };
        }
        let m = String::from_utf8(digits).unwrap();
        (n, m, "big integer")
    })
}

fn pairs() -> impl Strategy<Value = (String, String, &'static str)> {
    prop_oneof![
        times(),
        mixed(),
        intervals(),
        sets(),
        equations(),
        inside(),
        big_integers()
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: PAIRS, failure_persistence: None, ..ProptestConfig::default() })]

    /// No pair of different values in one shape is equal, either way round.
    #[test]
    fn different_values_are_never_equal((gold, pred, shape) in pairs()) {
        prop_assert!(!math_equal(&pred, &gold), "{shape}: {pred:?} = {gold:?}");
        prop_assert!(!math_equal(&gold, &pred), "{shape}: {gold:?} = {pred:?}");
    }
}

/// The generators make what they say: each gold equals itself written again.
#[test]
fn the_golds_are_answers() {
    let mut runner = TestRunner::deterministic();
    for _ in 0..2_000 {
        let (gold, _, shape) = pairs().new_tree(&mut runner).unwrap().current();
        assert!(math_equal(&gold, &format!(" {gold} ")), "{shape}: {gold:?}");
    }
}

/// Writes `FP_DUMP_N` (default 20,000) pairs to the file `FP_DUMP` names.
#[test]
#[ignore = "writes a file; run by hand for bench/bench_math_fp.py"]
fn dump() {
    use std::io::Write as _;
    let path = std::env::var("FP_DUMP").expect("FP_DUMP=path");
    let n: usize = std::env::var("FP_DUMP_N").map_or(20_000, |v| v.parse().unwrap());
    let mut runner = TestRunner::new(Config::default());
    let mut out = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    for _ in 0..n {
        let (gold, pred, shape) = pairs().new_tree(&mut runner).unwrap().current();
        writeln!(out, "{gold}\t{pred}\t{shape}").unwrap();
    }
}
