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

use unicode_normalization::UnicodeNormalization as _;

/// `name` in seatq's normal form for customers.
pub fn normal_form(name: &str) -> String {
    let folded: String = name.nfkc().collect::<String>().to_lowercase().nfkc().collect();
    folded.split_whitespace().collect::<Vec<_>>().join(" ")
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
    }
}
