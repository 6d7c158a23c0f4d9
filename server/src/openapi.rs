//! The API's OpenAPI description, generated from the handlers' annotations
//! and the types' own definitions (`utoipa`), served at `/api/openapi.json`.

use axum::Json;
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};

use crate::{api, lapsed, wait};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "seatq",
        description = "Enqueue seat-booking requests, wait for their outcomes, read availability and seat maps; \
                       operators' figures and actions under /api/ops. Errors are {\"error\": {\"code\", \"message\"}} \
                       with seatq's error codes (docs/requests.md, docs/http.md)."
    ),
    paths(
        api::enqueue, api::request, wait::long_poll, wait::events, lapsed::events,
        api::events, api::availability, api::seats,
        api::stats, api::workers, api::throughput, api::dead, api::retry, api::retry_all,
    ),
    modifiers(&OperatorToken),
    tags(
        (name = "requests", description = "Enqueue and follow booking requests"),
        (name = "events", description = "Events, availability and seat maps"),
        (name = "operators", description = "Queue figures and dead requests (reading may need the operator token; acting always does)"),
    )
)]
struct ApiDoc;

/// The operator token as a bearer scheme.
struct OperatorToken;

impl Modify for OperatorToken {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "operator_token",
            SecurityScheme::Http(HttpBuilder::new().scheme(HttpAuthScheme::Bearer).build()),
        );
        components.add_security_scheme(
            "hold_token",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some("The hold token a request was enqueued with (POST /api/requests answers it)"))
                    .build(),
            ),
        );
    }
}

/// The description as JSON.
pub fn openapi_json() -> serde_json::Value {
    serde_json::to_value(ApiDoc::openapi()).unwrap_or_default()
}

pub(crate) async fn serve() -> Json<serde_json::Value> {
    Json(openapi_json())
}
