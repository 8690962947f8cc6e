//! The types every stage shares, and nothing else: tokens ([`Tok`], from `lex`), parsed answers
//! ([`Item`], [`Rel`], [`Clock`], from `parse`) and the names both read ([`GREEK`]). A leaf: it
//! uses only `num`'s values, so `lex`, `parse`, `reading`, `matrix` and `cmp` depend on it and
//! never on each other in a cycle.

use crate::num::Val;

/// A token of an answer (see `lex::tokenize`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// Digits before and after the point (`.5` has an empty integer part); `point` when a `.` was written.
    Num {
        int: String,
        frac: String,
        point: bool,
    },
    /// A letter (lower-cased: MATH answers do not tell `R` from `r`).
    Letter(char),
    /// A word of two or more letters from inside `\text{…}` (lower-cased).
    Word(String),
    /// A command `\name` (after synonyms are mapped).
    Cmd(String),
    /// Punctuation: `+ - * / ^ _ ( ) [ ] { } , = < > | ! & ; '`
    P(char),
    SetOpen,
    SetClose,
    RowSep,
    Percent,
    Begin(String),
    End(String),
    /// A dropped unit word (internal; never in [`crate::lex::tokenize`]'s output).
    Unit,
}

/// Most elements of a tuple, set, list or matrix.
pub const MAX_ITEMS: usize = 64;

/// Relations, normalised so that `>`/`≥` become `<`/`≤` with the sides swapped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rel {
    Eq,
    /// `\approx`: equal up to the places of a written decimal, or within 1 %.
    Approx,
    Ne,
    Lt,
    Le,
    In,
}

/// A parsed answer.
#[derive(Debug, Clone, PartialEq)]
pub enum Item {
    /// An expression; more than one value after `±`.
    Val(Vec<Val>),
    /// Words (text answers such as `\text{Evelyn}`).
    Text(String),
    /// `(a, b, …)`: ordered.
    Tuple(Vec<Item>),
    /// `\{a, b\}` or a bare `a, b` list: unordered.
    Set(Vec<Item>),
    Interval {
        lo: Box<Item>,
        hi: Box<Item>,
        lo_closed: bool,
        hi_closed: bool,
    },
    Union(Vec<Item>),
    Matrix(Vec<Vec<Item>>),
    /// `a op b op c …` (`ops.len() == sides.len() - 1`) that has no reading as a value (an
    /// equation such as `2x + 3y = 6`, a false chain `2 = 3`), and which sides are a lone variable.
    Relation(Vec<Item>, Vec<Rel>, Vec<bool>),
    /// A relation read as a value, with the label it names if any: an assignment `x = 3`,
    /// `(p, q) = (3, 2)`, `AB = 4`, `x \in S`; an inequality on one variable as the interval of its
    /// solutions (`1 < x \le 2` is `x` labelling `(1, 2]`); a chain of equal constants
    /// (`\frac{6}{2} = 3`, no label). `raw` is the relation as written, when there is one.
    Labelled {
        label: Option<Box<Item>>,
        value: Box<Item>,
        raw: Option<Box<Item>>,
    },
    /// Readings of one answer that are all equal (the sides of `2\sqrt3 \approx 3.46`).
    Alt(Vec<Item>),
    /// `a : b : c`, three parts or more, scaled so that the first part is 1 (`a : b` is `a/b`).
    Ratio(Vec<Val>),
    /// A clock time `h:mm` or `h:mm:ss` (see [`Clock`]), with its reading as a ratio for the
    /// comparison against anything that is not a time (`7:32` = `\frac{7}{32}`).
    Time(Clock, Box<Item>),
}

/// A clock time: seconds past midnight modulo 12 hours, and `Some(pm)` when the half of the day
/// is known (an `am`/`pm` mark, or an hour of 0 or 13 to 23). Two times are equal when their
/// seconds are, and their halves when both are known (`4:30` = `4:30 pm` = `16:30` ≠ `4:30 am`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Clock {
    pub secs: u32,
    pub pm: Option<bool>,
}

impl Clock {
    pub fn same(self, other: Clock) -> bool {
        self.secs == other.secs && (self.pm.is_none() || other.pm.is_none() || self.pm == other.pm)
    }
}

pub type Res<T> = Result<T, ()>;

pub const GREEK: &[&str] = &[
    "alpha",
    "beta",
    "gamma",
    "delta",
    "epsilon",
    "varepsilon",
    "zeta",
    "eta",
    "theta",
    "vartheta",
    "iota",
    "kappa",
    "lambda",
    "mu",
    "nu",
    "xi",
    "rho",
    "sigma",
    "tau",
    "upsilon",
    "phi",
    "varphi",
    "chi",
    "psi",
    "omega",
    "Gamma",
    "Delta",
    "Theta",
    "Lambda",
    "Xi",
    "Sigma",
    "Phi",
    "Psi",
    "Omega",
    "ell",
];
