//! Short generated names: the base-36 suffixes that keep a derived name stable
//! for one input (a logical cluster's name, a syncer's id).

const DIGITS: &[u8; 36] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// `len` base-36 digits (`0-9a-z`) of `n`, least significant first; digits above
/// `len` are dropped. Callers pass part of a hash, so the result is a valid
/// lowercase DNS label fragment.
pub fn base36(mut n: u128, len: usize) -> String {
    let mut out = String::with_capacity(len);
    for _ in 0..len {
        out.push(DIGITS[(n % 36) as usize] as char);
        n /= 36;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_come_least_significant_first_and_pad_with_zeros() {
        assert_eq!(base36(0, 4), "0000");
        assert_eq!(base36(35, 2), "z0");
        assert_eq!(base36(36, 3), "010");
        assert_eq!(base36(36 * 36 + 1, 2), "10");
    }
}
