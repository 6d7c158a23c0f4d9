//! A customer's name in its one normal form, in which seatq compares names
//! for ownership and limits: "Ann", "ann" and "ＡＮＮ" (fullwidth) are one
//! customer, so a name cannot be varied by case or by a look-alike
//! compatibility form to pass a per-customer limit.
//!
//! The form: Unicode compatibility composition (NFKC), then Unicode's
//! default lower-casing, then NFKC again (lower-casing can decompose);
//! leading and trailing white space removed and every inner run of white
//! space made one space. It is computed in Rust, never by the database,
//! whose `lower()` depends on the database's locale (under the C locale it
//! lowers ASCII only).

use std::borrow::Cow;

use unicode_normalization::UnicodeNormalization as _;

/// `name` in seatq's normal form for customers: borrowed when it is in it
/// already (most names a shop sends are), so that a worker pays for the
/// form only where a name needs it.
pub fn normal_form(name: &str) -> Cow<'_, str> {
    if is_normal_ascii(name) {
        return Cow::Borrowed(name);
    }
    // ASCII is its own compatibility composition: lower-casing is all.
    let folded: String = match name.is_ascii() {
        true => name.to_ascii_lowercase(),
        false => name.nfkc().collect::<String>().to_lowercase().nfkc().collect(),
    };
    Cow::Owned(folded.split_whitespace().collect::<Vec<_>>().join(" "))
}

/// Whether `name` is ASCII already in normal form: no capital, no white
/// space but single inner spaces.
fn is_normal_ascii(name: &str) -> bool {
    let bytes = name.as_bytes();
    !name.is_empty()
        && bytes.iter().all(|&b| (b.is_ascii_graphic() && !b.is_ascii_uppercase()) || b == b' ')
        && bytes.first() != Some(&b' ')
        && bytes.last() != Some(&b' ')
        && !name.contains("  ")
}

/// Whether two names are one customer.
pub fn same(a: &str, b: &str) -> bool {
    a == b || normal_form(a) == normal_form(b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn case_width_and_spacing_are_one_customer() {
        assert_eq!(normal_form("Ann"), "ann");
        assert_eq!(normal_form("ＡＮＮ"), "ann");
        assert_eq!(normal_form("  Ann   Lee \t"), "ann lee");
        assert_eq!(normal_form("ÅSA"), normal_form("A\u{30a}sa"));
        assert!(same("Straße", "STRASSE".to_lowercase().replace("ss", "ß").as_str()));
        assert!(!same("ann", "anne"));
        assert_eq!(normal_form("ﬁnn"), "finn");
        assert!(matches!(normal_form("customer-12 lee"), Cow::Borrowed(_)), "already normal: not copied");
        assert_eq!(normal_form("Ann\tLee"), "ann lee");
        assert_eq!(normal_form("ann  lee"), "ann lee");
    }
}
