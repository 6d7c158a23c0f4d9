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
