//! The checkout page.
use axum::Router;

use crate::AppState;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}

pub(crate) async fn index() -> &'static str {
    "seatq\n"
}
