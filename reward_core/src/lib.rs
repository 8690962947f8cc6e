//! `reward_core`: the GRPO format and answer rewards of the seed recipes, scored in linear time
//! with Python-exact semantics.
//!
//! Pure Rust: no Python types here (`cargo test` needs no interpreter). The PyO3 module
//! `py_rewards._core` lives in `python/` behind the `python` feature.
//!
//! ```
//! use reward_core::{Scorer, Tags, Scores};
//! let scorer = Scorer::new(Tags::seed000(), Scores::default()).unwrap();
//! let text = "<start_working_out>2+2<end_working_out><SOLUTION>4</SOLUTION>";
//! assert_eq!(scorer.score000(text, Some("4")), [3.0, 1.5, 5.0, 3.5]);
//! ```

pub mod math;
pub mod parallel;
pub mod pyfloat;
pub mod scan;
pub mod unicode;

#[cfg(feature = "python")]
mod python;

use std::fmt;

pub use math::{extract_answer as extract_math_answer, math_equal, math_equal_batch};
pub use pyfloat::py_float;
pub use scan::{Scan000, TagScanner};
pub use unicode::{is_py_space, py_strip};

/// Everything that can go wrong in the core (mapped to Python exceptions in one place).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A format tag is empty (`field` names it).
    EmptyTag(&'static str),
    /// Two parallel inputs differ in length.
    LengthMismatch {
        what: &'static str,
        expected: usize,
        got: usize,
    },
    /// A score name that [`Scores`] does not have.
    UnknownScore(String),
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::EmptyTag(field) => write!(f, "format tag {field:?} must be a non-empty string"),
            Error::LengthMismatch {
                what,
                expected,
                got,
            } => {
                write!(f, "{what} has {got} items but completions has {expected}")
            }
            Error::UnknownScore(name) => write!(f, "unknown reward score {name:?}"),
        }
    }
}

impl std::error::Error for Error {}

/// The four tags of a format (`py_rewards.spec.FormatSpec`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tags {
    pub reasoning_start: String,
    pub reasoning_end: String,
    pub solution_start: String,
    pub solution_end: String,
}

impl Tags {
    /// Seed 000's tags.
    pub fn seed000() -> Self {
        Self::new(
            "<start_working_out>",
            "<end_working_out>",
            "<SOLUTION>",
            "</SOLUTION>",
        )
    }

    /// Seed 001's tags: `<<reasoning>> <<\boxed{answer}>>`.
    pub fn seed001() -> Self {
        Self::new("<<", ">>", "<<\\boxed{", "}>>")
    }

    pub fn new(
        reasoning_start: &str,
        reasoning_end: &str,
        solution_start: &str,
        solution_end: &str,
    ) -> Self {
        Self {
            reasoning_start: reasoning_start.into(),
            reasoning_end: reasoning_end.into(),
            solution_start: solution_start.into(),
            solution_end: solution_end.into(),
        }
    }
}

/// Score tiers (`py_rewards.spec.RewardScores`; defaults are seed 000's).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scores {
    pub exact: f64,
    pub approx_hit: f64,
    pub approx_miss: f64,
    pub answer_exact: f64,
    pub answer_strip: f64,
    pub answer_ratio_10: f64,
    pub answer_ratio_20: f64,
    pub answer_wrong: f64,
    pub answer_unparsable: f64,
    pub answer_missing: f64,
    pub numeric_hit: f64,
    pub numeric_miss: f64,
    pub numeric_unparsable: f64,
    pub numeric_missing: f64,
    /// `check_math_answer`: the answer equals the gold one under [`math::math_equal`].
    pub math_correct: f64,
    pub math_wrong: f64,
    /// No solution tags and no `\boxed{}` answer.
    pub math_missing: f64,
}

impl Default for Scores {
    fn default() -> Self {
        Self {
            exact: 3.0,
            approx_hit: 0.5,
            approx_miss: -1.0,
            answer_exact: 5.0,
            answer_strip: 3.5,
            answer_ratio_10: 2.0,
            answer_ratio_20: 1.5,
            answer_wrong: -2.5,
            answer_unparsable: -4.5,
            answer_missing: -2.0,
            numeric_hit: 3.5,
            numeric_miss: -1.5,
            numeric_unparsable: 0.0,
            numeric_missing: -2.5,
            math_correct: 5.0,
            math_wrong: -2.5,
            math_missing: -2.0,
        }
    }
}

impl Scores {
    /// Set the tier called `name` (the field's name, as in `py_rewards.spec.RewardScores`).
    pub fn set(&mut self, name: &str, value: f64) -> Result<(), Error> {
        let slot = match name {
            "exact" => &mut self.exact,
            "approx_hit" => &mut self.approx_hit,
            "approx_miss" => &mut self.approx_miss,
            "answer_exact" => &mut self.answer_exact,
            "answer_strip" => &mut self.answer_strip,
            "answer_ratio_10" => &mut self.answer_ratio_10,
            "answer_ratio_20" => &mut self.answer_ratio_20,
            "answer_wrong" => &mut self.answer_wrong,
            "answer_unparsable" => &mut self.answer_unparsable,
            "answer_missing" => &mut self.answer_missing,
            "numeric_hit" => &mut self.numeric_hit,
            "numeric_miss" => &mut self.numeric_miss,
            "numeric_unparsable" => &mut self.numeric_unparsable,
            "numeric_missing" => &mut self.numeric_missing,
            "math_correct" => &mut self.math_correct,
            "math_wrong" => &mut self.math_wrong,
            "math_missing" => &mut self.math_missing,
            other => return Err(Error::UnknownScore(other.to_owned())),
        };
        *slot = value;
        Ok(())
    }
}

/// Seed 001's fixed scores (`strict_format_reward_func`, `int_parsable_reward_func`).
pub const SEED001_HIT: f64 = 0.5;

/// Column order of [`Scorer::score000`] and [`Batch000`].
pub const SEED000_NAMES: [&str; 4] = [
    "match_format_exactly",
    "match_format_approximately",
    "check_answer_accuracy",
    "check_numeric_extraction",
];

/// A format's compiled tags and scores.
#[derive(Debug, Clone)]
pub struct Scorer {
    tags: Tags,
    scores: Scores,
    scanner: TagScanner,
}

impl Scorer {
    /// Fails on an empty tag.
    pub fn new(tags: Tags, scores: Scores) -> Result<Self, Error> {
        for (field, value) in [
            ("reasoning_start", &tags.reasoning_start),
            ("reasoning_end", &tags.reasoning_end),
            ("solution_start", &tags.solution_start),
            ("solution_end", &tags.solution_end),
        ] {
            if value.is_empty() {
                return Err(Error::EmptyTag(field));
            }
        }
        let scanner = TagScanner::new(
            &tags.reasoning_start,
            &tags.reasoning_end,
            &tags.solution_start,
            &tags.solution_end,
        );
        Ok(Self {
            tags,
            scores,
            scanner,
        })
    }

    pub fn tags(&self) -> &Tags {
        &self.tags
    }

    pub fn scores(&self) -> &Scores {
        &self.scores
    }

    pub fn scanner(&self) -> &TagScanner {
        &self.scanner
    }

    /// `match_format_exactly`: 3.0 if `FORMAT_REGEX.search(text)` else 0.0.
    pub fn match_format_exactly(&self, text: &str) -> f64 {
        self.exactly(&self.scanner.scan000(text))
    }

    fn exactly(&self, scan: &Scan000<'_>) -> f64 {
        if scan.format.is_some() {
            self.scores.exact
        } else {
            0.0
        }
    }

    fn approximately(&self, scan: &Scan000<'_>) -> f64 {
        // Same additions in the same order as the seed (exact float results for custom scores).
        let mut s = 0.0;
        for &count in &scan.counts {
            s += if count == 1 {
                self.scores.approx_hit
            } else {
                self.scores.approx_miss
            };
        }
        s
    }

    fn accuracy(&self, scan: &Scan000<'_>, answer: &str) -> f64 {
        let sc = &self.scores;
        let Some(group) = scan.format else {
            return sc.answer_missing;
        };
        let guess = py_strip(group);
        if guess == answer {
            return sc.answer_exact;
        }
        // `guess.strip() == true_ans.strip()`; guess is already stripped.
        if guess == py_strip(answer) {
            return sc.answer_strip;
        }
        // `float(guess) / float(true_ans)`: ValueError or ZeroDivisionError → except branch.
        match (py_float(guess), py_float(answer)) {
            (Some(g), Some(t)) if t != 0.0 => {
                let ratio = g / t;
                if (0.90..=1.10).contains(&ratio) {
                    sc.answer_ratio_10
                } else if (0.80..=1.20).contains(&ratio) {
                    sc.answer_ratio_20
                } else {
                    sc.answer_wrong // NaN ratios land here, as in Python
                }
            }
            _ => sc.answer_unparsable,
        }
    }

    fn numeric(&self, scan: &Scan000<'_>, answer: &str) -> f64 {
        let sc = &self.scores;
        let Some(group) = scan.numeric else {
            return sc.numeric_missing;
        };
        // group(1).strip() is a no-op: the capture holds no whitespace.
        let guess = if group.contains(',') {
            group.replace(',', "")
        } else {
            group.to_owned()
        };
        match (py_float(&guess), py_float(py_strip(answer))) {
            (Some(g), Some(t)) => {
                if g == t {
                    sc.numeric_hit
                } else {
                    sc.numeric_miss
                }
            }
            _ => sc.numeric_unparsable,
        }
    }

    /// The four seed-000 rewards of one completion, in [`SEED000_NAMES`] order; without an
    /// answer the last two are NaN.
    pub fn score000(&self, text: &str, answer: Option<&str>) -> [f64; 4] {
        let scan = self.scanner.scan000(text);
        let (acc, num) = match answer {
            Some(a) => (self.accuracy(&scan, a), self.numeric(&scan, a)),
            None => (f64::NAN, f64::NAN),
        };
        [self.exactly(&scan), self.approximately(&scan), acc, num]
    }

    /// Seed 001 `strict_format_reward_func` on one completion.
    pub fn strict_format001(&self, text: &str) -> f64 {
        if self.scanner.strict001(text) {
            SEED001_HIT
        } else {
            0.0
        }
    }

    /// Seed 001 `int_parsable_reward_func` on one completion.
    pub fn int_parsable001(&self, text: &str) -> f64 {
        match self.scanner.boxed001(text) {
            Some(x) if scan::is_int_literal(x) => SEED001_HIT,
            _ => 0.0,
        }
    }

    /// `check_math_answer` on one completion: the answer between the solution tags (else the last
    /// `\boxed{}`) judged against `answer` by [`math::math_equal`].
    pub fn check_math(&self, text: &str, answer: &str) -> f64 {
        let t = &self.tags;
        match math::extract_answer(text, &t.solution_start, &t.solution_end) {
            None => self.scores.math_missing,
            Some(a) if math::math_equal(a, answer) => self.scores.math_correct,
            Some(_) => self.scores.math_wrong,
        }
    }

    /// [`Self::check_math`] over a batch, in parallel when enabled.
    pub fn batch_math(&self, texts: &[&str], answers: &[&str]) -> Result<Vec<f64>, Error> {
        if answers.len() != texts.len() {
            return Err(Error::LengthMismatch {
                what: "answer",
                expected: texts.len(),
                got: answers.len(),
            });
        }
        let total: usize = texts.iter().chain(answers).map(|t| t.len()).sum();
        Ok(parallel::map_indices(texts.len(), total, |i| {
            self.check_math(texts[i], answers[i])
        }))
    }

    /// Seed 001's answer extraction (the text the cosine reward embeds; `""` when absent).
    pub fn extract001<'a>(&self, text: &'a str) -> &'a str {
        self.scanner.boxed001(text).unwrap_or("")
    }

    /// Score a batch with all four seed-000 rewards (answers optional), in parallel when enabled.
    pub fn batch000(&self, texts: &[&str], answers: Option<&[&str]>) -> Result<Batch000, Error> {
        if let Some(a) = answers {
            if a.len() != texts.len() {
                return Err(Error::LengthMismatch {
                    what: "answer",
                    expected: texts.len(),
                    got: a.len(),
                });
            }
        }
        let total: usize = texts.iter().map(|t| t.len()).sum();
        let rows = parallel::map_indices(texts.len(), total, |i| {
            self.score000(texts[i], answers.map(|a| a[i]))
        });
        Ok(Batch000::from_rows(&rows, answers.is_some()))
    }

    /// One seed-001 column over a batch.
    pub fn batch001(&self, texts: &[&str], f: fn(&Self, &str) -> f64) -> Vec<f64> {
        let total: usize = texts.iter().map(|t| t.len()).sum();
        parallel::map_indices(texts.len(), total, |i| f(self, texts[i]))
    }
}

/// Column-wise result of [`Scorer::batch000`].
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Batch000 {
    pub exactly: Vec<f64>,
    pub approximately: Vec<f64>,
    /// `None` when no answers were given.
    pub accuracy: Option<Vec<f64>>,
    pub numeric: Option<Vec<f64>>,
}

impl Batch000 {
    /// No rows yet (answer columns too, when `with_answers`): see [`Self::extend`].
    pub fn empty(with_answers: bool) -> Self {
        Self::from_rows(&[], with_answers)
    }

    /// Appends the rows of `next`, the next texts of the same batch.
    pub fn extend(&mut self, next: Self) {
        self.exactly.extend(next.exactly);
        self.approximately.extend(next.approximately);
        for (col, next) in [
            (&mut self.accuracy, next.accuracy),
            (&mut self.numeric, next.numeric),
        ] {
            if let (Some(col), Some(next)) = (col, next) {
                col.extend(next);
            }
        }
    }

    fn from_rows(rows: &[[f64; 4]], with_answers: bool) -> Self {
        let col = |j: usize| rows.iter().map(|r| r[j]).collect::<Vec<_>>();
        Self {
            exactly: col(0),
            approximately: col(1),
            accuracy: with_answers.then(|| col(2)),
            numeric: with_answers.then(|| col(3)),
        }
    }

    /// Column `j` in [`SEED000_NAMES`] order.
    pub fn column(&self, j: usize) -> Option<&[f64]> {
        match j {
            0 => Some(&self.exactly),
            1 => Some(&self.approximately),
            2 => self.accuracy.as_deref(),
            3 => self.numeric.as_deref(),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s000() -> Scorer {
        Scorer::new(Tags::seed000(), Scores::default()).unwrap()
    }

    #[test]
    fn empty_tag_rejected() {
        let err = Scorer::new(Tags::new("a", "", "c", "d"), Scores::default()).unwrap_err();
        assert_eq!(err, Error::EmptyTag("reasoning_end"));
    }

    #[test]
    fn accuracy_table() {
        let s = s000();
        let w = |x: &str| format!("<end_working_out><SOLUTION>{x}</SOLUTION>");
        let cases: &[(&str, &str, f64)] = &[
            ("4", "4", 5.0),        // exact
            (" 4 ", "4", 5.0),      // group(1).strip() first
            ("4", " 4 ", 3.5),      // answer needs strip
            ("95", "100", 2.0),     // within 10 %
            ("85", "100", 1.5),     // within 20 %
            ("50", "100", -2.5),    // wrong
            ("x", "100", -4.5),     // unparsable guess
            ("5", "0", -4.5),       // ZeroDivisionError
            ("nan", "1", -2.5),     // NaN ratio falls through
            ("inf", "inf", 5.0),    // identical strings
            ("inf", "1e999", -2.5), // inf/inf = NaN
            ("1_000", "1000", 2.0), // PEP 515
        ];
        for &(g, a, want) in cases {
            assert_eq!(s.score000(&w(g), Some(a))[2], want, "{g:?} vs {a:?}");
        }
        assert_eq!(s.score000("no tags", Some("1"))[2], -2.0);
    }

    #[test]
    fn numeric_table() {
        let s = s000();
        let cases: &[(&str, &str, f64)] = &[
            ("<SOLUTION>1,234", "1234", 3.5), // commas removed
            ("<SOLUTION> -0.5", "-0.5", 3.5), // sign kept
            ("<SOLUTION>1.2.3", "1", 0.0),    // unparsable
            ("<SOLUTION>7", "8", -1.5),       // miss
            ("<SOLUTION>", "8", -2.5),        // no number
            ("<SOLUTION>7", "x", 0.0),        // unparsable answer
        ];
        for &(t, a, want) in cases {
            assert_eq!(s.score000(t, Some(a))[3], want, "{t:?} vs {a:?}");
        }
    }

    #[test]
    fn check_math_table() {
        let s = s000();
        let w = |x: &str| format!("<end_working_out><SOLUTION>{x}</SOLUTION>");
        assert_eq!(s.check_math(&w("\\frac12"), "0.5"), 5.0); // equal under the verifier
        assert_eq!(s.check_math(&w("0.6"), "0.5"), -2.5); // wrong
        assert_eq!(s.check_math("so \\boxed{2\\sqrt3}", "\\sqrt{12}"), 5.0); // boxed fallback
        assert_eq!(s.check_math("no answer", "1"), -2.0); // missing
        assert_eq!(
            s.batch_math(&["x"], &[]).unwrap_err().to_string(),
            "answer has 0 items but completions has 1"
        );
    }

    #[test]
    fn a_batch_scored_in_chunks_equals_the_whole() {
        let s = s000();
        let texts: Vec<String> = (0..3000)
            .map(|i| format!("x{i}<end_working_out><SOLUTION>{}</SOLUTION>", i % 7))
            .collect();
        let answers: Vec<String> = (0..3000).map(|i| (i % 5).to_string()).collect();
        let refs: Vec<&str> = texts.iter().map(String::as_str).collect();
        let golds: Vec<&str> = answers.iter().map(String::as_str).collect();
        for with_answers in [false, true] {
            let ans = with_answers.then_some(golds.as_slice());
            let mut chunked = Batch000::empty(with_answers);
            for start in (0..refs.len()).step_by(128) {
                let end = refs.len().min(start + 128);
                let a = ans.map(|a| &a[start..end]);
                chunked.extend(s.batch000(&refs[start..end], a).unwrap());
            }
            assert_eq!(chunked, s.batch000(&refs, ans).unwrap());
        }
        assert_eq!(Batch000::empty(true), s.batch000(&[], Some(&[])).unwrap());
    }

    #[test]
    fn scores_by_name() {
        let mut sc = Scores::default();
        sc.set("math_missing", -7.0).unwrap();
        assert_eq!(sc.math_missing, -7.0);
        let err = sc.set("nope", 1.0).unwrap_err();
        assert_eq!(err.to_string(), "unknown reward score \"nope\"");
    }

    #[test]
    fn batch_length_mismatch() {
        let s = s000();
        let err = s.batch000(&["a", "b"], Some(&["1"])).unwrap_err();
        assert_eq!(err.to_string(), "answer has 1 items but completions has 2");
    }
}
