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

/// Answer shapes beyond bare answers (bench/math_kinds.py has them in bulk, from real text).
#[test]
fn equal_shapes() {
    let cases: &[(&str, &str)] = &[
        // several answers: boxes joined by connectors are one set
        ("\\boxed{1} and \\boxed{2}", "1, 2"),
        ("$\\boxed{3}\\boxed{4}$", "\\{3, 4\\}"),
        (
            "$\\boxed{(1,2)} \\quad\\text{and}\\quad \\boxed{(3,4)}$",
            "(3,4), (1,2)",
        ),
        ("$x = \\boxed{2}$ or $x = \\boxed{-2}$", "\\pm 2"),
        ("\\boxed{6}, \\boxed{6}", "6"), // the same answer boxed twice
        // answers in prose
        ("The largest $k$ is 12.", "12"), // `$k$` only names a variable
        ("Answer \\[ 7 \\]", "7"),        // an answer phrase, display math
        ("It costs $1,200 + $30 = $1,230 in all.", "1230"), // money, a computation
        ("so \\( y = 3 \\). That is all.", "3"), // the sentence after the math
        (
            "Final Answer: The final answer is $\\frac{2}{3}$. I hope it is correct.",
            "\\frac23",
        ),
        ("#### 72", "72"),
        ("\\[ x^2 = 4 \\\\ x = \\pm 2 \\]", "\\pm 2"), // display math states its last line
        ("\\begin{align*} a &= 2 + 3 \\\\ &= 5 \\end{align*}", "5"),
        ("7 \\text{ marbles}", "7"), // what was counted
        // labels that are not one variable
        ("(a,b) = (5,1)", "(5,1)"),
        ("PQ = 3, RS = 8", "3, 8"),
        ("U:V = 2:9", "2:9"),
        ("|PQ| = 6", "6"),
        ("m+n = 34", "34"),
        ("\\angle ABC = 40^\\circ", "40"),
        ("m=3,n=1;m=4,n=1", "(3,1),(4,1)"),
        ("x_1 = 2, x_2 = 5", "5, 2"), // listed labels against a set
        ("y = 2, x = 1", "(x, y) = (1, 2)"), // labels matched whatever their order
        ("f(3) = f(-3) + 6 = 8", "8"), // a computation states its last value
        // relations, normalised so that equality is transitive
        ("-1 \\le t \\le 5", "t \\in [-1, 5]"),
        ("t >= 1", "[1, \\infty)"),
        ("t != 1", "t \\ne 1"),
        ("t \\ne 1", "(-\\infty, 1) \\cup (1, \\infty)"),
        ("t < -1 \\text{ or } t > 2", "(-\\infty,-1)\\cup(2,\\infty)"),
        ("\\{4,4,1\\}", "\\{1,4\\}"), // sets ignore repeats
        ("s = \\sqrt{2} \\approx 1.41", "\\sqrt2"),
        ("s = \\sqrt{2} \\approx 1.41", "1.41"),
        ("\\frac{9}{3} = 3", "3"),
        ("2 + 3 = 5", "5"),
        // bare `and` / `or`
        ("7, 8, and 9", "7, 8, 9"),
        ("(2,5)or(5,2)", "(2,5), (5,2)"),
        // matrices and sums are evaluated
        (
            "\\begin{pmatrix}1\\\\2\\end{pmatrix}+\\begin{pmatrix}3\\\\4\\end{pmatrix}",
            "\\begin{pmatrix}4\\\\6\\end{pmatrix}",
        ),
        (
            "3\\begin{pmatrix}1&0\\\\0&1\\end{pmatrix}",
            "\\begin{pmatrix}3&0\\\\0&3\\end{pmatrix}",
        ),
        (
            "\\begin{pmatrix}1&1\\\\0&1\\end{pmatrix}^2",
            "\\begin{pmatrix}1&2\\\\0&1\\end{pmatrix}",
        ),
        ("\\sum_{j=1}^{4} j^2", "30"),
        ("\\sum_{k=1}^{100} k^2", "338350"), // 400 tokens read again: within the budget
        ("\\sum_{i=1}^{n} 2i", "\\sum_{k=1}^{n} k \\cdot 2"),
        ("\\prod_{k=1}^{4} k", "24"),
        // written without LaTeX, or glued together
        ("sqrt(3)", "\\sqrt3"),
        ("β", "\\beta"),
        ("\\pir^2", "\\pi r^2"),
        ("\\{1\\}\\cup\\{2\\}", "\\{1,2\\}"),
        ("\\frac{1}{3000!}", "{\\frac{1}{3000!}}"), // past f64: equal to itself
        ("6,8{,}10", "6, 8, 10"),
        ("(-\\infty, \\infty)", "\\mathbb{R}"), // the real line
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
        // candidates, asides, empty and unclosed boxes are no answer
        ("\\boxed{1}, \\boxed{2}", "2"),
        ("$\\boxed{1}$ or $\\boxed{2}$", "2"),
        ("\\boxed{}", "5"),
        ("The answer is $\\boxed{}$. It is 5.", "5"),
        ("\\boxed{5", "5"),
        ("\\boxed{4} \\text{ (or maybe 5)}", "5"),
        ("I first got 5, but the answer is \\boxed{4}.", "5"),
        ("Answer: 4 (not 5)", "5"),
        ("\\boxed{5 + 1}", "5"),
        ("The answer is $3$ or $4$.", "4"),
        // numbers past f64 are not all equal
        ("2^{4950}", "3^{4950}"),
        ("2^{-5000}", "0"),
        // relations
        ("x \\ge 2", "(2, \\infty)"),
        ("x + y + z = 0", "0"), // an equation in standard form
        ("(a,b) = (5,1)", "(1,5)"),
        ("2 + 3 = 5", "6"),
        ("\\sum_{i=1}^{4} i", "11"),
        // 13,000 tokens to read again, past the budget: named by its limits and body, not added up
        ("\\sum_{n=1}^{1000} \\frac{1}{n^2+n}", "\\frac{1000}{1001}"),
        (
            "\\begin{pmatrix}1\\\\2\\end{pmatrix}+\\begin{pmatrix}3\\\\4\\end{pmatrix}",
            "\\begin{pmatrix}4\\\\7\\end{pmatrix}",
        ),
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
    // joined boxes come whole, so that math_equal reads them as one set
    assert_eq!(
        extract_answer("so $\\boxed{1}$ or $\\boxed{2}$.", "<S>", "</S>"),
        Some("\\boxed{1}$ or $\\boxed{2}")
    );
    // an answer phrase marks an answer; prose alone does not
    let phrase = "Final Answer: The final answer is $5$. I hope it is correct.";
    assert!(extract_answer(phrase, "<S>", "</S>").is_some_and(|a| math_equal(a, "5")));
    assert_eq!(extract_answer("I think it is 5.", "<S>", "</S>"), None);
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
        // the extraction and relation rules
        "$1 ".repeat(n / 3),
        "$x$ ".repeat(n / 4),
        "\\boxed{1} and ".repeat(n / 14),
        "\\boxed{}".repeat(n / 8),
        "The answer is ".repeat(n / 14) + "5",
        "answers".repeat(n / 7),
        "\\(\n".repeat(n / 3),
        "\\[".repeat(n / 2),
        "$$ ".repeat(n / 3),
        "\\begin{align*}".repeat(n / 14),
        "#### ".repeat(n / 5),
        "the cat sat on the mat ".repeat(n / 23),
        "1 and ".repeat(n / 6),
        "(".repeat(n - 1) + "1",
        "\\text{a} 1 ".repeat(n / 11),
        vec!["x=1"; 30_000].join(","),
        vec!["1"; 50_000].join("="),
        vec!["1"; 50_000].join(":"),
        "\\{".to_owned() + &vec!["1"; 50_000].join(",") + "\\}",
        "\\sum_{k=1}^{1000}".repeat(n / 17) + "k",
        "\\begin{pmatrix}1&1\\\\1&1\\end{pmatrix}".repeat(n / 40),
        "\\pia".repeat(n / 4),
        "{,}".repeat(n / 3),
        "<=".repeat(n / 2),
        "and or ".repeat(n / 7),
        "$$$$1".repeat(n / 5),
        "answer$$\\cup".repeat(n / 12),
        "|\\text{ and } ".repeat(n / 14),
    ];
    for s in &inputs {
        let t = std::time::Instant::now();
        let _ = math_equal(s, "1");
        let _ = math_equal(s, s);
        let _ = normalize(s);
        assert!(t.elapsed().as_millis() < 2_000, "slow on {:?}…", &s[..20]);
    }
}

#[test]
fn answers_past_the_limit_are_their_text() {
    let prose = "We add the ones up one by one. ".repeat(3000); // ~93K characters before the box
    let sum = |n: usize| "1+".repeat(n - 1) + "1";
    // an answer within the limit is read as math, wherever it stands
    let within = format!("{prose}so \\boxed{{{}}}", sum(1000)); // 1,999 bytes
    assert!(math_equal(&within, "1000"));
    // past it, only the same text is equal: the value is not read
    let past = sum(MAX_ANSWER / 2 + 1);
    assert!(past.len() > MAX_ANSWER);
    assert!(math_equal(&past, &past));
    assert!(math_equal(
        &format!("{prose}so \\boxed{{{past}}}"),
        &format!("\\boxed{{ {past} }}")
    ));
    assert!(!math_equal(&past, &(MAX_ANSWER / 2 + 1).to_string()));
    assert!(!math_equal(&past, &format!("{past}+0")));
    // long display math is read from where its last line starts
    let lines = "x &= 1 + 1 + 1 \\\\\n".repeat(200); // ~3.6K
    let align = format!("So \\[\\begin{{align*}} {lines} &= 5 \\end{{align*}}\\]");
    assert!(align.len() > MAX_ANSWER && math_equal(&align, "5") && !math_equal(&align, "3"));
    let m = "\\begin{pmatrix} 1 \\\\ 2 \\end{pmatrix}";
    let align = format!("So \\[\\begin{{align*}} {lines} &= {m} \\end{{align*}}\\]");
    assert!(math_equal(&align, m));
}

#[test]
fn long_collections_cost_a_bounded_number_of_comparisons() {
    let set = |xs: Vec<String>| format!("\\{{{}\\}}", xs.join(","));
    let up = |n: usize| (1..=n).map(|i| i.to_string()).collect::<Vec<_>>();
    let down = |n: usize| (1..=n).rev().map(|i| i.to_string()).collect::<Vec<_>>();
    // a set of 40 against itself reversed is matched without order (~2.4K comparisons)
    assert!(math_equal(&set(up(40)), &set(down(40))));
    // 500 elements: past the collection limit (64; matched without order they would need ~190K
    // comparisons), not equal, both ways, and fast
    let (a, b) = (set(up(500)), set(down(500)));
    let t = std::time::Instant::now();
    assert!(!math_equal(&a, &b) && !math_equal(&b, &a));
    assert!(math_equal(&a, &a)); // the same text still is
                                 // sets of sets: the budget is shared by the whole comparison
    let nested = |rev: bool| {
        let inner = |k: usize| {
            let xs: Vec<String> = (k..k + 25).map(|i| i.to_string()).collect();
            set(if rev {
                xs.into_iter().rev().collect()
            } else {
                xs
            })
        };
        let outer: Vec<String> = (0..25).map(inner).collect();
        set(if rev {
            outer.into_iter().rev().collect()
        } else {
            outer
        })
    };
    assert!(!math_equal(&nested(false), &nested(true)));
    assert!(t.elapsed().as_millis() < 500, "slow: {:?}", t.elapsed());
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
    "\\boxed{1} and ",
    "$\\boxed{2}$ or ",
    "\\[",
    "\\]",
    "\\(",
    "\\)",
    "$$",
    "The answer is ",
    "Answer: ",
    "#### ",
    " the cat ",
    "\n",
    ". ",
    "$5 ",
    "<=",
    ">=",
    "!=",
    " and ",
    "or",
    ":",
    "{,}",
    "\\approx",
    "\\sum_{k=1}^{3}",
    "\\prod_{i=1}^{n}",
    "\\begin{align*}",
    "\\end{align*}",
    "&=",
    "AB",
    "|PQ|",
    "(p,q)",
    "sqrt",
    "pi",
    "β",
    "≠",
    "\\pia",
    "2^{5000}",
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

/// The synonym names the command set knows are the ones the tokenizer maps.
#[test]
fn synonym_names_are_mapped() {
    for name in lex::SYNONYMS {
        assert!(lex::synonym(name).is_some(), "{name}");
    }
}

/// The shapes a false positive came from (clock times, equations against their right side, math
/// across a paragraph break, mixed numbers, integers past any machine number), and the answer
/// shapes around them that must still be equal.
#[test]
fn clock_times_mixed_numbers_equations_and_big_integers() {
    let big = format!("1{}1", "0".repeat(320));
    let big2 = format!("1{}2", "0".repeat(320));
    let unequal: &[(&str, &str)] = &[
        ("12:00", "1:00"), // clock times are times, not ratios
        ("3:00", "5:00"),
        ("1:20", "2:40"),
        ("12:00", "12"),
        ("3:00 PM", "3:00 AM"),
        ("4:51:06", "4:51:07"),
        ("\\boxed{10:30}", "10:45"),
        ("5", "2x + z = 5"), // an equation with variables is not its right side
        ("c", "2x + z = c"),
        ("6", "3x = 6"),
        ("2x+z", "2x+z=5"),
        ("1 1/2", "1/2"), // mixed numbers
        ("2 2/3", "2"),
        ("2 2/3", "4/3"),
        ("2 2/3", "2/3"),
        ("-2 2/3", "-4/3"),
        (&big, &big2), // integers of any size compare exactly
        (
            "123456789012345678901234567890123456789012",
            "123456789012345678901234567890123456789013",
        ),
        ("2^{200}", "2^{200} + 1"),
        ("|x| \\le 3", "[-3, 4]"),
        ("x = 1 and y = 2", "(2, 1)"),
        // math does not span a paragraph break
        ("Cost is $$5 and more.\n\nSo $$x = 7$$ hmm", "5"),
    ];
    for (a, b) in unequal {
        assert!(!math_equal(a, b), "{a} = {b}");
        assert!(!math_equal(b, a), "{b} = {a}");
    }
    let equal: &[(&str, &str)] = &[
        ("12:00", "12:00"),
        ("3:00 PM", "15:00"),
        ("4:30p.m.", "4:30 PM"),
        ("\\text{4:30 p.m.}", "16:30"),
        ("05:00", "5:00"),
        ("7:32", "\\frac{7}{32}"), // a time against a value is a ratio
        ("The meeting starts at 3:00.", "3:00"),
        ("2 2/3", "8/3"),
        ("2 2/3", "2\\frac{2}{3}"),
        ("-2 2/3", "-\\frac83"),
        ("1 1/2 cups", "1.5"),
        (&big, &big),
        ("x = 3", "3"),
        ("m+n = 17", "17"),
        ("\\pi r^2 = 16\\pi \\approx 50.27", "16\\pi"),
        ("Final Answer: The largest $n$ is 34.", "34"),
        ("|z| < 3", "z \\in (-3, 3)"),
        ("|z| \\le 3", "-3 \\le z \\le 3"),
        ("|x-2| \\le 5", "[-3, 7]"),
        ("|z| > 3", "(-\\infty, -3) \\cup (3, \\infty)"),
        ("a=2 and b=3", "a=2,b=3"),
        ("x = 1 \\text{ and } y = 2", "(1, 2)"),
        ("Then $c = 14,$ and $a_1 = 14 \\cdot 6^2 = 504.$", "504"),
        ("$x_1 = 2$ and $x_2 = -3$", "-3, 2"), // one variable's numbered values
    ];
    for (a, b) in equal {
        assert!(math_equal(a, b), "{a} != {b}");
        assert!(math_equal(b, a), "{b} != {a}");
    }
}
