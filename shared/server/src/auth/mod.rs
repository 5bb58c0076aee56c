//! Authentication and authorization of every call, in one tower layer around all
//! routes (see [`layer`]).
//!
//! Off by default. With `--auth required` every call carries `authorization:
//! Bearer <token>`, where the token is a static API key (`--api-keys`, a file of
//! SHA-256 hashes) or a JWT (`--jwt-hs256-secret-file`, `--jwt-jwks`). A credential
//! names the apps it may use and either one user (it may touch only that user's
//! sessions, artifacts, watches and runs) or the admin role (anything in its apps).
//! Health and reflection stay public unless `--auth-public-health false` /
//! `--auth-public-reflection false`.

mod jwt;
mod keys;
pub(crate) mod layer;
pub(crate) mod scope;

use adk_grpc_core::AdkError;
use std::path::PathBuf;
use std::sync::Arc;
use tonic::Status;

pub use jwt::JwtError;
pub use keys::ApiKeysError;

/// Whether calls need a credential.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum AuthMode {
    /// Every call is accepted as is.
    #[default]
    Off,
    /// Every call (but public health and reflection) needs a bearer token.
    Required,
}

/// Authentication and authorization settings.
#[derive(Debug, Clone, clap::Args)]
pub struct AuthArgs {
    /// `required`: every call needs `authorization: Bearer <token>` (an API key or a JWT) and may only touch
    /// the apps and the user its credential names
    #[arg(long, env = "ADK_AUTH", value_enum, value_name = "MODE", default_value_t = AuthMode::Off)]
    pub auth: AuthMode,

    /// API keys: a file of JSON lines `{"sha256": "<hex of the key>", "apps": ["*"], "user": "<id>"}` (or
    /// `"role": "admin"` instead of `"user"`)
    #[arg(long, env = "ADK_API_KEYS", value_name = "FILE")]
    pub api_keys: Option<PathBuf>,

    /// Accept HS256 JWTs signed with the secret in this file (the file's bytes, one trailing newline
    /// dropped)
    #[arg(long, env = "ADK_JWT_HS256_SECRET_FILE", value_name = "FILE")]
    pub jwt_hs256_secret_file: Option<PathBuf>,

    /// Accept RS256 and ES256 JWTs signed by a key of this JWKS file (selected by the token's `kid`)
    #[arg(long, env = "ADK_JWT_JWKS", value_name = "FILE")]
    pub jwt_jwks: Option<PathBuf>,

    /// Required `aud` of JWTs
    #[arg(long, env = "ADK_JWT_AUDIENCE", value_name = "AUD")]
    pub jwt_audience: Option<String>,

    /// Required `iss` of JWTs
    #[arg(long, env = "ADK_JWT_ISSUER", value_name = "ISS")]
    pub jwt_issuer: Option<String>,

    /// Serve grpc.health.v1 without a credential
    #[arg(long, env = "ADK_AUTH_PUBLIC_HEALTH", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub auth_public_health: bool,

    /// Serve server reflection without a credential
    #[arg(long, env = "ADK_AUTH_PUBLIC_REFLECTION", value_name = "BOOL", default_value_t = true, action = clap::ArgAction::Set)]
    pub auth_public_reflection: bool,
}

impl Default for AuthArgs {
    fn default() -> Self {
        AuthArgs {
            auth: AuthMode::Off,
            api_keys: None,
            jwt_hs256_secret_file: None,
            jwt_jwks: None,
            jwt_audience: None,
            jwt_issuer: None,
            auth_public_health: true,
            auth_public_reflection: true,
        }
    }
}

/// Why the auth settings cannot be used; reported at startup.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    #[error("--auth required needs at least one credential source: --api-keys, --jwt-hs256-secret-file or --jwt-jwks")]
    NoCredentials,
    #[error("{0} is set but --auth is off (set --auth required / ADK_AUTH=required, or remove it)")]
    UnusedSetting(&'static str),
    #[error("the API keys file is not valid")]
    ApiKeys(#[from] ApiKeysError),
    #[error("the JWT settings are not valid")]
    Jwt(#[from] JwtError),
}

/// Who a call comes from, as its credential says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Principal {
    pub subject: Subject,
    pub apps: Apps,
}

/// One user's credential, or an admin's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// May touch only this user's data.
    User(String),
    /// May touch any user's data in its apps.
    Admin,
}

/// The apps a credential may use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Apps {
    /// `["*"]`.
    All,
    Only(Vec<String>),
}

impl Apps {
    pub(crate) fn from_list(apps: Vec<String>) -> Apps {
        if apps.iter().any(|app| app == "*") {
            Apps::All
        } else {
            Apps::Only(apps)
        }
    }

    pub fn allows(&self, app: &str) -> bool {
        match self {
            Apps::All => true,
            Apps::Only(apps) => apps.iter().any(|allowed| allowed == app),
        }
    }
}

/// Checks bearer tokens against the configured API keys and JWT keys.
#[derive(Debug)]
pub(crate) struct Authenticator {
    keys: keys::ApiKeys,
    jwt: Option<jwt::JwtVerifier>,
}

impl Authenticator {
    /// The authenticator `args` describe; None when auth is off.
    pub(crate) fn from_args(args: &AuthArgs) -> Result<Option<Arc<Authenticator>>, AuthError> {
        if args.auth == AuthMode::Off {
            let unused = [
                (args.api_keys.is_some(), "--api-keys"),
                (args.jwt_hs256_secret_file.is_some(), "--jwt-hs256-secret-file"),
                (args.jwt_jwks.is_some(), "--jwt-jwks"),
                (args.jwt_audience.is_some(), "--jwt-audience"),
                (args.jwt_issuer.is_some(), "--jwt-issuer"),
            ];
            return match unused.into_iter().find(|(set, _)| *set) {
                Some((_, flag)) => Err(AuthError::UnusedSetting(flag)),
                None => Ok(None),
            };
        }
        let keys = match &args.api_keys {
            Some(path) => keys::ApiKeys::load(path)?,
            None => keys::ApiKeys::default(),
        };
        let jwt = jwt::JwtVerifier::from_args(args)?;
        if keys.is_empty() && jwt.is_none() {
            return Err(AuthError::NoCredentials);
        }
        Ok(Some(Arc::new(Authenticator { keys, jwt })))
    }

    /// The principal of an `authorization` metadata value; UNAUTHENTICATED (never
    /// quoting the token) when it is missing or not valid.
    pub(crate) fn authenticate(&self, authorization: Option<&[u8]>) -> Result<Principal, Status> {
        let Some(value) = authorization else {
            return Err(Status::from(AdkError::Unauthenticated(String::from(
                "this server requires a credential: send `authorization: Bearer <API key or JWT>` metadata",
            ))));
        };
        let token = std::str::from_utf8(value)
            .ok()
            .and_then(|value| {
                let (scheme, token) = value.trim().split_once(' ')?;
                scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
            })
            .filter(|token| !token.is_empty())
            .ok_or_else(|| {
                Status::from(AdkError::Unauthenticated(String::from(
                    "the `authorization` metadata must be `Bearer <token>`",
                )))
            })?;
        if let Some(jwt) = self.jwt.as_ref().filter(|_| jwt::looks_like_jwt(token)) {
            return jwt.verify(token);
        }
        self.keys.find(token).ok_or_else(|| {
            Status::from(AdkError::Unauthenticated(String::from(
                "the bearer token is not a valid credential for this server",
            )))
        })
    }
}
