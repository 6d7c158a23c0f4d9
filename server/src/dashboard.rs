//! The operator dashboard.
use axum::Router;

use crate::AppState;

pub(crate) fn routes() -> Router<AppState> {
    Router::new()
}
