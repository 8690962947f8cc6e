//! Property tests: the one-pass scanner against a naive scanner that walks the seed regexes'
//! backtracking order literally (every start, every lazy length), plus linear-time checks.

use std::time::{Duration, Instant};

use proptest::prelude::*;
use reward_core::scan::numeric_capture;
use reward_core::unicode::{is_decimal, is_py_space};
use reward_core::{Scorer, Scores, TagScanner, Tags};

fn occurs(text: &str, at: usize, tag: &str) -> bool {
    text.is_char_boundary(at) && text[at..].starts_with(tag)
}

fn boundaries(text: &str) -> Vec<usize> {
    text.char_indices()
        .map(|(i, _)| i)
        .chain([text.len()])
        .collect()
}

/// `re.search(f"{RE}.*?{SS}(.+?){SE}[\s]*$", text, DOTALL).group(1)`, by brute force.
fn naive_format<'a>(text: &'a str, re: &str, ss: &str, se: &str) -> Option<&'a str> {
    let pos = boundaries(text);
    for &r in &pos {
        if !occurs(text, r, re) {
            continue;
        }
        for &s in pos.iter().filter(|&&s| s >= r + re.len()) {
            if !occurs(text, s, ss) {
                continue;
            }
            let cap = s + ss.len();
            for &e in pos.iter().filter(|&&e| e > cap) {
                if occurs(text, e, se) && text[e + se.len()..].chars().all(is_py_space) {
                    return Some(&text[cap..e]);
                }
            }
        }
    }
    None
}

/// `re.search(SS + r".*?[\s]*([-]?[\d\.\,]{1,})", text, DOTALL).group(1)`, by brute force.
fn naive_numeric<'a>(text: &'a str, ss: &str) -> Option<&'a str> {
    let class = |c: char| c == '.' || c == ',' || is_decimal(c);
    let pos = boundaries(text);
    for &s in &pos {
        if !occurs(text, s, ss) {
            continue;
        }
        for &q in pos.iter().filter(|&&q| q >= s + ss.len()) {
            let rest = &text[q..];
            let ws: usize = rest
                .chars()
                .take_while(|&c| is_py_space(c))
                .map(char::len_utf8)
                .sum();
            let t = &rest[ws..];
            let sign = usize::from(t.starts_with('-') && t[1..].chars().next().is_some_and(class));
            let run: usize = t[sign..]
                .chars()
                .take_while(|&c| class(c))
                .map(char::len_utf8)
                .sum();
            if run > 0 {
                return Some(&t[..sign + run]);
            }
        }
        return None;
    }
    None
}

/// Python's `str.count` (non-overlapping), capped at 2.
fn naive_count(text: &str, tag: &str) -> u8 {
    let (mut n, mut at) = (0u8, 0usize);
    while let Some(i) = text[at..].find(tag) {
        n = (n + 1).min(2);
        at += i + tag.len();
    }
    n
}

const PIECES: &[&str] = &[
    "<end_working_out>",
    "<SOLUTION>",
    "</SOLUTION>",
    "<start_working_out>",
    "<",
    "/",
    "SOLUTION>",
    "</",
    " ",
    "\n",
    "\r\n",
    "\u{3000}",
    "\u{a0}",
    "\x1c",
    "\u{200b}",
    "1",
    "42",
    "-",
    ".",
    ",",
    "\u{663}",
    "a",
    "é",
    "_",
    "e5",
];

fn seed_text() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(PIECES), 0..24).prop_map(|v| v.concat())
}

fn small_tag() -> impl Strategy<Value = String> {
    "[ab<]{1,3}"
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn seed_tags_agree(text in seed_text()) {
        let t = TagScanner::new("<start_working_out>", "<end_working_out>", "<SOLUTION>", "</SOLUTION>");
        let scan = t.scan000(&text);
        prop_assert_eq!(scan.format, naive_format(&text, "<end_working_out>", "<SOLUTION>", "</SOLUTION>"));
        prop_assert_eq!(scan.numeric, naive_numeric(&text, "<SOLUTION>"));
        let counts = [
            naive_count(&text, "<end_working_out>"),
            naive_count(&text, "<SOLUTION>"),
            naive_count(&text, "</SOLUTION>"),
        ];
        prop_assert_eq!(scan.counts, counts);
    }

    #[test]
    fn overlapping_custom_tags_agree(
        re in small_tag(), ss in small_tag(), se in small_tag(), text in "[ab< 1\\-.]{0,16}"
    ) {
        let t = TagScanner::new("x", &re, &ss, &se);
        let scan = t.scan000(&text);
        prop_assert_eq!(scan.format, naive_format(&text, &re, &ss, &se));
        prop_assert_eq!(scan.numeric, naive_numeric(&text, &ss));
        prop_assert_eq!(scan.counts, [naive_count(&text, &re), naive_count(&text, &ss), naive_count(&text, &se)]);
    }

    #[test]
    fn any_unicode_text_is_fine(text in "\\PC{0,64}") {
        let s = Scorer::new(Tags::seed000(), Scores::default()).unwrap();
        let row = s.score000(&text, Some(&text));
        prop_assert!(row.iter().all(|v| v.is_finite()));
        let t = s.scanner();
        prop_assert_eq!(t.scan000(&text).format, naive_format(&text, "<end_working_out>", "<SOLUTION>", "</SOLUTION>"));
    }

    #[test]
    fn numeric_scan_skips_correctly_at_every_offset(
        text in "[a-z /+*\u{e9}\u{2003}\u{663}\u{1d7d9}]{0,120}[0-9.,-]?[a-z /]{0,20}"
    ) {
        // the 8-bytes-at-a-time skip must not jump over a candidate, whatever the alignment
        let tagged = format!("S{text}");
        prop_assert_eq!(numeric_capture(&text), naive_numeric(&tagged, "S"));
    }

    #[test]
    fn numeric_capture_is_a_class_run(text in "[ -.,0-9a\u{663}\u{3000}]{0,40}") {
        if let Some(c) = numeric_capture(&text) {
            let body = c.strip_prefix('-').unwrap_or(c);
            prop_assert!(!body.is_empty());
            prop_assert!(body.chars().all(|ch| ch == '.' || ch == ',' || is_decimal(ch)));
        }
    }
}

fn time_it(f: impl FnOnce()) -> Duration {
    let t0 = Instant::now();
    f();
    t0.elapsed()
}

/// Inputs on which the seed regexes backtrack cubically/quadratically are a single pass here.
#[test]
fn degenerate_inputs_are_linear() {
    let s = Scorer::new(Tags::seed000(), Scores::default()).unwrap();
    let cases = [
        "<end_working_out><SOLUTION>".repeat(40_000),
        format!("<SOLUTION>{}", " ".repeat(1_000_000)),
        format!(
            "<end_working_out><SOLUTION>x{}",
            "</SOLUTION> ".repeat(80_000)
        ),
        "<".repeat(1_000_000),
        format!("<SOLUTION>{}", "-".repeat(1_000_000)),
        format!("<end_working_out><SOLUTION>{}", "\u{3000}".repeat(300_000)),
    ];
    for text in &cases {
        let small = &text[..text.len() / 10 - text.len() / 10 % 4];
        let small = &small[..small.char_indices().last().map_or(0, |(i, _)| i)];
        let t_small = time_it(|| {
            s.score000(small, Some("1"));
        });
        let t_big = time_it(|| {
            s.score000(text, Some("1"));
        });
        // 10x the input: well under 100x the time (quadratic), with slack for timer noise.
        let limit = Duration::from_millis(if cfg!(debug_assertions) { 5_000 } else { 500 });
        assert!(t_big < limit, "{} bytes took {t_big:?}", text.len());
        assert!(
            t_big < t_small * 40 + Duration::from_millis(20),
            "{t_small:?} -> {t_big:?}"
        );
    }
}
