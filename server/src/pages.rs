//! What the pages share: the navigation, rendering a template, the error
//! page, how times show.

use askama::Template;
use axum::http::StatusCode;
use axum::response::{Html, IntoResponse, Response};
use chrono::{DateTime, Utc};

use crate::AppState;
use crate::error::ApiError;

/// Which parts the navigation links to.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Nav {
    pub api: bool,
    pub shop: bool,
    pub dashboard: bool,
}

impl Nav {
    pub fn of(s: &AppState) -> Nav {
        Nav { api: s.settings.api, shop: s.settings.shop, dashboard: s.settings.dashboard }
    }
}

/// A page, or an error page.
pub(crate) type Page = Result<Response, PageError>;

/// `template` as HTML with `status`.
pub(crate) fn render(status: StatusCode, template: &impl Template) -> Page {
    let html = template.render().map_err(|e| {
        tracing::warn!(error = %e, "rendering a page failed");
        PageError(ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "the page could not be drawn"))
    })?;
    Ok((status, Html(html)).into_response())
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    nav: Nav,
    status: u16,
    code: String,
    message: String,
}

/// An error, shown as a page (the same code and message as the API's).
#[derive(Debug)]
pub(crate) struct PageError(pub ApiError);

impl From<ApiError> for PageError {
    fn from(e: ApiError) -> PageError {
        PageError(e)
    }
}

impl From<seatq::Error> for PageError {
    fn from(e: seatq::Error) -> PageError {
        PageError(e.into())
    }
}

impl IntoResponse for PageError {
    fn into_response(self) -> Response {
        let e = self.0;
        let nav = Nav { api: true, shop: true, dashboard: true };
        let page = ErrorPage { nav, status: e.status.as_u16(), code: e.code.clone(), message: e.message.clone() };
        match page.render() {
            Ok(html) => (e.status, Html(html)).into_response(),
            Err(_) => e.into_response(),
        }
    }
}

/// An event's venue and start, as its page's subtitle.
pub(crate) fn subtitle(venue: Option<&str>, starts_at: Option<DateTime<Utc>>) -> String {
    let starts = when(starts_at);
    [venue.unwrap_or_default(), starts.as_str()].into_iter().filter(|s| !s.is_empty()).collect::<Vec<_>>().join(" · ")
}

/// A time as a page shows it: "2027-03-01 19:30 UTC".
pub(crate) fn when(t: Option<DateTime<Utc>>) -> String {
    t.map(|t| t.format("%Y-%m-%d %H:%M UTC").to_string()).unwrap_or_default()
}

/// The currency a shop's prices are in. Prices are stored as whole cents
/// with no currency (a venue file's `price` is a bare amount), so the shop
/// says which one they are, once for every page; a customer deciding
/// whether to pay must see it. An ISO 4217 code (three letters), drawn with
/// its sign where one is unmistakable in English-language pages ("£45.00",
/// "€45.00", "$45.00") and with its code otherwise ("CHF 45.00").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Currency(String);

/// A currency that is not an ISO 4217 code.
#[derive(Debug, thiserror::Error)]
#[error("the currency must be an ISO 4217 code of three letters, such as GBP, EUR or USD, not {0:?}")]
pub struct BadCurrency(String);

impl Currency {
    /// Its code, as `GBP`.
    pub fn code(&self) -> &str {
        &self.0
    }

    /// What goes before an amount: the sign, or the code and a space.
    pub(crate) fn prefix(&self) -> String {
        match self.0.as_str() {
            "GBP" => "£".into(),
            "EUR" => "€".into(),
            "USD" => "$".into(),
            code => format!("{code}\u{a0}"),
        }
    }

    /// `cents` as money in this currency: "£45.00".
    pub(crate) fn amount(&self, cents: i64) -> String {
        format!("{}{}", self.prefix(), seatq::outcome::money(cents))
    }

    /// Prices from `low` to `high` cents: "£45.00", or "£28.00 – £32.50".
    pub(crate) fn range(&self, low: i64, high: i64) -> String {
        match low == high {
            true => self.amount(low),
            false => format!("{} – {}", self.amount(low), self.amount(high)),
        }
    }
}

/// Pound sterling: the sample venue's theatre prices its seats in pounds.
impl Default for Currency {
    fn default() -> Self {
        Currency("GBP".into())
    }
}

impl std::str::FromStr for Currency {
    type Err = BadCurrency;

    /// A code in any case ("gbp" is `GBP`).
    fn from_str(s: &str) -> Result<Currency, BadCurrency> {
        let code = s.trim().to_ascii_uppercase();
        match code.len() == 3 && code.bytes().all(|b| b.is_ascii_uppercase()) {
            true => Ok(Currency(code)),
            false => Err(BadCurrency(s.to_string())),
        }
    }
}

impl std::fmt::Display for Currency {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn currencies_show_their_sign_or_their_code() {
        let gbp = Currency::default();
        assert_eq!(gbp.amount(4500), "£45.00");
        assert_eq!(gbp.range(2800, 3250), "£28.00 – £32.50");
        assert_eq!(gbp.range(4500, 4500), "£45.00");
        let chf: Currency = " chf ".parse().expect("a code");
        assert_eq!((chf.code(), chf.amount(5).as_str()), ("CHF", "CHF\u{a0}0.05"));
        for bad in ["", "£", "EURO", "E1R", "€UR"] {
            assert!(bad.parse::<Currency>().is_err(), "{bad:?} taken as a currency");
        }
    }
}
