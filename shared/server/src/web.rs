//! gRPC-Web for browsers (`--grpc-web`), with CORS for the origins allowed to call
//! (`--cors-allowed-origins`). A browser cannot speak gRPC itself (no HTTP/2 trailers
//! through `fetch`), so tonic-web translates gRPC-Web requests into gRPC in front of
//! every other layer: auth, quotas, limits and metrics see a gRPC call either way.

use std::time::Duration;
use tonic::codegen::http::{HeaderName, HeaderValue, Method};
use tower::util::{Either, option_layer};
use tower_http::cors::{AllowHeaders, AllowOrigin, CorsLayer};
use tower_layer::{Identity, Stack};

/// The headers a browser app reads from a gRPC-Web answer: the status of a call that
/// failed before its first message comes in headers ("trailers-only"), and
/// `grpc-status-details-bin` carries the error details (google.rpc.Status).
const EXPOSED_HEADERS: [&str; 3] = ["grpc-status", "grpc-message", "grpc-status-details-bin"];

/// How long a browser may cache a preflight answer.
const PREFLIGHT_MAX_AGE: Duration = Duration::from_secs(600);

/// gRPC-Web settings (flattened into [`crate::GrpcArgs`]).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct GrpcWebArgs {
    /// Also accept gRPC-Web (application/grpc-web and grpc-web-text, over HTTP/1.1 and HTTP/2) on the gRPC
    /// port, so a browser app calls the services directly; plain gRPC is served as before
    #[arg(long, env = "ADK_GRPC_WEB", value_name = "BOOL", default_value_t = false, num_args = 0..=1,
          default_missing_value = "true", action = clap::ArgAction::Set)]
    pub grpc_web: bool,

    /// With --grpc-web: the origins whose pages may call from a browser (CORS), comma-separated, each
    /// `scheme://host[:port]` as the browser sends it (`https://chat.example.com,http://localhost:8080`), or
    /// `*` for any origin [default: none, only pages served from the gRPC port's own origin]
    #[arg(long, env = "ADK_CORS_ALLOWED_ORIGINS", value_name = "ORIGINS", value_delimiter = ',',
          value_parser = parse_origin)]
    pub cors_allowed_origins: Vec<CorsOrigin>,
}

/// One entry of `--cors-allowed-origins`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CorsOrigin {
    Any,
    Exact(HeaderValue),
}

/// An origin is what a browser sends in `Origin`: a scheme, a host and maybe a port,
/// with no path. Rejecting anything else at startup catches `https://app.example.com/`
/// (trailing slash), which would never match and silently block every call.
fn parse_origin(value: &str) -> Result<CorsOrigin, String> {
    let value = value.trim();
    if value == "*" {
        return Ok(CorsOrigin::Any);
    }
    let Some((scheme, authority)) = value.split_once("://") else {
        return Err(format!(
            "{value:?} is not an origin: expected scheme://host[:port], e.g. https://chat.example.com"
        ));
    };
    if scheme.is_empty() || authority.is_empty() || authority.contains(['/', '?', '#']) {
        return Err(format!(
            "{value:?} is not an origin: expected scheme://host[:port] with no path or trailing slash"
        ));
    }
    HeaderValue::from_str(value)
        .map(CorsOrigin::Exact)
        .map_err(|_| format!("{value:?} is not an origin: it contains characters a header cannot carry"))
}

/// The layers in front of the server's own when gRPC-Web is on: CORS outermost (a
/// preflight is answered before anything else sees it), then the translation.
pub(crate) type WebLayers = Either<Stack<tonic_web::GrpcWebLayer, Either<CorsLayer, Identity>>, Identity>;

impl GrpcWebArgs {
    pub(crate) fn layers(&self) -> WebLayers {
        let enabled = self.grpc_web.then(|| {
            let cors = self.cors();
            if cors.is_none() {
                tracing::info!("gRPC-Web on, for pages of this server's own origin only (no --cors-allowed-origins)");
            }
            Stack::new(tonic_web::GrpcWebLayer::new(), option_layer(cors))
        });
        option_layer(enabled)
    }

    /// None without allowed origins: no CORS headers, so browsers allow only same-origin pages.
    fn cors(&self) -> Option<CorsLayer> {
        if self.cors_allowed_origins.is_empty() {
            return None;
        }
        let origins = if self.cors_allowed_origins.contains(&CorsOrigin::Any) {
            AllowOrigin::any()
        } else {
            AllowOrigin::list(self.cors_allowed_origins.iter().filter_map(|origin| match origin {
                CorsOrigin::Exact(value) => Some(value.clone()),
                CorsOrigin::Any => None,
            }))
        };
        Some(
            CorsLayer::new()
                .allow_origin(origins)
                .allow_methods([Method::POST])
                // Whatever the page asks for (authorization, x-grpc-web, grpc-timeout, custom
                // metadata…): the origin check is what keeps other pages out.
                .allow_headers(AllowHeaders::mirror_request())
                .expose_headers(EXPOSED_HEADERS.map(HeaderName::from_static))
                .max_age(PREFLIGHT_MAX_AGE),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_scheme_host_and_port_only() {
        assert_eq!(parse_origin("*"), Ok(CorsOrigin::Any));
        assert_eq!(
            parse_origin("http://localhost:8080"),
            Ok(CorsOrigin::Exact(HeaderValue::from_static("http://localhost:8080")))
        );
        for bad in [
            "localhost:8080",
            "https://app.example.com/",
            "https://app.example.com/chat",
            "https://",
        ] {
            let err = parse_origin(bad).unwrap_err();
            assert!(err.contains("is not an origin"), "{bad}: {err}");
        }
    }
}
