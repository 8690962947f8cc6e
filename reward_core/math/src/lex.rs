//! Answer extraction and the LaTeX tokenizer (one pass, no recursion).
//!
//! The tokenizer folds away what carries no value (`\left`, `\right`, spacing, `$`, `\displaystyle`,
//! `\text{}`/`\mathrm{}`/`\mbox{}` wrappers, degree marks, unit words, `\$`), case-folds letters, joins
//! thousands separators (`10,\!080` outside brackets) and maps synonyms (`\dfrac` → `\frac`, `\cdot` →
//! `*`, `\leq` → `\le`, ...). Its output is also the normalised text of an answer ([`render`]).

use std::fmt::Write as _;

use crate::types::{Tok, GREEK};

/// Most bytes looked at in one answer; longer answers are judged on their text alone.
pub const MAX_LEN: usize = 1 << 20;

/// Words dropped as units (with a following `^2`/`^3`), from MATH answers such as `15\mbox{ cm}^2`.
const UNITS: &[&str] = &[
    "cm",
    "mm",
    "km",
    "m",
    "meter",
    "meters",
    "metre",
    "metres",
    "centimeters",
    "inch",
    "inches",
    "in",
    "ft",
    "foot",
    "feet",
    "yd",
    "yard",
    "yards",
    "mile",
    "miles",
    "mph",
    "cents",
    "cent",
    "dollar",
    "dollars",
    "degree",
    "degrees",
    "deg",
    "unit",
    "units",
    "sq",
    "square",
    "cubic",
    "hour",
    "hours",
    "hr",
    "minute",
    "minutes",
    "min",
    "second",
    "seconds",
    "sec",
    "day",
    "days",
    "week",
    "weeks",
    "year",
    "years",
    "kg",
    "g",
    "gram",
    "grams",
    "pound",
    "pounds",
    "lb",
    "lbs",
    "ounce",
    "ounces",
    "oz",
    "liter",
    "liters",
    "ml",
    "gallon",
    "gallons",
    "points",
    "point",
    "people",
    "students",
    "ways",
    "times",
    "percent",
];

/// Environments that only lay out display math (as `braced_word` reads their names).
/// Whether `name` (the letters of an environment's name) is a display environment, which only
/// delimits its lines.
pub(crate) fn is_display_env(name: &str) -> bool {
    DISPLAY_ENVS.contains(&name)
}

const DISPLAY_ENVS: &[&str] = &[
    "align", "aligned", "equation", "eqnarray", "gather", "gathered", "multline", "split",
];

/// Commands that wrap text (their argument's letters form words).
const TEXT_CMDS: &[&str] = &[
    "text",
    "textbf",
    "textit",
    "textrm",
    "textsf",
    "texttt",
    "mathrm",
    "mathbf",
    "mathit",
    "mathsf",
    "mathtt",
    "mbox",
    "hbox",
    "operatorname",
    "textnormal",
    "boldsymbol",
    "bm",
];

/// Commands dropped with no trace.
const DROP_CMDS: &[&str] = &[
    "left",
    "right",
    "big",
    "Big",
    "bigg",
    "Bigg",
    "bigl",
    "bigr",
    "Bigl",
    "Bigr",
    "biggl",
    "biggr",
    "displaystyle",
    "textstyle",
    "scriptstyle",
    "limits",
    "nolimits",
    "quad",
    "qquad",
    "enspace",
    "thinspace",
    "negthinspace",
    "hspace",
    "vspace",
    "phantom",
    "mathrel",
    "mathop",
    "middle",
    "rm",
    "it",
    "bf",
    "space",
];

/// Commands the parser reads, and others that are known as they are (never split by
/// [`known_command`]'s caller: `\neg` is not `\ne g`).
const KNOWN: &[&str] = &[
    "Im",
    "Leftarrow",
    "Pr",
    "Re",
    "Rightarrow",
    "angle",
    "approx",
    "arc",
    "arccos",
    "arcsin",
    "arctan",
    "arg",
    "bar",
    "begin",
    "bigcap",
    "bigcup",
    "binom",
    "bmod",
    "boxed",
    "bullet",
    "cap",
    "cdotp",
    "cdots",
    "choose",
    "circ",
    "colon",
    "cong",
    "cos",
    "cosh",
    "cot",
    "csc",
    "cup",
    "dagger",
    "ddots",
    "deg",
    "degree",
    "det",
    "dim",
    "dots",
    "ell",
    "emptyset",
    "end",
    "equiv",
    "exists",
    "exp",
    "fbox",
    "forall",
    "frac",
    "gcd",
    "ge",
    "hat",
    "hline",
    "hom",
    "iff",
    "iint",
    "imath",
    "implies",
    "in",
    "inf",
    "infty",
    "int",
    "jmath",
    "ker",
    "land",
    "langle",
    "lceil",
    "lcm",
    "ldots",
    "le",
    "leftarrow",
    "leftrightarrow",
    "lfloor",
    "lg",
    "lim",
    "liminf",
    "limsup",
    "ln",
    "lnot",
    "log",
    "lor",
    "mathbb",
    "mathcal",
    "mathfrak",
    "mathscr",
    "max",
    "measuredangle",
    "min",
    "mod",
    "mp",
    "nabla",
    "ne",
    "neg",
    "nmid",
    "not",
    "notin",
    "odot",
    "oint",
    "oplus",
    "otimes",
    "over",
    "overline",
    "overrightarrow",
    "parallel",
    "partial",
    "perp",
    "pi",
    "pm",
    "pmod",
    "prime",
    "prod",
    "propto",
    "rangle",
    "rceil",
    "rfloor",
    "rightarrow",
    "sec",
    "setminus",
    "sim",
    "simeq",
    "sin",
    "sinh",
    "sqrt",
    "star",
    "subset",
    "subseteq",
    "sum",
    "sup",
    "supset",
    "tan",
    "tanh",
    "thickapprox",
    "tilde",
    "to",
    "triangle",
    "underline",
    "vdots",
    "vec",
    "vee",
    "wedge",
    "widearc",
    "widehat",
    "wp",
];

/// A set of command names, looked up in a few integer compares: a name of up to 8 bytes is one
/// `u64` (every command of an answer is looked up, so an answer of 25K commands stays fast).
#[derive(Debug)]
struct Names {
    short: Vec<u64>,
    long: Vec<&'static str>,
}

impl Names {
    fn new(lists: &[&[&'static str]]) -> Names {
        let mut short: Vec<u64> = Vec::new();
        let mut long: Vec<&'static str> = Vec::new();
        for name in lists.iter().flat_map(|l| l.iter()) {
            match Self::key(name) {
                Some(k) => short.push(k),
                None => long.push(name),
            }
        }
        short.sort_unstable();
        long.sort_unstable();
        Names { short, long }
    }
    fn key(name: &str) -> Option<u64> {
        (name.len() <= 8).then(|| {
            name.bytes()
                .fold(u64::from(name.len() as u8), |k, b| (k << 8) | u64::from(b))
        })
    }
    fn has(&self, name: &str) -> bool {
        match Self::key(name) {
            Some(k) => self.short.binary_search(&k).is_ok(),
            None => self.long.binary_search(&name).is_ok(),
        }
    }
}

/// The names [`synonym`] maps (kept in step with it by a test).
pub(crate) const SYNONYMS: &[&str] = &[
    "dfrac",
    "tfrac",
    "cfrac",
    "dbinom",
    "tbinom",
    "cdot",
    "times",
    "ast",
    "div",
    "le",
    "leq",
    "leqslant",
    "leqq",
    "ge",
    "geq",
    "geqslant",
    "geqq",
    "ne",
    "neq",
    "lt",
    "gt",
    "infty",
    "infinity",
    "inf",
    "lbrace",
    "rbrace",
    "mid",
    "vert",
    "lvert",
    "rvert",
    "lparen",
    "rparen",
    "lbrack",
    "rbrack",
    "varpi",
    "imath",
    "cup",
    "union",
    "emptyset",
    "varnothing",
    "colon",
];

fn names(cell: &'static std::sync::OnceLock<Names>, lists: &[&[&'static str]]) -> &'static Names {
    cell.get_or_init(|| Names::new(lists))
}

fn is_text_cmd(name: &str) -> bool {
    static SET: std::sync::OnceLock<Names> = std::sync::OnceLock::new();
    names(&SET, &[TEXT_CMDS]).has(name)
}

fn is_drop_cmd(name: &str) -> bool {
    static SET: std::sync::OnceLock<Names> = std::sync::OnceLock::new();
    names(&SET, &[DROP_CMDS]).has(name)
}

/// Whether `\name` is a command this verifier knows (so it is read whole, not split).
fn known_command(name: &str) -> bool {
    static SET: std::sync::OnceLock<Names> = std::sync::OnceLock::new();
    names(&SET, &[KNOWN, TEXT_CMDS, DROP_CMDS, GREEK, SYNONYMS]).has(name)
}

pub(crate) fn synonym(name: &str) -> Option<Tok> {
    let t = |s: &str| Some(Tok::Cmd(s.to_owned()));
    match name {
        "dfrac" | "tfrac" | "cfrac" => t("frac"),
        "dbinom" | "tbinom" => t("binom"),
        "cdot" | "times" | "ast" => Some(Tok::P('*')),
        "div" => Some(Tok::P('/')),
        "le" | "leq" | "leqslant" | "leqq" => t("le"),
        "ge" | "geq" | "geqslant" | "geqq" => t("ge"),
        "ne" | "neq" => t("ne"),
        "lt" => Some(Tok::P('<')),
        "gt" => Some(Tok::P('>')),
        "infty" | "infinity" | "inf" => t("infty"),
        "lbrace" => Some(Tok::SetOpen),
        "rbrace" => Some(Tok::SetClose),
        "mid" | "vert" | "lvert" | "rvert" => Some(Tok::P('|')),
        "lparen" => Some(Tok::P('(')),
        "rparen" => Some(Tok::P(')')),
        "lbrack" => Some(Tok::P('[')),
        "rbrack" => Some(Tok::P(']')),
        "varpi" => t("pi"),
        "imath" => Some(Tok::Letter('i')),
        "cup" | "union" => t("cup"),
        "emptyset" | "varnothing" => t("emptyset"),
        "colon" => Some(Tok::P(':')),
        _ => None,
    }
}

/// The last `\boxed{…}` (or `\fbox{…}`) content of `text`, braces matched.
pub fn last_boxed(text: &str) -> Option<&str> {
    let at = text
        .rfind("\\boxed")
        .map(|i| (i, 6))
        .or_else(|| text.rfind("\\fbox").map(|i| (i, 5)));
    let (i, n) = at?;
    let rest = &text[i + n..];
    let trimmed = rest.trim_start();
    if let Some(inner) = trimmed.strip_prefix('{') {
        let mut depth = 1usize;
        for (j, b) in inner.bytes().enumerate() {
            match b {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(&inner[..j]);
                    }
                }
                _ => {}
            }
        }
        return None; // unbalanced
    }
    // `\boxed 5`: up to the next space or `$`.
    let end = trimmed
        .find(|c: char| c.is_whitespace() || c == '$')
        .unwrap_or(trimmed.len());
    (end > 0).then(|| &trimmed[..end])
}

/// Tokens of one answer (see the module docs). Never fails: unknown characters become `P(c)`.
pub fn tokenize(src: &str) -> Vec<Tok> {
    let src = if src.len() > MAX_LEN {
        let mut end = MAX_LEN;
        while !src.is_char_boundary(end) {
            end -= 1;
        }
        &src[..end]
    } else {
        src
    };
    let mut lexer = Lexer::new(src);
    while lexer.i < lexer.chars.len() {
        lexer.step();
    }
    lexer.flush_word();
    drop_units(lexer.out)
}

/// The tokenizer's state: one forward pass over the characters of an answer.
struct Lexer {
    chars: Vec<char>,
    /// The next character to read.
    i: usize,
    out: Vec<Tok>,
    /// Brace kinds: true = a text group (its braces are not emitted).
    braces: Vec<bool>,
    /// `(` `[` `\{` nesting, for thousands separators.
    bracket_depth: usize,
    /// The word being read inside `\text{…}`.
    word: String,
    /// `}` to drop after `^{\circ}`.
    skip_close: usize,
    /// Open `\begin{…}` environments.
    envs: usize,
}

impl Lexer {
    fn new(src: &str) -> Lexer {
        let chars: Vec<char> = src.chars().collect();
        let out = Vec::with_capacity(chars.len() / 2 + 1);
        Lexer {
            chars,
            i: 0,
            out,
            braces: Vec::new(),
            bracket_depth: 0,
            word: String::new(),
            skip_close: 0,
            envs: 0,
        }
    }

    fn in_text(&self) -> bool {
        self.braces.last().copied().unwrap_or(false)
    }

    fn flush_word(&mut self) {
        if !self.word.is_empty() {
            let w = std::mem::take(&mut self.word);
            push_word(&mut self.out, w);
        }
    }

    /// Reads what starts at the next character: a letter of a `\text{}` word, a number, a
    /// command, a brace, or a symbol.
    fn step(&mut self) {
        let c = self.chars[self.i];
        // A word character: one that lower-cases to letters only (`İ` → `i̇` has a combining mark,
        // which would not read back as part of the word), and not `π` (the constant).
        let wordy = |c: char| c.is_alphabetic() && c.to_lowercase().all(char::is_alphabetic);
        if self.in_text() && wordy(c) && !matches!(c, 'π' | 'Π') {
            self.word.extend(c.to_lowercase());
            self.i += 1;
            return;
        }
        self.flush_word();
        match c {
            _ if c.is_whitespace() || c == '$' || c == '~' => self.i += 1,
            '0'..='9' | '.' => self.number(c),
            '\\' => self.backslash(),
            '{' if !self.in_text() && comma_group(&self.chars, self.i).is_some() => {
                // `6,8{,}10`: `{,}` not between thousands is a comma
                self.i = comma_group(&self.chars, self.i).unwrap_or(self.i + 1);
                push_comma(&mut self.out);
            }
            '{' => {
                if self.in_text() {
                    self.braces.push(true);
                } else {
                    self.braces.push(false);
                    self.out.push(Tok::P('{'));
                }
                self.i += 1;
            }
            '}' => self.close_brace(),
            _ => self.symbol(c),
        }
    }

    /// A number (`12`, `3.5`, `.5`, `10,080`), and the fraction of a mixed number after it.
    fn number(&mut self, c: char) {
        if c == '.' && !self.chars.get(self.i + 1).is_some_and(char::is_ascii_digit) {
            self.i += 1; // a full stop
            return;
        }
        let mut int = String::new();
        while self.i < self.chars.len() && self.chars[self.i].is_ascii_digit() {
            int.push(self.chars[self.i]);
            self.i += 1;
        }
        let mut frac = String::new();
        let mut point = false;
        if self.i < self.chars.len()
            && self.chars[self.i] == '.'
            && self.chars.get(self.i + 1).is_some_and(char::is_ascii_digit)
        {
            point = true;
            self.i += 1;
            while self.i < self.chars.len() && self.chars[self.i].is_ascii_digit() {
                frac.push(self.chars[self.i]);
                self.i += 1;
            }
        }
        // Thousands separators: `12,345` / `12,\!345` / `12{,}345` outside brackets, after a
        // leading group of one to three digits, not in a denominator (`3/5,117/125` lists).
        let grouped = int.len() <= 3 && self.out.last() != Some(&Tok::P('/'));
        while !point && self.bracket_depth == 0 && grouped {
            let Some(j) = thousands_group(&self.chars, self.i) else {
                break;
            };
            int.extend(&self.chars[j..j + 3]);
            self.i = j + 3;
            if self.i < self.chars.len()
                && self.chars[self.i] == '.'
                && self.chars.get(self.i + 1).is_some_and(char::is_ascii_digit)
            {
                point = true;
                self.i += 1;
                while self.i < self.chars.len() && self.chars[self.i].is_ascii_digit() {
                    frac.push(self.chars[self.i]);
                    self.i += 1;
                }
            }
        }
        let whole = !point && !matches!(self.out.last(), Some(Tok::P('/' | '^' | '_' | '.')));
        self.out.push(Tok::Num { int, frac, point });
        // `2 2/3` is a mixed number, written as `2\frac{2}{3}` (never `2 · 2/3`)
        if let Some((p, q, end)) = whole.then(|| mixed_fraction(&self.chars, self.i)).flatten() {
            self.out.push(Tok::Cmd("frac".into()));
            for part in [p, q] {
                self.out.push(Tok::P('{'));
                self.out.push(Tok::Num {
                    int: part,
                    frac: String::new(),
                    point: false,
                });
                self.out.push(Tok::P('}'));
            }
            self.i = end;
        }
    }

    /// After a backslash: an escaped character (`\{`, `\\`, `\%`, spacing) or a command.
    fn backslash(&mut self) {
        self.i += 1;
        let Some(&d) = self.chars.get(self.i) else {
            return;
        };
        if !d.is_ascii_alphabetic() {
            if d.is_ascii_digit() {
                // a stray `\` before a digit: the digit stays; in a matrix, a row ends
                // (`\begin{pmatrix}1&0\0&1\end{pmatrix}` lost a backslash)
                if self.envs > 0 {
                    self.out.push(Tok::RowSep);
                }
                return;
            }
            self.i += 1;
            match d {
                '{' => {
                    self.bracket_depth += 1;
                    self.out.push(Tok::SetOpen);
                }
                '}' => {
                    self.bracket_depth = self.bracket_depth.saturating_sub(1);
                    self.out.push(Tok::SetClose);
                }
                '\\' => self.out.push(Tok::RowSep),
                '%' => self.out.push(Tok::Percent),
                '|' => self.out.push(Tok::P('|')),
                // `\,` `\!` `\;` `\:` `\ ` `\$` `\[` `\]` `\(` `\)` and the rest: spacing/delimiters
                _ => {}
            }
            return;
        }
        let start = self.i;
        while self.i < self.chars.len() && self.chars[self.i].is_ascii_alphabetic() {
            self.i += 1;
        }
        let mut name: String = self.chars[start..self.i].iter().collect();
        if !known_command(&name) {
            // `\pia^2`, `\sinx`, `\leqg(x)`: a known command glued to the letters after it
            if let Some(k) = (2..name.len()).rev().find(|&k| known_command(&name[..k])) {
                name.truncate(k);
                self.i = start + k;
            }
        }
        self.command(name);
    }

    /// A command by name: environments, text wrappers, dropped commands, degrees, synonyms.
    fn command(&mut self, name: String) {
        if name == "begin" || name == "end" {
            let env = braced_word(&self.chars, &mut self.i);
            // display environments (`align*`, `equation`) only delimit: their lines and
            // `&` marks are read by the caller (`math::last_line`)
            if DISPLAY_ENVS.contains(&env.as_str()) {
                return;
            }
            self.envs = if name == "begin" {
                self.envs + 1
            } else {
                self.envs.saturating_sub(1)
            };
            self.out.push(if name == "begin" {
                Tok::Begin(env)
            } else {
                Tok::End(env)
            });
            return;
        }
        if is_text_cmd(&name) {
            let mut j = self.i;
            while j < self.chars.len() && self.chars[j].is_whitespace() {
                j += 1;
            }
            if j < self.chars.len() && self.chars[j] == '{' {
                self.braces.push(true);
                self.i = j + 1;
            }
            return;
        }
        if is_drop_cmd(&name) {
            return;
        }
        if name == "circ" || name == "degree" {
            // `^\circ`, `^{\circ}`: drop the power too.
            if self.out.last() == Some(&Tok::P('^')) {
                self.out.pop();
            } else if self.out.len() >= 2
                && self.out[self.out.len() - 1] == Tok::P('{')
                && self.out[self.out.len() - 2] == Tok::P('^')
            {
                self.out.truncate(self.out.len() - 2);
                self.braces.pop();
                self.skip_close += 1;
            }
            return;
        }
        if name == "boxed" || name == "fbox" {
            return; // an inner \boxed is transparent
        }
        self.out.push(synonym(&name).unwrap_or(Tok::Cmd(name)));
    }

    fn close_brace(&mut self) {
        self.i += 1;
        if self.skip_close > 0 {
            self.skip_close -= 1;
            return;
        }
        match self.braces.pop() {
            Some(true) => {}
            // `{ or }` is `{,}`: a comma, as it reads back
            _ if self.out.ends_with(&[Tok::P('{'), Tok::P(',')]) => {
                self.out.truncate(self.out.len() - 2);
                push_comma(&mut self.out);
            }
            _ => self.out.push(Tok::P('}')),
        }
    }

    /// Any other character: a symbol, a relation, a separator, a letter, punctuation.
    fn symbol(&mut self, c: char) {
        if let Some(t) = symbol_tok(c) {
            self.out.push(t);
            self.i += 1;
            return;
        }
        let chars = &self.chars;
        let i = self.i;
        match c {
            '°' => self.i += 1,
            // ASCII relations: `<=`, `>=`, `!=` (not after a number: `5!=120` is a factorial)
            '<' | '>' | '!'
                if chars.get(i + 1) == Some(&'=')
                    && !(c == '!'
                        && matches!(self.out.last(), Some(Tok::Num { .. } | Tok::P(')')))) =>
            {
                let name = match c {
                    '<' => "le",
                    '>' => "ge",
                    _ => "ne",
                };
                self.out.push(Tok::Cmd(name.into()));
                self.i += 2;
            }
            ',' => {
                push_comma(&mut self.out);
                self.i += 1;
            }
            '&' if self.envs == 0 => self.i += 1, // an alignment mark outside a matrix
            _ if c.is_ascii_alphabetic() && bare_join_word(chars, i).is_some() => {
                // `19, 46, and 82`, `(11,7)or(7,11)`: a bare `and` / `or` separates items
                self.i += bare_join_word(chars, i).unwrap_or(1);
                push_comma(&mut self.out);
            }
            _ if c.is_ascii_alphabetic() && bare_command(chars, i).is_some() => {
                // `sqrt(2)`, `2pi`, `sin x`: a function name written without its backslash
                let (name, len) = bare_command(chars, i).unwrap_or(("pi", 1));
                self.out.push(Tok::Cmd(name.into()));
                self.i += len;
            }
            _ if !c.is_ascii() && greek_name(c).is_some() => {
                // `β` is `\beta` (the constant `π` is read above)
                self.out
                    .push(Tok::Cmd(greek_name(c).unwrap_or("alpha").into()));
                self.i += 1;
            }
            _ if c.is_alphabetic() => {
                for l in c.to_lowercase() {
                    // `Π` lower-cases to `π`, which is the constant (as a bare `π` is)
                    self.out.push(match l {
                        'π' => Tok::Cmd("pi".into()),
                        _ if l.is_alphabetic() => Tok::Letter(l),
                        _ => Tok::P(l), // a combining mark from lower-casing (`İ` → `i` + U+0307)
                    });
                }
                self.i += 1;
            }
            _ => {
                match c {
                    '(' | '[' => self.bracket_depth += 1,
                    ')' | ']' => self.bracket_depth = self.bracket_depth.saturating_sub(1),
                    _ => {}
                }
                self.out.push(Tok::P(c));
                self.i += 1;
            }
        }
    }
}

/// The token of a character that stands for one (`%`, `π`, `∞`, `√`, `−`, `×`, `≤`, `±`, `÷`).
fn symbol_tok(c: char) -> Option<Tok> {
    let cmd = |name: &str| Some(Tok::Cmd(name.into()));
    match c {
        '%' => Some(Tok::Percent),
        'π' => cmd("pi"),
        '∞' => cmd("infty"),
        '√' => cmd("sqrt"),
        '−' | '–' => Some(Tok::P('-')),
        '·' | '×' => Some(Tok::P('*')),
        '÷' => Some(Tok::P('/')),
        '≤' => cmd("le"),
        '≥' => cmd("ge"),
        '≠' => cmd("ne"),
        '≈' => cmd("approx"),
        '∈' => cmd("in"),
        '∪' => cmd("cup"),
        '±' => cmd("pm"),
        '∓' => cmd("mp"),
        _ => None,
    }
}

/// A function or constant written as a bare word at `i` (`sqrt`, `pi`, `sin`, `inf`): the command
/// it names and the word's length. Only a word of its own (no letter around it).
fn bare_command(chars: &[char], i: usize) -> Option<(&'static str, usize)> {
    const NAMES: [(&str, &str); 19] = [
        ("arcsin", "arcsin"),
        ("arccos", "arccos"),
        ("arctan", "arctan"),
        ("infinity", "infty"),
        ("infty", "infty"),
        ("sqrt", "sqrt"),
        ("frac", "frac"),
        ("inf", "infty"),
        ("sin", "sin"),
        ("cos", "cos"),
        ("tan", "tan"),
        ("cot", "cot"),
        ("sec", "sec"),
        ("csc", "csc"),
        ("log", "log"),
        ("exp", "exp"),
        ("ln", "ln"),
        ("pi", "pi"),
        ("sum", "sum"),
    ];
    let letter = |k: usize| chars.get(k).is_some_and(|c| c.is_alphabetic());
    if i > 0 && letter(i - 1) {
        return None;
    }
    let mut end = i;
    while letter(end) {
        end += 1;
    }
    let word: String = chars[i..end].iter().collect();
    NAMES
        .iter()
        .find(|(w, _)| *w == word)
        .map(|(_, cmd)| (*cmd, end - i))
}

/// The command of a Greek letter (`β` → `beta`, `Δ` → `Delta`), but not `π` (the constant).
fn greek_name(c: char) -> Option<&'static str> {
    const LOWER: &str = "αβγδεζηθικλμνξοπρστυφχψω";
    const NAMES: [&str; 24] = [
        "alpha", "beta", "gamma", "delta", "epsilon", "zeta", "eta", "theta", "iota", "kappa",
        "lambda", "mu", "nu", "xi", "omicron", "pi", "rho", "sigma", "tau", "upsilon", "phi",
        "chi", "psi", "omega",
    ];
    let lower = c.to_lowercase().next()?;
    let k = LOWER.chars().position(|g| g == lower)?;
    if lower == 'π' || lower == 'ο' {
        return None;
    }
    if c == lower {
        return Some(NAMES[k]);
    }
    // capitals with a command of their own (`\Delta`); others are the small letter
    Some(match lower {
        'γ' => "Gamma",
        'δ' => "Delta",
        'θ' => "Theta",
        'λ' => "Lambda",
        'ξ' => "Xi",
        'σ' => "Sigma",
        'φ' => "Phi",
        'ψ' => "Psi",
        'ω' => "Omega",
        _ => NAMES[k],
    })
}

/// A comma, unless the tokens end with one or have none (`1, and 2` is `1, 2`).
/// The fraction of a mixed number written in plain text after its whole part: spaces, then
/// `p/q` of plain digits that no other digit, point, power or fraction continues (`2 2/3`); the
/// numerator, the denominator and where it ends.
fn mixed_fraction(chars: &[char], i: usize) -> Option<(String, String, usize)> {
    let mut j = i;
    while chars.get(j).is_some_and(|c| *c == ' ' || *c == '\t') {
        j += 1;
    }
    if j == i {
        return None;
    }
    let digits = |from: usize| {
        let k = (from..chars.len().min(from + 18))
            .find(|&k| !chars[k].is_ascii_digit())
            .unwrap_or(chars.len().min(from + 18));
        (k > from).then(|| (chars[from..k].iter().collect::<String>(), k))
    };
    let (p, k) = digits(j)?;
    if chars.get(k) != Some(&'/') {
        return None;
    }
    let (q, end) = digits(k + 1)?;
    if chars
        .get(end)
        .is_some_and(|c| c.is_ascii_digit() || matches!(c, '.' | '^' | '/' | '_'))
        || q.trim_start_matches('0').is_empty()
    {
        return None;
    }
    Some((p, q, end))
}

fn push_comma(out: &mut Vec<Tok>) {
    // (a unit mark is dropped later: what counts is the token before it)
    if !matches!(
        out.iter().rfind(|t| **t != Tok::Unit),
        None | Some(Tok::P(','))
    ) {
        out.push(Tok::P(','));
    }
}

/// The length of a bare `and` / `or` (any case) at `i`, a word of its own (no letter around it).
fn bare_join_word(chars: &[char], i: usize) -> Option<usize> {
    let letter = |k: usize| chars.get(k).is_some_and(|c| c.is_alphabetic());
    if i > 0 && letter(i - 1) {
        return None;
    }
    for w in ["and", "or"] {
        let n = w.len();
        let hit = chars.get(i..i + n).is_some_and(|cs| {
            cs.iter()
                .zip(w.chars())
                .all(|(a, b)| a.to_ascii_lowercase() == b)
        });
        if hit && !letter(i + n) {
            return Some(n);
        }
    }
    None
}

/// A finished text word: units become a `Unit` mark (dropped with their `^2` by [`drop_units`]),
/// `and`/`or` become commas.
fn push_word(out: &mut Vec<Tok>, w: String) {
    if UNITS.contains(&w.as_str()) {
        out.push(Tok::Unit);
        return;
    }
    match w.as_str() {
        "and" | "or" => push_comma(out),
        _ if w.chars().count() == 1 => out.extend(w.chars().map(|c| match greek_name(c) {
            Some(g) if !c.is_ascii() => Tok::Cmd(g.into()),
            _ => Tok::Letter(c),
        })),
        _ => out.push(Tok::Word(w)),
    }
}

/// Removes the `Unit` marks and a power right after one (`\mbox{ cm}^2`, `\text{ft}^{3}`).
fn drop_units(mut toks: Vec<Tok>) -> Vec<Tok> {
    strip_answer_prefix(&mut toks);
    if toks.contains(&Tok::Unit) {
        let mut out = Vec::with_capacity(toks.len());
        let mut i = 0;
        while i < toks.len() {
            if toks[i] == Tok::Unit {
                i += 1;
                let is_int = |t: Option<&Tok>| matches!(t, Some(Tok::Num { point: false, .. }));
                if toks.get(i) == Some(&Tok::P('^')) {
                    if is_int(toks.get(i + 1)) {
                        i += 2;
                    } else if toks.get(i + 1) == Some(&Tok::P('{'))
                        && is_int(toks.get(i + 2))
                        && toks.get(i + 3) == Some(&Tok::P('}'))
                    {
                        i += 4;
                    }
                }
                continue;
            }
            out.push(toks[i].clone());
            i += 1;
        }
        toks = out;
    }
    // after the marked units, so `12 cm\\mbox{ cm}` loses both
    trailing_bare_unit(&mut toks);
    trailing_text_words(&mut toks);
    // a comma left first (`Answer: , 5`) separates nothing
    let lead = toks.iter().take_while(|t| **t == Tok::P(',')).count();
    toks.drain(..lead);
    // `&` outside a matrix (its `\begin` may have gone with an answer prefix) aligns nothing
    if toks.contains(&Tok::P('&')) {
        let mut depth = 0usize;
        toks.retain(|t| {
            match t {
                Tok::Begin(_) => depth += 1,
                Tok::End(_) => depth = depth.saturating_sub(1),
                Tok::P('&') => return depth > 0,
                _ => {}
            }
            true
        });
    }
    toks
}

/// `7 \text{ apples}`, `(3, 4) \text{ units}`: words of a `\text{}` at the end, after a value,
/// name what was counted (any word, as the unit rules of Math-Verify and Qwen's grader read it).
fn trailing_text_words(toks: &mut Vec<Tok>) {
    let mut start = toks.len();
    while start > 0 && matches!(toks[start - 1], Tok::Word(_)) {
        start -= 1;
    }
    // (an `am` / `pm` after a clock time is part of it: `3:00 \text{ PM}`)
    let clock_mark = matches!(&toks[start..], [Tok::Word(w)] if w == "am" || w == "pm")
        && start >= 2
        && toks[start - 2] == Tok::P(':');
    if start < toks.len()
        && start > 0
        && !clock_mark
        && matches!(toks[start - 1], Tok::Num { .. } | Tok::P(')' | ']' | '}'))
    {
        toks.truncate(start);
    }
}

/// `The answer is 5`, `Answer: 5`, `\\text{The final answer is } 5`: everything up to the last
/// "answer is" / "answer:" is prose.
fn strip_answer_prefix(toks: &mut Vec<Tok>) {
    const ANSWER: [char; 6] = ['a', 'n', 's', 'w', 'e', 'r'];
    let letters_at = |i: usize, w: &[char]| {
        toks.get(i..i + w.len())
            .is_some_and(|ts| ts.iter().zip(w).all(|(t, c)| *t == Tok::Letter(*c)))
    };
    let mut cut = None;
    for i in 0..toks.len() {
        // the word "answer" (letters or a \text word), then "is" or ":"
        let after = if letters_at(i, &ANSWER) {
            i + ANSWER.len()
        } else if matches!(&toks[i], Tok::Word(w) if w == "answer") {
            i + 1
        } else {
            continue;
        };
        if toks.get(after) == Some(&Tok::P(':')) {
            cut = Some(after + 1);
        } else if letters_at(after, &['i', 's']) {
            cut = Some(after + 2);
        } else if matches!(toks.get(after), Some(Tok::Word(w)) if w == "is") {
            cut = Some(after + 1);
        }
    }
    if let Some(c) = cut {
        toks.drain(..c);
    }
}

/// A unit written in bare letters at the end (`5.4 cents`, `\\frac{270}7 degrees`, `864 inches^2`)
/// after a number or a group: marked as a unit like a `\\text{}` one.
fn trailing_bare_unit(toks: &mut Vec<Tok>) {
    let mut end = toks.len();
    // an optional `^2` / `^{2}` after the unit
    if end >= 2
        && matches!(toks[end - 1], Tok::Num { point: false, .. })
        && toks[end - 2] == Tok::P('^')
    {
        end -= 2;
    } else if end >= 4
        && toks[end - 1] == Tok::P('}')
        && matches!(toks[end - 2], Tok::Num { point: false, .. })
        && toks[end - 3] == Tok::P('{')
        && toks[end - 4] == Tok::P('^')
    {
        end -= 4;
    }
    // `440{cm}^2`: the unit may be in braces
    let braced = end >= 1 && toks[end - 1] == Tok::P('}');
    let letters_end = if braced { end - 1 } else { end };
    let mut start = letters_end;
    while start > 0 && matches!(toks[start - 1], Tok::Letter(_)) {
        start -= 1;
    }
    if letters_end - start < 2 || start == 0 {
        return;
    }
    let letters = start;
    if braced {
        if toks[start - 1] != Tok::P('{') || start < 2 {
            return;
        }
        start -= 1;
    }
    if !matches!(toks[start - 1], Tok::Num { .. } | Tok::P('}' | ')')) {
        return;
    }
    let word: String = toks[letters..letters_end]
        .iter()
        .filter_map(|t| {
            if let Tok::Letter(c) = t {
                Some(*c)
            } else {
                None
            }
        })
        .collect();
    if word != "in" && UNITS.contains(&word.as_str()) {
        toks.truncate(start); // the unit and its power
    }
}

/// `{,}` or `{ , }` at `i`: the index after it.
fn comma_group(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    let eat = |c: char, j: &mut usize| {
        while chars.get(*j) == Some(&' ') {
            *j += 1;
        }
        let hit = chars.get(*j) == Some(&c);
        *j += 1;
        hit
    };
    (eat('{', &mut j) && eat(',', &mut j) && eat('}', &mut j)).then_some(j)
}

/// `, ddd` right after an integer at `i` (no space unless `\!`), returning the index of the digits.
fn thousands_group(chars: &[char], i: usize) -> Option<usize> {
    let mut j = i;
    if let Some(k) = comma_group(chars, j).filter(|_| chars.get(j) == Some(&'{')) {
        j = k;
    } else if chars.get(j) == Some(&',') {
        j += 1;
    } else {
        return None;
    }
    if chars.get(j) == Some(&'\\') && chars.get(j + 1) == Some(&'!') {
        j += 2;
        while chars.get(j).is_some_and(|c| *c == ' ') {
            j += 1;
        }
    }
    let digits = (0..3).all(|k| chars.get(j + k).is_some_and(char::is_ascii_digit));
    let after = chars.get(j + 3).is_some_and(char::is_ascii_digit);
    (digits && !after).then_some(j)
}

/// `{name}` after `\begin`/`\end` (empty if absent).
fn braced_word(chars: &[char], i: &mut usize) -> String {
    let mut j = *i;
    while j < chars.len() && chars[j].is_whitespace() {
        j += 1;
    }
    if chars.get(j) != Some(&'{') {
        return String::new();
    }
    let start = j + 1;
    let mut k = start;
    while k < chars.len() && chars[k] != '}' && k - start < 32 {
        k += 1;
    }
    if chars.get(k) != Some(&'}') {
        return String::new();
    }
    *i = k + 1;
    chars[start..k]
        .iter()
        .filter(|c| c.is_ascii_alphabetic())
        .collect()
}

/// The tokens as canonical LaTeX text; `tokenize(render(t)) == t` for tokenizer output.
pub fn render(toks: &[Tok]) -> String {
    let mut s = String::new();
    let mut prev_num = false;
    for t in toks {
        let is_num = matches!(t, Tok::Num { .. });
        match t {
            Tok::Num { int, frac, point } => {
                // (a thin space: a plain one before `p/q` would read back as a mixed number)
                if prev_num {
                    s.push_str("\\,");
                }
                s.push_str(if int.is_empty() { "0" } else { int });
                if *point {
                    s.push('.');
                    s.push_str(frac);
                }
            }
            Tok::Letter(c) => s.push(*c),
            Tok::Word(w) => {
                let _ = write!(s, "\\text{{{w}}}");
            }
            Tok::Cmd(c) => {
                let _ = write!(s, "\\{c} ");
            }
            Tok::P(',') => s.push_str(", "),
            Tok::P(c) => {
                // `<` `=` is two tokens: written together it would read back as `\le`; `####`
                // would read back as an answer phrase
                if (*c == '=' && s.ends_with(['<', '>', '!'])) || (*c == '#' && s.ends_with('#')) {
                    s.push(' ');
                }
                s.push(*c);
            }
            Tok::SetOpen => s.push_str("\\{"),
            Tok::SetClose => s.push_str("\\}"),
            // the space keeps `\\` + letters from reading back as a command (`\\boxed`)
            Tok::RowSep => s.push_str("\\\\ "),
            Tok::Percent => s.push_str("\\%"),
            Tok::Begin(e) => {
                let _ = write!(s, "\\begin{{{e}}}");
            }
            Tok::End(e) => {
                let _ = write!(s, "\\end{{{e}}}");
            }
            Tok::Unit => {}
        }
        prev_num = is_num;
    }
    keep_letters_apart(s)
}

/// Letters that would read back as a bare `and` / `or` or a bare command (`a n d`, `p i` are
/// products) get a space inside.
fn keep_letters_apart(s: String) -> String {
    if !s.bytes().any(|c| c.is_ascii_lowercase()) {
        return s;
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len() + 8);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        out.push(c);
        i += 1;
        if c == '\\' {
            let name_start = i;
            while i < chars.len() && chars[i].is_ascii_alphabetic() {
                out.push(chars[i]);
                i += 1;
            }
            // a word renders as `\text{word}`: its letters are no bare words
            if chars[name_start..i].iter().copied().eq("text".chars()) {
                while i < chars.len() && chars[i] != '}' {
                    out.push(chars[i]);
                    i += 1;
                }
            }
        } else if c.is_ascii_alphabetic()
            && (bare_join_word(&chars, i - 1).is_some()
                || bare_command(&chars, i - 1).is_some()
                || chars[i - 1..].starts_with(&['a', 'n', 's', 'w', 'e', 'r']))
        {
            out.push(' '); // (`answer` would read back as an answer phrase)
        }
    }
    out
}
