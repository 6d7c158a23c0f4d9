//! Reading JSON text (bulk files, venue files), as the client and the CLI
//! read it: a field named twice anywhere is refused, `duplicate_field`,
//! naming where (`payload.party`), rather than one of the two kept silently
//! (serde_json keeps the last, as does `jsonb`, so a database producer
//! sending such text gets the last: docs/requests.md). Anything else wrong
//! is `invalid_json`, with serde_json's message cut to a bounded length,
//! since it may quote the input.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{self, DeserializeOwned, DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use crate::limits::MAX_QUOTED_CHARS;
use crate::outcome::ErrorCode;
use crate::validate::field_name;

/// Why JSON text was not read.
#[derive(Debug)]
pub enum JsonError {
    /// A field named twice: where, and on which line of the text.
    Duplicate { path: String, line: usize },
    /// Not JSON, or not of the shape wanted.
    Invalid(serde_json::Error),
}

impl JsonError {
    /// The error code: `duplicate_field` or `invalid_json`.
    pub fn code(&self) -> ErrorCode {
        match self {
            JsonError::Duplicate { .. } => ErrorCode::DuplicateField,
            JsonError::Invalid(_) => ErrorCode::InvalidJson,
        }
    }

    /// The reason, naming the field or the place, bounded in length.
    pub fn reason(&self) -> String {
        match self {
            JsonError::Duplicate { path, .. } => format!("{path}: named twice"),
            JsonError::Invalid(e) => bounded_reason(e),
        }
    }

    /// The line of the text at fault (from 1).
    pub fn line(&self) -> usize {
        match self {
            JsonError::Duplicate { line, .. } => *line,
            JsonError::Invalid(e) => e.line(),
        }
    }
}

/// A serde_json error's message with what it quotes of the input cut: at
/// most four times [`MAX_QUOTED_CHARS`] characters, then its place in the
/// text.
pub fn bounded_reason(e: &serde_json::Error) -> String {
    let text = e.to_string();
    let place = format!(" at line {} column {}", e.line(), e.column());
    let message = text.strip_suffix(&place).unwrap_or(&text);
    let limit = 4 * MAX_QUOTED_CHARS;
    let n = message.chars().count();
    let message = if n > limit {
        format!("{}… ({n} characters)", message.chars().take(limit).collect::<String>())
    } else {
        message.to_string()
    };
    if e.line() == 0 { message } else { message + &place }
}

/// Parse `text` as a `T`, refusing a field named twice anywhere in it.
pub fn from_str<T: DeserializeOwned>(text: &str) -> Result<T, JsonError> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(text);
    if let Err(e) = (Keys { path: String::new(), found: &found }).deserialize(&mut de)
        && let Some(path) = found.take()
    {
        return Err(JsonError::Duplicate { path, line: e.line() });
    }
    serde_json::from_str(text).map_err(JsonError::Invalid)
}

/// Walks JSON text without keeping it, failing at the first object that
/// names a field twice (its path then in `found`).
struct Keys<'f> {
    path: String,
    found: &'f RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Keys<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Keys<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E: de::Error>(self, _: bool) -> Result<(), E> {
        Ok(())
    }

    fn visit_i64<E: de::Error>(self, _: i64) -> Result<(), E> {
        Ok(())
    }

    fn visit_u64<E: de::Error>(self, _: u64) -> Result<(), E> {
        Ok(())
    }

    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        Ok(())
    }

    fn visit_str<E: de::Error>(self, _: &str) -> Result<(), E> {
        Ok(())
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0;
        while seq.next_element_seed(Keys { path: format!("{}[{i}]", self.path), found: self.found })?.is_some() {
            i += 1;
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let name = field_name(&key);
            let path = if self.path.is_empty() { name.into_owned() } else { format!("{}.{name}", self.path) };
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(path);
                return Err(de::Error::custom("a field named twice"));
            }
            map.next_value_seed(Keys { path, found: self.found })?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::Value;

    #[test]
    fn a_field_named_twice_is_found_wherever_it_is() {
        let cases = [
            (r#"{"kind": "book", "kind": "hold"}"#, "kind"),
            (r#"{"kind": "book", "payload": {"party": 1, "customer": "c", "party": 2}}"#, "payload.party"),
            (r#"{"seats": [{"row": 1}, {"row": 2, "pos": 1, "row": 3}]}"#, "seats[1].row"),
            (r#"{"": 1, "": 2}"#, r#""""#),
        ];
        for (text, path) in cases {
            match from_str::<Value>(text) {
                Err(e @ JsonError::Duplicate { .. }) => {
                    assert_eq!(
                        (e.code(), e.reason()),
                        (ErrorCode::DuplicateField, format!("{path}: named twice")),
                        "{text}"
                    )
                }
                other => panic!("{text}: {other:?}"),
            }
        }
        // The same name in two objects is no duplicate.
        let text = r#"{"a": {"x": 1}, "b": {"x": 2}, "c": [{"x": 1}, {"x": 2}]}"#;
        assert!(from_str::<Value>(text).is_ok());
    }

    #[test]
    fn other_faults_are_invalid_json_with_a_bounded_reason() {
        let e = from_str::<Value>(r#"{"a": 1"#).expect_err("not JSON");
        assert_eq!(e.code(), "invalid_json");
        #[derive(serde::Deserialize, Debug)]
        #[serde(deny_unknown_fields)]
        #[allow(dead_code)]
        struct Small {
            a: i32,
        }
        let long = "x".repeat(10_000);
        let e = from_str::<Small>(&format!(r#"{{"{long}": 1}}"#)).expect_err("unknown field");
        let reason = e.reason();
        assert!(reason.chars().count() < 400 && reason.contains("characters)"), "{reason}");
        assert!(reason.contains(" at line 1 column "), "{reason}");
    }
}
