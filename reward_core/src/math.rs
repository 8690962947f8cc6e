//! The math verifier, from its own crate `math_equal` (its crate docs are the spec: `cargo doc -p
//! math_equal`), and the batch call the reward core adds to it.

pub use verifier::*;

/// [`math_equal`] over pairs, in parallel when enabled (see [`crate::parallel`]).
pub fn math_equal_batch(preds: &[&str], golds: &[&str]) -> Result<Vec<bool>, crate::Error> {
    if preds.len() != golds.len() {
        return Err(crate::Error::LengthMismatch {
            what: "gold",
            expected: preds.len(),
            got: golds.len(),
        });
    }
    let total = preds.iter().chain(golds).map(|s| s.len()).sum();
    Ok(crate::parallel::map_indices(preds.len(), total, |i| {
        math_equal(preds[i], golds[i])
    }))
}
