//! Counts in words, one convention for every line and panel: thousands separated by
//! commas, and a plural's "s" only where the count is not one.

/// `19315` as `19,315`.
pub fn thousands(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::with_capacity(s.len() + s.len() / 3);
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The ending of a plural noun after the count `n`: `"s"` unless `n` is one
/// (`format!("{n} frame{}", plural(n))`).
pub fn plural(n: impl TryInto<u64>) -> &'static str {
    match n.try_into() {
        Ok(1) => "",
        _ => "s",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thousands_are_separated_by_commas() {
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_000), "1,000");
        assert_eq!(thousands(19_315), "19,315");
        assert_eq!(thousands(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn only_one_is_singular() {
        assert_eq!(plural(1u64), "");
        assert_eq!(plural(1usize), "");
        assert_eq!(plural(0u32), "s");
        assert_eq!(plural(2u64), "s");
        assert_eq!(plural(-1i64), "s");
    }
}
