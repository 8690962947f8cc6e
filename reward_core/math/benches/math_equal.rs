//! `cargo bench -p math_equal`: the time of one judgement on the answer shapes of the spec, and on
//! the worst inputs (100K characters) the limits bound. Ratios against Math-Verify are measured in
//! Python by `bench/bench_math.py` (both judges in one process); these are the Rust-side numbers.

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion};
use std::hint::black_box;

use math_equal::math_equal;

/// (name, prediction, gold): the shapes a reward sees.
const PAIRS: &[(&str, &str, &str)] = &[
    ("integer", "72", "72"),
    ("fraction", "\\frac{14}{3}", "4.6666667"),
    ("radical", "\\frac{\\sqrt2}{2}", "\\frac{1}{\\sqrt2}"),
    ("expression", "(a+5)(b+2)", "ab+2a+5b+10"),
    ("set", "\\{1, 2, 3, 4, 5\\}", "5, 4, 3, 2, 1"),
    ("interval", "-2 \\le x \\le 7", "x \\in [-2, 7]"),
    ("clock time", "4:30 p.m.", "16:30"),
    ("mixed number", "2 2/3", "\\frac{8}{3}"),
    (
        "matrix",
        "\\begin{pmatrix} 1 & 2 \\\\ 3 & 4 \\end{pmatrix}",
        "\\begin{pmatrix}1&2\\\\3&4\\end{pmatrix}",
    ),
    (
        "solution",
        "First, $3 \\cdot 4 = 12$, and then we add $5$.\n\nSo the total is $\\boxed{17}$ apples.",
        "17",
    ),
    (
        "prose",
        "She earns 18 dollars an hour, 40 hours a week, so in a week she makes \\$720 in total.",
        "720",
    ),
];

fn shapes(c: &mut Criterion) {
    let mut group = c.benchmark_group("shape");
    for (name, pred, gold) in PAIRS {
        group.bench_with_input(
            BenchmarkId::from_parameter(name),
            &(pred, gold),
            |b, (p, g)| {
                b.iter(|| math_equal(black_box(p), black_box(g)));
            },
        );
    }
    group.finish();
}

/// Inputs of 100K characters that a linear scan must not turn quadratic.
fn worst_cases(c: &mut Criterion) {
    let n = 100_000;
    let inputs = [
        ("nested braces", "{".repeat(n / 2) + &"}".repeat(n / 2)),
        ("frac chain", "\\frac{1}{".repeat(n / 9)),
        ("digits", "7".repeat(n)),
        ("boxes", "\\boxed{1}".repeat(n / 9)),
        ("dollars", "$1$ and ".repeat(n / 8)),
        ("sum", "+1+2+3+4+5+6+7+8+9".repeat(n / 18)),
    ];
    let mut group = c.benchmark_group("100K characters");
    group.sample_size(10);
    for (name, text) in &inputs {
        group.bench_with_input(BenchmarkId::from_parameter(name), text, |b, t| {
            b.iter(|| math_equal(black_box(t), black_box("1")));
        });
    }
    group.finish();
}

criterion_group!(benches, shapes, worst_cases);
criterion_main!(benches);
