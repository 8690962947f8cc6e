//! Matrix arithmetic for answers such as `\begin{pmatrix}1\\2\end{pmatrix} + 2\begin{pmatrix}…\end{pmatrix}`:
//! sums, scalar multiples and products of matrices whose cells are single values, bounded in size.

use crate::num::Val;
use crate::types::{Item, Res};

/// Most multiplications one matrix product may take (rows × inner × columns).
const MAX_PRODUCT: usize = 1024;
/// Highest power of a matrix that is evaluated (`A^2`).
pub const MAX_POWER: i128 = 8;

pub type M = Vec<Vec<Val>>;

/// The cells of a matrix item as values (each a single value), or an error.
pub fn cells(item: &Item) -> Res<M> {
    let Item::Matrix(rows) = item else {
        return Err(());
    };
    rows.iter()
        .map(|r| {
            r.iter()
                .map(|c| match c {
                    Item::Val(v) if v.len() == 1 => Ok(v[0].clone()),
                    _ => Err(()),
                })
                .collect()
        })
        .collect()
}

/// Cells of a matrix (the cost of a sum or a scalar multiple).
pub fn size(m: &M) -> usize {
    m.iter().map(Vec::len).sum()
}

/// Multiplications of the product `a · b`.
pub fn product_cost(a: &M, b: &M) -> usize {
    a.len() * b.len() * b.first().map_or(0, Vec::len)
}

pub fn item(m: M) -> Item {
    Item::Matrix(
        m.into_iter()
            .map(|r| r.into_iter().map(|v| Item::Val(vec![v])).collect())
            .collect(),
    )
}

/// `a + b` (or `a - b`): same shape.
pub fn add(a: &M, b: &M, sub: bool) -> Res<M> {
    if a.len() != b.len() || a.iter().zip(b).any(|(x, y)| x.len() != y.len()) {
        return Err(());
    }
    Ok(a.iter()
        .zip(b)
        .map(|(x, y)| {
            x.iter()
                .zip(y)
                .map(|(p, q)| if sub { p.sub(q) } else { p.add(q) })
                .collect()
        })
        .collect())
}

pub fn scale(m: &M, s: &Val) -> M {
    m.iter()
        .map(|r| r.iter().map(|v| s.mul(v)).collect())
        .collect()
}

/// `a · b`: a's columns are b's rows.
pub fn mul(a: &M, b: &M) -> Res<M> {
    let inner = a.first().map_or(0, Vec::len);
    let cols = b.first().map_or(0, Vec::len);
    if inner != b.len() || inner == 0 || a.len() * inner * cols > MAX_PRODUCT {
        return Err(());
    }
    let mut out = Vec::with_capacity(a.len());
    for row in a {
        let mut r = Vec::with_capacity(cols);
        for j in 0..cols {
            let mut acc = row[0].mul(&b[0][j]);
            for k in 1..inner {
                acc = acc.add(&row[k].mul(&b[k][j]));
            }
            r.push(acc);
        }
        out.push(r);
    }
    Ok(out)
}

/// `m^n` for a square matrix and `1 ≤ n ≤` [`MAX_POWER`].
pub fn pow(m: &M, n: i128) -> Res<M> {
    if !(1..=MAX_POWER).contains(&n) || m.iter().any(|r| r.len() != m.len()) {
        return Err(());
    }
    let mut acc = m.clone();
    for _ in 1..n {
        acc = mul(&acc, m)?;
    }
    Ok(acc)
}
