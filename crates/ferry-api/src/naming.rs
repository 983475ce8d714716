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

const DIGITS62: &[u8; 62] = b"0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";

/// The big-endian number `bytes` written in base `radix` (2..=62), most
/// significant digit first, no leading zeros (`"0"` for zero): the digits Go's
/// `big.Int.Text(radix)` writes, which kcp's derived names (sync target keys,
/// downstream namespaces) are made of.
pub fn radix_text(bytes: &[u8], radix: u32) -> String {
    assert!((2..=62).contains(&radix), "radix {radix} out of 2..=62");
    let mut number: Vec<u32> = bytes.iter().map(|&b| u32::from(b)).collect();
    let mut digits = Vec::new();
    while number.iter().any(|&d| d != 0) {
        let mut remainder = 0u32;
        for d in number.iter_mut() {
            let acc = remainder * 256 + *d;
            *d = acc / radix;
            remainder = acc % radix;
        }
        digits.push(DIGITS62[remainder as usize]);
    }
    if digits.is_empty() {
        return "0".into();
    }
    digits.iter().rev().map(|&d| d as char).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn radix_text_writes_go_big_int_digits() {
        assert_eq!(radix_text(&[], 62), "0");
        assert_eq!(radix_text(&[0, 0], 36), "0");
        assert_eq!(radix_text(&[61], 62), "Z");
        assert_eq!(radix_text(&[62], 62), "10");
        assert_eq!(radix_text(&[1, 0], 16), "100");
        assert_eq!(radix_text(&[0xff, 0xff], 36), "1ekf");
        assert_eq!(radix_text(&[0x12, 0x34, 0x56], 10), "1193046");
    }

    #[test]
    fn digits_come_least_significant_first_and_pad_with_zeros() {
        assert_eq!(base36(0, 4), "0000");
        assert_eq!(base36(35, 2), "z0");
        assert_eq!(base36(36, 3), "010");
        assert_eq!(base36(36 * 36 + 1, 2), "10");
    }
}
