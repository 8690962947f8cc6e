//! Structural equality of parsed answers ([`item_eq`]), under the rules of the module docs of
//! `math`. Every rule is symmetric; collections are bounded ([`MAX_ITEMS`]) and so is the number
//! of comparisons one judgement makes ([`MAX_COMPARISONS`]).

use std::cell::Cell;

use crate::num::{proportional, val_eq, Val};
use crate::types::{Item, Rel, MAX_ITEMS};

/// Most labels of a labelled tuple matched up to their order (`y = 2, x = 1` against `(x, y)`).
const MAX_PERMUTED: usize = 8;
/// Most comparisons of parts (elements, sides, labels, values) one [`item_eq`] may make. Sets and
/// lists are matched without order, pair by pair; past this budget (a set of 40 elements against
/// itself reversed takes ~2.4K, one of 52 ~4K) the answers are not equal, so two long collections
/// cost a bounded time (well under 1 ms), not the square of their length.
pub const MAX_COMPARISONS: usize = 4096;

/// The comparisons an [`item_eq`] has left, and whether it ran out.
struct Work {
    left: Cell<usize>,
    spent: Cell<bool>,
}

impl Work {
    /// Takes one comparison; false (and spent) when none is left.
    fn take(&self) -> bool {
        match self.left.get() {
            0 => {
                self.spent.set(true);
                false
            }
            n => {
                self.left.set(n - 1);
                true
            }
        }
    }
}

pub fn is_infinite(item: &Item) -> bool {
    matches!(item, Item::Val(v) if v.len() == 1 && v[0].is_infinite())
}

/// Values of a ± expression as items (one each).
fn val_items(v: &[Val]) -> Vec<Item> {
    v.iter().map(|x| Item::Val(vec![x.clone()])).collect()
}

/// Set elements with ± values spread out (`\{1\pm\sqrt5, -2\}` has three) and repeats dropped
/// (`\{2, 1, 1\}` = `\{1, 2\}`).
fn elements(items: &[Item], w: &Work) -> Vec<Item> {
    let mut out: Vec<Item> = Vec::with_capacity(items.len());
    let push = |x: Item, out: &mut Vec<Item>| {
        if !out.iter().any(|y| eq(y, &x, w)) {
            out.push(x);
        }
    };
    for it in items.iter().take(MAX_ITEMS) {
        if w.spent.get() {
            break; // not equal whatever follows
        }
        match it {
            Item::Val(v) if v.len() > 1 => {
                for x in val_items(v) {
                    push(x, &mut out);
                }
            }
            _ => push(it.clone(), &mut out),
        }
    }
    out
}

fn unordered_eq(a: &[Item], b: &[Item], w: &Work) -> bool {
    if a.len() != b.len() || a.len() > MAX_ITEMS {
        return false;
    }
    let mut used = vec![false; b.len()];
    'outer: for x in a {
        if w.spent.get() {
            return false;
        }
        for (j, y) in b.iter().enumerate() {
            if !used[j] && eq(x, y, w) {
                used[j] = true;
                continue 'outer;
            }
        }
        return false;
    }
    true
}

fn ordered_eq(a: &[Item], b: &[Item], w: &Work) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| eq(x, y, w))
}

fn diff(sides: &[Item]) -> Option<Val> {
    match sides {
        [Item::Val(l), Item::Val(r)] if l.len() == 1 && r.len() == 1 => Some(l[0].sub(&r[0])),
        _ => None,
    }
}

/// Two relations as written: the same operators, and `lhs − rhs` proportional (one operator) or
/// every side equal (a chain).
fn relation_eq(g: &Item, p: &Item, w: &Work) -> bool {
    let (Item::Relation(gs, gops, _), Item::Relation(ps, pops, _)) = (g, p) else {
        return false;
    };
    if gops != pops {
        return false;
    }
    if gops.len() == 1 && gops[0] != Rel::In {
        // (two constant differences are always proportional: `0.56 = 56` is not `0.66 = 56`)
        if let Some((dg, dp)) = diff(gs).zip(diff(ps)).filter(|(a, b)| a.vars || b.vars) {
            let positive = matches!(gops[0], Rel::Lt | Rel::Le);
            return proportional(&dg, &dp, positive);
        }
    }
    ordered_eq(gs, ps, w)
}

/// Labelled answers: the labels and the values agree; a labelled tuple matches another labelled
/// tuple whatever the order of its labels (`x = 1, y = 2` = `(y, x) = (2, 1)`).
fn labelled_eq(a: &Item, b: &Item, w: &Work) -> bool {
    let (
        Item::Labelled {
            label: la,
            value: va,
            raw: ra,
        },
        Item::Labelled {
            label: lb,
            value: vb,
            raw: rb,
        },
    ) = (a, b)
    else {
        return false;
    };
    if let (Some(x), Some(y)) = (ra, rb) {
        if relation_eq(x, y, w) {
            return true;
        }
    }
    let (Some(la), Some(lb)) = (la, lb) else {
        return eq(va, vb, w);
    };
    if eq(la, lb, w) {
        return eq(va, vb, w);
    }
    let (Item::Tuple(xs), Item::Tuple(ys)) = (&**la, &**lb) else {
        return false;
    };
    if xs.len() != ys.len() || xs.len() > MAX_PERMUTED {
        return false;
    }
    // perm[i]: which of b's labels is a's i-th
    let mut perm = Vec::with_capacity(xs.len());
    for x in xs {
        match (0..ys.len()).find(|&j| !perm.contains(&j) && eq(x, &ys[j], w)) {
            Some(j) => perm.push(j),
            None => return false,
        }
    }
    permuted(vb, &perm).is_some_and(|v| eq(va, &v, w))
}

/// The elements of finite sets, as one set.
fn merged(sets: &[Item]) -> Item {
    let mut out = Vec::new();
    for x in sets {
        if let Item::Set(v) = x {
            out.extend(v.iter().take(MAX_ITEMS - out.len()).cloned());
        }
    }
    Item::Set(out)
}

/// A labelled tuple read from a list (`x = 1, y = 2`, no relation written around it).
fn from_list(item: &Item) -> bool {
    matches!(
        item,
        Item::Labelled { label: Some(l), value, raw: None }
            if matches!(**l, Item::Tuple(_)) && matches!(**value, Item::Tuple(_))
    )
}

/// A tuple (or a set of tuples) with its entries reordered: entry `i` is the old entry `perm[i]`.
fn permuted(v: &Item, perm: &[usize]) -> Option<Item> {
    match v {
        Item::Tuple(t) if t.len() == perm.len() => {
            Some(Item::Tuple(perm.iter().map(|&j| t[j].clone()).collect()))
        }
        Item::Set(s) => Some(Item::Set(
            s.iter()
                .map(|x| permuted(x, perm))
                .collect::<Option<Vec<_>>>()?,
        )),
        _ => None,
    }
}

/// Structural equality under the rules of the module docs (symmetric), within a budget of
/// [`MAX_COMPARISONS`] comparisons: a comparison that needs more is not equal.
pub fn item_eq(g: &Item, p: &Item) -> bool {
    let w = Work {
        left: Cell::new(MAX_COMPARISONS),
        spent: Cell::new(false),
    };
    eq(g, p, &w) && !w.spent.get()
}

/// [`item_eq`] within the budget `w` (every call takes one comparison from it).
fn eq(g: &Item, p: &Item, w: &Work) -> bool {
    use Item::{Alt, Interval, Labelled, Matrix, Ratio, Relation, Set, Text, Tuple, Union};
    if !w.take() {
        return false;
    }
    match (g, p) {
        // one reading of a consistent chain is enough (`\frac{6}{2} = 3` = `3`)
        (Alt(a), _) => a.iter().any(|x| eq(x, p, w)),
        (_, Alt(b)) => b.iter().any(|y| eq(g, y, w)),
        // a union of finite sets is one set (`\{1,3\} \cup \{2,4\}` = `\{1,2,3,4\}`)
        (Union(a), _) if a.iter().all(|x| matches!(x, Set(_))) => eq(&merged(a), p, w),
        (_, Union(b)) if b.iter().all(|y| matches!(y, Set(_))) => eq(g, &merged(b), w),
        (Labelled { .. }, Labelled { .. }) => labelled_eq(g, p, w),
        (Labelled { raw, .. }, Relation(..)) => {
            raw.as_deref().is_some_and(|r| relation_eq(r, p, w))
        }
        (Relation(..), Labelled { raw, .. }) => {
            raw.as_deref().is_some_and(|r| relation_eq(g, r, w))
        }
        // labelled values listed (`x_1 = 2, x_2 = 3`) against a set: a set too
        (Labelled { value, .. }, Set(s)) | (Set(s), Labelled { value, .. })
            if from_list(g) || from_list(p) =>
        {
            let Tuple(t) = &**value else { return false };
            unordered_eq(&elements(t, w), &elements(s, w), w)
        }
        (Labelled { value, .. }, _) => eq(value, p, w),
        (_, Labelled { value, .. }) => eq(g, value, w),
        (Relation(..), Relation(..)) => relation_eq(g, p, w),
        (Relation(..), _) | (_, Relation(..)) => false,
        (Item::Val(a), Item::Val(b)) => match (a.as_slice(), b.as_slice()) {
            ([x], [y]) => val_eq(x, y),
            _ => unordered_eq(&elements(&val_items(a), w), &elements(&val_items(b), w), w),
        },
        (Text(a), Text(b)) => a == b,
        // clock times are times (`12:00` ≠ `1:00`); a time against anything else is its ratio
        (Item::Time(a, _), Item::Time(b, _)) => a.same(*b),
        (Item::Time(_, r), _) => eq(r, p, w),
        (_, Item::Time(_, r)) => eq(g, r, w),
        (Ratio(a), Ratio(b)) => a.len() == b.len() && a.iter().zip(b).all(|(x, y)| val_eq(x, y)),
        (Tuple(a), Tuple(b)) => ordered_eq(a, b, w),
        (Tuple(a), Set(b)) | (Set(b), Tuple(a)) => {
            if a.len() == 1 || b.len() == 1 {
                return unwrap_one(g, p, w);
            }
            ordered_eq(a, b, w)
        }
        (Set(a), Set(b)) => unordered_eq(&elements(a, w), &elements(b, w), w),
        (Item::Val(v), Set(s)) | (Set(s), Item::Val(v)) if v.len() > 1 => {
            unordered_eq(&elements(&val_items(v), w), &elements(s, w), w)
        }
        (
            Interval {
                lo: a,
                hi: b,
                lo_closed: c,
                hi_closed: d,
            },
            Interval {
                lo: e,
                hi: f,
                lo_closed: h,
                hi_closed: k,
            },
        ) => {
            // An infinite end is never in the set: `[-\infty, 2)` = `(-\infty, 2)`.
            let closed_eq = |x: bool, y: bool, end: &Item| x == y || is_infinite(end);
            closed_eq(*c, *h, a) && closed_eq(*d, *k, b) && eq(a, e, w) && eq(b, f, w)
        }
        (Interval { .. }, Tuple(t)) | (Tuple(t), Interval { .. }) if t.len() == 2 => {
            // `(a, b)` is also the open interval
            let open = Interval {
                lo: Box::new(t[0].clone()),
                hi: Box::new(t[1].clone()),
                lo_closed: false,
                hi_closed: false,
            };
            if matches!(g, Tuple(_)) {
                eq(&open, p, w)
            } else {
                eq(g, &open, w)
            }
        }
        (Union(a), Union(b)) => unordered_eq(a, b, w),
        // `x < -1 \text{ or } x > 2`: intervals listed are their union
        (Set(a), Union(b)) | (Union(b), Set(a))
            if a.iter().all(|x| matches!(x, Interval { .. })) =>
        {
            unordered_eq(&elements(a, w), b, w)
        }
        (Matrix(a), Matrix(b)) => {
            a.len() == b.len() && a.iter().zip(b).all(|(r, s)| ordered_eq(r, s, w))
        }
        _ => unwrap_one(g, p, w),
    }
}

/// A one-element collection against anything else: compare its element.
fn unwrap_one(g: &Item, p: &Item, w: &Work) -> bool {
    let one = |x: &Item| match x {
        Item::Set(v) => match elements(v, w).as_slice() {
            [e] => Some(e.clone()),
            _ => None,
        },
        Item::Tuple(v) if v.len() == 1 => Some(v[0].clone()),
        Item::Val(v) if v.len() > 1 && v.iter().skip(1).all(|y| val_eq(y, &v[0])) => {
            Some(Item::Val(vec![v[0].clone()]))
        }
        _ => None,
    };
    let collection = |x: &Item| matches!(x, Item::Set(_) | Item::Tuple(_));
    match (one(g), one(p)) {
        (Some(a), _) if !collection(p) => eq(&a, p, w),
        (_, Some(b)) if !collection(g) => eq(g, &b, w),
        _ => false,
    }
}
