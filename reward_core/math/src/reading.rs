//! Relations read as values (see the module docs of `math`, "Relations and labels"): an
//! assignment is its value with a label, an inequality on one variable its interval of solutions,
//! a chain of equal constants its readings; a list of labelled values is one labelled tuple, or a
//! set of them (`p = 5, q = 2; p = 7, q = 2` is `(p, q)` labelling `\{(5, 2), (7, 2)\}`).
//!
//! Normalising every relation to (label, value) is what keeps equality transitive:
//! `-2 \le x \le 7`, `x \in [-2, 7]` and `[-2, 7]` all read as the value `[-2, 7]`.

use crate::cmp::item_eq;
use crate::num::{val_eq, Val, C};
use crate::types::{Item, Rel, Tok, GREEK};

/// Most items of a list that are grouped into labelled tuples (the grouping is quadratic).
const MAX_GROUPED: usize = 64;
/// A label, its value, and the relation it was read from.
type Entry = (Item, Item, Option<Box<Item>>);

/// Most tokens of a label (`m\angle ABC`, `|\overline{AB}|`).
const MAX_LABEL: usize = 24;

/// Whether a relation side can label a value (see [`label_tokens`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Label {
    No,
    Yes,
    /// A sum of names (`a + b`): a label, except of 0 (`x + y + z = 0` is an equation).
    Sum,
}

/// The reading of a relation as a value: (label, value), or None (an equation, a false chain).
pub fn reading(
    sides: &[Item],
    ops: &[Rel],
    lones: &[bool],
    kinds: &[Label],
) -> Option<(Option<Item>, Item)> {
    let n = sides.len();
    let labels: Vec<bool> = kinds.iter().map(|k| *k != Label::No).collect();
    if ops.iter().all(|o| matches!(o, Rel::Eq | Rel::Approx)) {
        let approx = ops.contains(&Rel::Approx);
        let last = &sides[n - 1];
        // `5x - 7y + 11z + 4 = 0`, `x + y + z = 0`: an equation in standard form, not a value
        let standard_form = n == 2 && is_zero(last) && matches!(kinds[0], Label::No | Label::Sum);
        // the label: a label-like first side (`f(3) = f(-3) + 6 = 8`), the first side of a
        // computation, a chain of three sides or more that ends in a constant
        // (`\pi r^2 = 16\pi \approx 50.27`, `z + \frac1z = \frac{-z^2}{z^2} = -1`),
        // or the last of a single `3 = x`. An equation with variables is not its right-hand
        // side: `2x + z = 5` has no label (a coefficient is no name), it is an equation, not `5`.
        let computation = n >= 3 && !constant(&sides[0]) && constant(last);
        let (label, lone, values): (Option<&Item>, bool, Vec<&Item>) = if standard_form {
            (None, false, sides.iter().collect())
        } else if labels[0] || computation {
            (Some(&sides[0]), lones[0], sides[1..].iter().collect())
        } else if n == 2 && labels[1] {
            (Some(&sides[1]), lones[1], vec![&sides[0]])
        } else {
            (None, false, sides.iter().collect())
        };
        // with no label, a chain has a value when its sides are constants (`\frac{6}{2} = 3`) or
        // all equal (`(a + 5)(b + 2) = ab + 2a + 5b + 10` states its last side)
        if label.is_none() && !values.iter().all(|v| constant(v)) {
            let last = values.last()?;
            return (!standard_form && values.iter().all(|v| item_eq(v, last)))
                .then(|| (None, (*last).clone()));
        }
        let value = chain_value(&values, approx, lone)?;
        // a label that is more than one variable (`AB`, `a + b`) only names a constant
        if label.is_some() && !lone && !constant(&value) {
            return None;
        }
        if label.is_none() && values.len() < 2 {
            return None;
        }
        // `(p, q) = (3, 2)`: as many labels as values
        if let (Some(Item::Tuple(l)), Item::Tuple(v)) = (label, &value) {
            if l.len() != v.len() {
                return None;
            }
        }
        return Some((label.cloned(), value));
    }
    match (ops, lones) {
        ([Rel::In], [true, false]) => Some((Some(sides[0].clone()), sides[1].clone())),
        ([Rel::Ne], [true, false]) if bound(&sides[1]) => Some((
            Some(sides[0].clone()),
            Item::Union(vec![
                interval(inf(-1.0), sides[1].clone(), false, false),
                interval(sides[1].clone(), inf(1.0), false, false),
            ]),
        )),
        _ => as_interval(sides, ops, lones),
    }
}

/// The value of the sides of an `=` / `≈` chain after its label. A chain that ends in a constant
/// is read as that final value, and also as each earlier side that agrees with it
/// (`\frac{22}{7} = 3.14`, `2\sqrt3 \approx 3.46`: either reading); `15 + 75 = 120` is `120`, the
/// value it states. A chain that ends in an expression has a value only after a lone variable
/// (`y = 2x + 3`).
fn chain_value(values: &[&Item], approx: bool, lone: bool) -> Option<Item> {
    let last = *values.last()?;
    if constant(last) && values.len() > 1 {
        let agree: Vec<Item> = values
            .iter()
            .filter(|v| match (const_val(v), const_val(last)) {
                (Some(a), Some(b)) => consistent(a, b, approx),
                _ => constant(v) && item_eq(v, last),
            })
            .map(|v| (*v).clone())
            .collect();
        return Some(if agree.len() == 1 {
            last.clone()
        } else {
            Item::Alt(agree)
        });
    }
    (lone || values.len() == 1).then(|| last.clone())
}

fn is_zero(item: &Item) -> bool {
    const_val(item).is_some_and(|v| v.exact.as_ref().is_some_and(|e| e.0.is_empty()))
}

/// One constant value (`3`, `\frac{\sqrt3}{2}`), not a ± pair.
fn const_val(item: &Item) -> Option<&Val> {
    match item {
        Item::Val(v) if v.len() == 1 && !v[0].vars => Some(&v[0]),
        _ => None,
    }
}

/// Whether an item has no variable in it.
fn constant(item: &Item) -> bool {
    match item {
        Item::Val(v) => v.iter().all(|x| !x.vars),
        Item::Text(_) | Item::Ratio(_) | Item::Time(..) => true,
        Item::Tuple(v) | Item::Set(v) | Item::Union(v) | Item::Alt(v) => v.iter().all(constant),
        Item::Interval { lo, hi, .. } => constant(lo) && constant(hi),
        Item::Matrix(rows) => rows.iter().flatten().all(constant),
        Item::Relation(..) | Item::Labelled { .. } => false,
    }
}

/// Whether two sides of a chain of constants agree: equal, or one is a decimal that the other
/// rounds or truncates to (`\frac{22}{7} = 3.14`); `≈` also allows 1 %.
fn consistent(a: &Val, b: &Val, approx: bool) -> bool {
    if val_eq(a, b) {
        return true;
    }
    let (x, y) = (a.s[0], b.s[0]);
    if !x.is_finite() || !y.is_finite() || x.im != 0.0 || y.im != 0.0 {
        return false;
    }
    let d = (x.re - y.re).abs();
    let places = match (a.dec, b.dec) {
        (Some(p), Some(q)) => Some(p.min(q)),
        (p, q) => p.or(q),
    };
    if let Some(p) = places {
        let unit = 10f64.powi(-i32::try_from(p).unwrap_or(i32::MAX));
        if d < unit * (1.0 + 1e-9) {
            return true;
        }
    }
    approx && d <= 0.01 * x.re.abs().max(y.re.abs())
}

fn inf(sign: f64) -> Item {
    Item::Val(vec![Val::float(C::real(sign * f64::INFINITY))])
}

fn interval(lo: Item, hi: Item, lo_closed: bool, hi_closed: bool) -> Item {
    Item::Interval {
        lo: Box::new(lo),
        hi: Box::new(hi),
        lo_closed,
        hi_closed,
    }
}

/// A constant end of an interval.
fn bound(x: &Item) -> bool {
    const_val(x).is_some()
}

/// `x ≤ 3` → `(-∞, 3]`, `1 < x ≤ 2` → `(1, 2]`: an inequality on one lone variable, labelled by it.
fn as_interval(sides: &[Item], ops: &[Rel], lones: &[bool]) -> Option<(Option<Item>, Item)> {
    if !ops.iter().all(|o| matches!(o, Rel::Lt | Rel::Le)) {
        return None;
    }
    match (sides, lones, ops) {
        ([x, b], [true, false], [o]) if bound(b) => Some((
            Some(x.clone()),
            interval(inf(-1.0), b.clone(), false, *o == Rel::Le),
        )),
        ([a, x], [false, true], [o]) if bound(a) => Some((
            Some(x.clone()),
            interval(a.clone(), inf(1.0), *o == Rel::Le, false),
        )),
        ([a, x, b], [false, true, false], [o1, o2]) if bound(a) && bound(b) => Some((
            Some(x.clone()),
            interval(a.clone(), b.clone(), *o1 == Rel::Le, *o2 == Rel::Le),
        )),
        _ => None,
    }
}

/// A top-level list (two items or more): labelled values with distinct labels form one labelled
/// tuple (`x = 1, y = 2`); a label seen again starts the next tuple, and tuples (or values) with
/// one label form a labelled set (`x = 1, x = 2` is `x` labelling `\{1, 2\}`). Any other list
/// is a set.
pub fn group_labelled(items: Vec<Item>) -> Item {
    let has_label = |it: &Item| matches!(it, Item::Labelled { label: Some(_), .. });
    if items.len() > MAX_GROUPED || !items.iter().all(has_label) {
        return Item::Set(items);
    }
    let mut groups: Vec<Vec<Entry>> = vec![Vec::new()];
    for it in items {
        let Item::Labelled {
            label: Some(l),
            value,
            raw,
        } = it
        else {
            continue;
        };
        let current = groups.last_mut().map_or(0, |g| g.len());
        let seen = groups
            .last()
            .is_some_and(|g| g.iter().any(|(k, _, _)| item_eq(k, &l)));
        if seen && current > 0 {
            groups.push(Vec::new());
        }
        if let Some(g) = groups.last_mut() {
            g.push((*l, *value, raw));
        }
    }
    let mut tuples: Vec<Entry> = groups
        .into_iter()
        .map(|g| {
            if g.len() == 1 {
                g.into_iter()
                    .next()
                    .unwrap_or((Item::Set(Vec::new()), Item::Set(Vec::new()), None))
            } else {
                let (ls, vs): (Vec<Item>, Vec<Item>) =
                    g.into_iter().map(|(l, v, _)| (l, v)).unzip();
                (Item::Tuple(ls), Item::Tuple(vs), None)
            }
        })
        .collect();
    if tuples.len() == 1 {
        let (l, v, raw) =
            tuples
                .pop()
                .unwrap_or((Item::Set(Vec::new()), Item::Set(Vec::new()), None));
        return labelled(Some(l), v, raw);
    }
    let one_label = tuples.windows(2).all(|w| item_eq(&w[0].0, &w[1].0));
    if one_label {
        let label = tuples[0].0.clone();
        let values = tuples.into_iter().map(|(_, v, _)| v).collect();
        return labelled(Some(label), Item::Set(values), None);
    }
    Item::Set(
        tuples
            .into_iter()
            .map(|(l, v, raw)| labelled(Some(l), v, raw))
            .collect(),
    )
}

fn labelled(label: Option<Item>, value: Item, raw: Option<Box<Item>>) -> Item {
    Item::Labelled {
        label: label.map(Box::new),
        value: Box::new(value),
        raw,
    }
}

/// Whether the tokens of a relation side can label a value: names of variables, points and
/// segments (`AB`, `x_1`, `\theta`, `f(2)`), joined by `+ - * / :` or wrapped in `| |`, `[ ]`,
/// `\overline{}`, `\angle`, raised to a number (`CE^2`); a tuple of them (`(p, q)`); a `\text{}`
/// word. No number outside a subscript, an exponent or a function's argument: `2x + 1 = 5` is an
/// equation, not a label.
pub fn label_tokens(toks: &[Tok]) -> bool {
    if toks.is_empty() || toks.len() > MAX_LABEL {
        return false;
    }
    // one letter is a label only as a lone variable (`e` and `i` are numbers)
    if toks.len() == 1 && !matches!(toks[0], Tok::Word(_)) {
        return false;
    }
    let mut names = 0;
    let mut sub = 0usize; // inside `_{…}`
    let mut args = 0usize; // inside `f(…)`
    let mut parens = 0usize;
    for (k, t) in toks.iter().enumerate() {
        let prev = k.checked_sub(1).map(|j| &toks[j]);
        match t {
            Tok::Letter(_) | Tok::Word(_) => names += 1,
            Tok::Cmd(c) if GREEK.contains(&c.as_str()) => names += 1,
            Tok::Cmd(c)
                if matches!(
                    c.as_str(),
                    "angle"
                        | "measuredangle"
                        | "triangle"
                        | "overline"
                        | "overrightarrow"
                        | "arc"
                        | "frac"
                ) => {}
            Tok::Num { .. } => {
                if !(matches!(prev, Some(Tok::P('_' | '^'))) || sub > 0 || args > 0) {
                    return false;
                }
            }
            Tok::P('{') => {
                if matches!(prev, Some(Tok::P('_' | '^'))) || sub > 0 {
                    sub += 1;
                }
            }
            // a power of a name (`CE^2`, `a^4 + b^4`): its exponent is a number
            Tok::P('^') if matches!(prev, Some(Tok::Letter(_) | Tok::P(')' | '|' | '}'))) => {}
            Tok::P('}') => sub = sub.saturating_sub(1),
            Tok::P('(') => {
                if matches!(prev, Some(Tok::Letter(_))) || args > 0 {
                    args += 1;
                } else {
                    parens += 1;
                }
            }
            Tok::P(')') => {
                if args > 0 {
                    args -= 1;
                } else {
                    parens = parens.checked_sub(1).unwrap_or(usize::MAX);
                }
            }
            Tok::P('-' | ',') if args > 0 => {}
            Tok::P(',') if parens > 0 => {}
            Tok::P('_' | '|' | '[' | ']' | '\'') => {}
            // an argument is names and numbers (`f(2)`, `g(x, -1)`): `x(x + 1)` is no label
            Tok::P('+' | '-' | '*' | '/' | ':') if args == 0 => {}
            _ => return false,
        }
    }
    names > 0 && parens == 0
}
