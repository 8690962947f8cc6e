//! Table-driven checks of the rules in the module docs, properties, and a no-panic fuzz.

use super::*;
use proptest::prelude::*;

#[test]
fn equal_pairs() {
    let cases: &[(&str, &str)] = &[
        ("0.5", "\\frac{1}{2}"),                      // decimal = fraction
        ("\\dfrac12", "\\frac{1}{2}"),                // \dfrac, braceless args
        ("\\frac34", "0.75"),                         // one digit per braceless argument
        ("\\sqrt{12}", "2\\sqrt{3}"),                 // exact radicals
        ("\\frac{\\sqrt2}{2}", "\\frac{1}{\\sqrt2}"), // rationalised
        ("( 1 , 2 )", "(1,2)"),                       // spacing
        ("90", "90^\\circ"),                          // degrees dropped
        ("90", "90^{\\circ}"),
        ("B", "\\text{(B)}"), // multiple choice
        ("10", "10\\%"),      // percent
        ("0.1", "10\\%"),
        ("237.5", "237.5\\%"),
        ("x \\in [0,1)", "[0,1)"), // membership assignment
        ("[0,1)", "x\\in[0,1)"),
        ("10080", "10,\\!080"), // thousands separators
        ("32348", "\\$32,\\!348"),
        ("3.21", "3.210"),             // trailing zeros
        ("137.5", "137 \\frac{1}{2}"), // mixed numbers
        ("\\frac95", "1\\frac{4}{5}"),
        ("-2", "-2.0"),
        ("0", "-0"),
        ("3", "x = 3"), // plain equations
        ("x=3", "3"),
        ("y=3+2x", "y = 2x + 3"),
        ("10x - 14y + 22z + 8 = 0", "5x - 7y + 11z + 4 = 0"),
        ("7, 5, 3", "3, 5, 7"), // bare lists are sets
        ("\\{3,5,7\\}", "3, 5, 7"),
        ("3 + 2\\sqrt2, 3-2\\sqrt2", "3 \\pm 2 \\sqrt{2}"),
        ("\\{-2, 1+\\sqrt5, 1-\\sqrt5\\}", "\\{1\\pm\\sqrt{5},-2\\}"),
        (
            "(3,\\infty)\\cup(-\\infty,2)",
            "(-\\infty, 2) \\cup (3, \\infty)",
        ),
        ("\\left( 3, \\frac{\\pi}{2} \\right)", "(3, \\pi/2)"),
        ("(0.6, 8/3]", "\\left(\\frac{3}{5},\\frac{8}{3}\\right]"),
        ("1+4n+8n^2", "8n^2 + 4n + 1"), // algebraic rewrites
        ("ab+2a+5b+10", "(a+5)(b+2)"),
        ("\\frac{\\cos x}{\\sin x}", "\\cot x"),
        ("3r^2", "3R^2"),
        ("7i-2", "-2 + 7i"), // complex
        ("-4 - 2\\cdot i", "-4 - 2i"),
        ("1+2^{0.5}", "1+\\sqrt{2}"),
        ("10t + 12", "12 + 10t"),
        ("\\frac13", "0.333333"), // 6-place decimals
        ("3.141593", "\\pi"),
        ("4.6666670", "\\frac{14}{3}"), // trailing zeros add no places
        ("\\sqrt[3]{8}", "2"),
        ("\\sqrt[3]{-8}", "-2"),
        ("\\log_2 8", "3"),
        ("\\sin \\frac{\\pi}{6}", "\\frac12"),
        ("Evelyn", "\\text{Evelyn}"), // text
        ("east", "\\text{East}"),
        ("864", "864 \\mbox{ inches}^2"), // units
        ("15", "15\\mbox{ cm}^2"),
        ("5.4", "5.4 \\text{ cents}"),
        ("5.4 cents", "5.4"), // bare unit words at the end
        ("\\frac{270}7 degrees", "\\frac{270}{7}"),
        ("[-\\infty, 2)", "(-\\infty, 2)"), // an infinite end is open either way
        ("2516", "2516_8"),                 // base subscript
        (
            "\\begin{pmatrix} -\\frac13 \\\\ \\frac23 \\end{pmatrix}",
            "\\begin{pmatrix} -1/3 \\\\ 2/3 \\end{pmatrix}",
        ),
        ("The answer is $\\boxed{\\frac{1}{2}}$.", "0.5"), // last \boxed
        ("\\{3\\}", "3"),
        ("The answer is $\\frac{1}{2}$.", "0.5"), // prose around the answer
        ("Answer: 5", "5"),
        ("The final answer is 5.", "5"),
        ("\\text{The answer is } 7", "7"),
        ("12 apples", "12"),
        ("$$x = 2$$", "2"),            // singleton
        ("x > 1", "1 < x"),            // inequalities
        ("(-\\infty, 3]", "x \\le 3"), // an inequality is its solution interval
        ("(1, 2]", "1 < x \\le 2"),
        ("x^2", "f(x)=x^2"),  // f(x) = … assigns
        ("\\sqrt{-4}", "2i"), // principal root
        ("2 \\times 3", "6"),
        ("6!", "720"),
        ("\\binom{5}{2}", "10"),
        ("|-3|", "3"),
        ("e^{i\\pi}", "-1"),
        ("\\frac{-b}{2}", "-\\frac{b}{2}"),
    ];
    for &(p, g) in cases {
        assert!(math_equal(p, g), "{p:?} should equal {g:?}");
        assert!(math_equal(g, p), "{g:?} should equal {p:?} (symmetry)");
    }
}

#[test]
fn unequal_pairs() {
    let cases: &[(&str, &str)] = &[
        ("\\frac{1}{2^{98}}", "\\frac{1}{2^{99}}"), // exact, no 6-place rounding
        ("0.33", "\\frac13"),
        ("3.14", "\\pi"),
        ("(2,1)", "(1,2)"), // tuples are ordered
        ("[1,2]", "(1,2)"), // closed vs open
        ("[1,2)", "[1,2]"),
        ("\\frac45", "1\\frac45"),
        ("\\sqrt{13}", "2\\sqrt{3}"),
        ("x=5", "y=5"),
        ("2x+1=0", "0"), // an equation in standard form is not its right side
        ("3, 5", "3, 5, 7"),
        ("\\text{an ellipse}", "\\text{ellipse}"),
        ("90", "\\frac{\\pi}{2}"),
        ("4.00001", "4"),
        ("12 apples", "13"),
        ("The answer is $3$ or $4$", "3"),
        ("0.0000673", ".0000672"),      // 7 places are compared, not 6
        ("5x - 7y + 11z + 4 = 0", "0"), // an equation is not its right side
        ("52_10", "52_8"),              // different bases
        ("4.6666671", "\\frac{14}{3}"),
        ("-2 + 7i", "2 + 7i"),
        ("x^2", "x^3"),
        ("\\sin x", "\\cos x"),
        ("x < 1", "x > 1"),
        ("(-\\infty, 3)", "x \\le 3"),
        ("x^2", "2x = x^2"),
        ("", "1"),
        ("1", ""),
        ("\\frac{1}{0}", "1"),
        (
            "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}",
            "\\begin{pmatrix} 2 \\\\ 1 \\end{pmatrix}",
        ),
    ];
    for &(p, g) in cases {
        assert!(!math_equal(p, g), "{p:?} should not equal {g:?}");
        assert!(!math_equal(g, p), "{g:?} should not equal {p:?}");
    }
}

#[test]
fn extraction() {
    let t = "<start_working_out>so 1/2<end_working_out><SOLUTION>\\frac12</SOLUTION>";
    assert_eq!(
        extract_answer(t, "<SOLUTION>", "</SOLUTION>"),
        Some("\\frac12")
    );
    assert_eq!(
        extract_answer("x \\boxed{\\frac{1}{2}} y", "<SOLUTION>", "</SOLUTION>"),
        Some("\\frac{1}{2}")
    );
    assert_eq!(
        extract_answer("no answer", "<SOLUTION>", "</SOLUTION>"),
        None
    );
    assert_eq!(
        extract_answer("\\boxed{1", "<SOLUTION>", "</SOLUTION>"),
        None
    );
}

#[test]
fn adversarial_inputs_are_fast_and_false() {
    let n = 100_000;
    let inputs = [
        "{".repeat(n / 2) + &"}".repeat(n / 2),
        "\\frac{1}{".repeat(n / 9) + "2" + &"}".repeat(n / 9),
        "9".repeat(n),
        "\\sqrt{".repeat(n / 6) + "2",
        "\\left(".repeat(n / 6),
        "(1,".repeat(n / 3),
        "1+".repeat(n / 2) + "1",
        "x^".repeat(n / 2) + "2",
        "\\boxed{".repeat(n / 7),
        "-".repeat(n),
        "+".repeat(n),
        "2*+".repeat(n / 3) + "1",
        "\\pm".repeat(n / 3),
        "\\sqrt".repeat(n / 5) + "2",
        "\\sin".repeat(n / 4) + "x",
        "\\begin{pmatrix}".repeat(n / 15),
        "\\text{".repeat(n / 6),
        "|".repeat(n),
        "^".repeat(n),
        "x_".repeat(n / 2),
    ];
    for s in &inputs {
        let t = std::time::Instant::now();
        let _ = math_equal(s, "1");
        let _ = math_equal(s, s);
        let _ = normalize(s);
        assert!(t.elapsed().as_millis() < 2_000, "slow on {:?}…", &s[..20]);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]

    /// No input panics (random LaTeX-ish soup, including unbalanced braces and deep nesting).
    #[test]
    fn never_panics(s in "(\\\\frac|\\\\sqrt|\\\\left|\\\\right|\\\\text|\\\\boxed|\\\\pm|\\\\begin\\{pmatrix\\}|\\\\end\\{pmatrix\\}|\\\\\\\\|[{}()\\[\\],.=^_&|%$0-9a-zA-Z+\\-*/ ]|\\\\[a-z]+|\\\\.|.){0,60}",
                    t in "(\\\\frac|\\\\sqrt|[{}()\\[\\],.=^_0-9x+\\-]){0,30}") {
        let _ = math_equal(&s, &t);
        let _ = math_equal(&t, &s);
        let _ = parse_answer(&s);
    }

    /// Normalising twice changes nothing.
    #[test]
    fn normalize_is_idempotent(s in "(\\\\frac|\\\\sqrt|\\\\text\\{[a-z ]{0,6}\\}|\\\\left|\\\\right|\\\\pi|\\\\circ|\\\\%|\\\\\\{|\\\\\\}|[{}()\\[\\],.=^_0-9a-zA-Z+\\-*/ ]){0,40}") {
        let once = normalize(&s);
        prop_assert_eq!(normalize(&once), once.clone());
    }

    /// Every answer with non-empty normalised text equals itself, and equality is symmetric.
    #[test]
    fn reflexive_and_symmetric(s in "(\\\\frac\\{[0-9]\\}\\{[1-9]\\}|\\\\sqrt\\{[0-9]\\}|[0-9]{1,3}|[xy]|[+\\-*,]|\\(|\\)|\\\\pi){1,12}",
                               t in "(\\\\frac\\{[0-9]\\}\\{[1-9]\\}|\\\\sqrt\\{[0-9]\\}|[0-9]{1,3}|[xy]|[+\\-*,]|\\(|\\)|\\\\pi){1,12}") {
        if !normalize(&s).is_empty() {
            prop_assert!(math_equal(&s, &s));
        }
        prop_assert_eq!(math_equal(&s, &t), math_equal(&t, &s));
    }
}

/// Pieces of LaTeX the fuzz below strings together.
const FRAGMENTS: &[&str] = &[
    "\\frac",
    "\\dfrac",
    "\\sqrt",
    "[3]",
    "\\left(",
    "\\right)",
    "\\left[",
    "\\right]",
    "{",
    "}",
    "(",
    ")",
    "[",
    "]",
    "\\{",
    "\\}",
    ",",
    ";",
    "=",
    "<",
    "\\le",
    "\\ge",
    "\\in",
    "\\cup",
    "\\pm",
    "^",
    "_",
    "!",
    "%",
    "\\%",
    "'",
    "|",
    "&",
    "\\\\",
    "\\begin{pmatrix}",
    "\\end{pmatrix}",
    "\\begin{array}{cc}",
    "\\text{",
    "\\mbox{ cm}",
    "\\text{ or }",
    "\\boxed{",
    "\\pi",
    "\\infty",
    "\\circ",
    "\\cdot",
    "\\times",
    "\\sin",
    "\\log_",
    "\\ln",
    "\\binom",
    "\\emptyset",
    "\\alpha",
    "0",
    "1",
    "2",
    "9",
    "12",
    "1,000",
    "0.5",
    ".25",
    "3.",
    "x",
    "y",
    "e",
    "i",
    "f(x)",
    "+",
    "-",
    "*",
    "/",
    " ",
    "$",
    "°",
    "π",
    "√",
    "−",
    "\\!",
    "\\,",
    "\\$",
    "\\",
    "é",
    "中",
];

/// A cargo-fuzz-free fuzz: long random LaTeX made of the fragments the parser cares about (deeper
/// and longer than the proptest strategies), judged against itself and against short answers.
#[test]
fn random_latex_never_panics() {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let shorts = ["1", "x", "(1,2)", "\\frac12", "x=1", "\\{1\\}", "[0,1)", ""];
    for round in 0..3000 {
        let len = (next() % if round % 10 == 0 { 2000 } else { 60 }) as usize;
        let s: String = (0..len)
            .map(|_| FRAGMENTS[(next() % FRAGMENTS.len() as u64) as usize])
            .collect();
        let _ = math_equal(&s, &s);
        let _ = math_equal(&s, shorts[round % shorts.len()]);
        let _ = math_equal(shorts[round % shorts.len()], &s);
        let once = normalize(&s);
        assert_eq!(normalize(&once), once, "normalize not idempotent on {s:?}");
    }
}

/// Letters that would read back as a bare word (`and`, `pi`, `sqrt`) render apart.
#[test]
fn products_of_letters_render_apart() {
    for s in [
        "s q r t",
        "p i",
        "a n d",
        "\\text{pi}",
        "sqrtx",
        "x\\,pi",
        "2 p i",
        "l n(2)",
    ] {
        let once = normalize(s);
        assert_eq!(normalize(&once), once, "{s:?} -> {once:?}");
    }
}
