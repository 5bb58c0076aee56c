//! JWT bearer tokens: HS256 with a shared secret, RS256 and ES256 with the public
//! keys of a JWKS file. `exp` is required, `nbf` checked when present, `aud` and
//! `iss` required to match when configured. Claims: `sub` is the user id, `apps`
//! (array of app names, `"*"` for all) the apps, `role: "admin"` an admin.

use super::{Apps, AuthArgs, Principal, Subject};
use adk_grpc_core::AdkError;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, JwkSet};
use jsonwebtoken::{Algorithm, DecodingKey, Validation, errors::ErrorKind};
use std::path::{Path, PathBuf};
use tonic::Status;

/// Clock skew tolerated on `exp` and `nbf`.
const LEEWAY_SECS: u64 = 30;

#[derive(Debug, thiserror::Error)]
pub enum JwtError {
    #[error("cannot read {what} {path}")]
    Read {
        what: &'static str,
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("the HS256 secret in {path} is shorter than 32 bytes")]
    ShortSecret { path: PathBuf },
    #[error("{path} is not a JWKS (a JSON object with a `keys` array)")]
    Jwks { path: PathBuf, source: serde_json::Error },
    #[error("{path} holds no RSA or P-256 EC public key (RS256 / ES256)")]
    NoUsableKey { path: PathBuf },
    #[error("{path}: key {kid:?} is not a valid public key")]
    BadKey {
        path: PathBuf,
        kid: Option<String>,
        source: jsonwebtoken::errors::Error,
    },
    #[error("--jwt-audience / --jwt-issuer need --jwt-hs256-secret-file or --jwt-jwks")]
    NoJwtKeys,
}

#[derive(Debug, serde::Deserialize)]
struct Claims {
    sub: String,
    #[serde(default)]
    apps: Vec<String>,
    #[serde(default)]
    role: Option<String>,
}

struct PublicKey {
    kid: Option<String>,
    algorithm: Algorithm,
    key: DecodingKey,
}

pub(crate) struct JwtVerifier {
    hs256: Option<DecodingKey>,
    public_keys: Vec<PublicKey>,
    audience: Option<String>,
    issuer: Option<String>,
}

impl std::fmt::Debug for JwtVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JwtVerifier")
            .field("hs256", &self.hs256.is_some())
            .field("public_keys", &self.public_keys.len())
            .field("audience", &self.audience)
            .field("issuer", &self.issuer)
            .finish()
    }
}

/// Three base64url segments, the first a JSON header (`eyJ` is `{"`): an API key
/// never looks like that unless someone made it so, and then it is checked as a JWT.
pub(crate) fn looks_like_jwt(token: &str) -> bool {
    token.starts_with("eyJ") && token.split('.').count() == 3
}

impl JwtVerifier {
    pub(crate) fn from_args(args: &AuthArgs) -> Result<Option<JwtVerifier>, JwtError> {
        let hs256 = match &args.jwt_hs256_secret_file {
            Some(path) => {
                let mut secret = read(path, "the HS256 secret")?;
                if secret.last() == Some(&b'\n') {
                    secret.pop();
                    if secret.last() == Some(&b'\r') {
                        secret.pop();
                    }
                }
                if secret.len() < 32 {
                    return Err(JwtError::ShortSecret { path: path.clone() });
                }
                Some(DecodingKey::from_secret(&secret))
            }
            None => None,
        };
        let public_keys = match &args.jwt_jwks {
            Some(path) => load_jwks(path)?,
            None => Vec::new(),
        };
        if hs256.is_none() && public_keys.is_empty() {
            if args.jwt_audience.is_some() || args.jwt_issuer.is_some() {
                return Err(JwtError::NoJwtKeys);
            }
            return Ok(None);
        }
        Ok(Some(JwtVerifier {
            hs256,
            public_keys,
            audience: args.jwt_audience.clone(),
            issuer: args.jwt_issuer.clone(),
        }))
    }

    pub(crate) fn verify(&self, token: &str) -> Result<Principal, Status> {
        let invalid = |why: &str| Status::from(AdkError::Unauthenticated(format!("the JWT is not valid: {why}")));
        let header = jsonwebtoken::decode_header(token).map_err(|_| invalid("its header does not decode"))?;
        // Each algorithm only with its own kind of key: no HS256 token is ever checked
        // against a public key (the classic algorithm-confusion attack).
        let key = match header.alg {
            Algorithm::HS256 => self
                .hs256
                .as_ref()
                .ok_or_else(|| invalid("HS256 tokens are not accepted here"))?,
            Algorithm::RS256 | Algorithm::ES256 => {
                let candidates: Vec<&PublicKey> = self
                    .public_keys
                    .iter()
                    .filter(|key| key.algorithm == header.alg)
                    .filter(|key| header.kid.is_none() || key.kid == header.kid)
                    .collect();
                match candidates.as_slice() {
                    [key] => &key.key,
                    [] => return Err(invalid("no key of the JWKS matches its `alg` and `kid`")),
                    _ => return Err(invalid("it has no `kid` and the JWKS holds several keys for its `alg`")),
                }
            }
            _ => return Err(invalid("only HS256, RS256 and ES256 are accepted")),
        };
        let mut validation = Validation::new(header.alg);
        validation.leeway = LEEWAY_SECS;
        validation.validate_exp = true;
        validation.validate_nbf = true;
        let mut required = vec!["exp", "sub"];
        match &self.audience {
            Some(audience) => {
                validation.set_audience(&[audience]);
                required.push("aud");
            }
            None => validation.validate_aud = false,
        }
        if let Some(issuer) = &self.issuer {
            validation.set_issuer(&[issuer]);
            required.push("iss");
        }
        validation.set_required_spec_claims(&required);
        let claims = jsonwebtoken::decode::<Claims>(token, key, &validation)
            .map_err(|err| {
                invalid(&match err.kind() {
                    ErrorKind::ExpiredSignature => "it has expired (`exp`)".to_string(),
                    ErrorKind::ImmatureSignature => "it is not valid yet (`nbf`)".to_string(),
                    ErrorKind::InvalidAudience => "wrong audience (`aud`)".to_string(),
                    ErrorKind::InvalidIssuer => "wrong issuer (`iss`)".to_string(),
                    ErrorKind::InvalidSignature => "bad signature".to_string(),
                    ErrorKind::MissingRequiredClaim(claim) => format!("the `{claim}` claim is missing"),
                    ErrorKind::Json(_) => {
                        "its claims are malformed (`sub` a string, `apps` an array of strings)".to_string()
                    }
                    _ => "it does not verify".to_string(),
                })
            })?
            .claims;
        let subject = match claims.role.as_deref() {
            Some("admin") => Subject::Admin,
            _ if claims.sub.is_empty() => return Err(invalid("`sub` is empty")),
            _ => Subject::User(claims.sub),
        };
        Ok(Principal {
            subject,
            apps: Apps::from_list(claims.apps),
        })
    }
}

fn load_jwks(path: &Path) -> Result<Vec<PublicKey>, JwtError> {
    let bytes = read(path, "the JWKS")?;
    let set: JwkSet = serde_json::from_slice(&bytes).map_err(|source| JwtError::Jwks {
        path: path.to_path_buf(),
        source,
    })?;
    let mut keys = Vec::new();
    for jwk in &set.keys {
        let algorithm = match &jwk.algorithm {
            AlgorithmParameters::RSA(_) => Algorithm::RS256,
            AlgorithmParameters::EllipticCurve(ec) if ec.curve == EllipticCurve::P256 => Algorithm::ES256,
            _ => {
                tracing::warn!(kid = ?jwk.common.key_id, "skipping a JWKS key that is neither RSA nor P-256 EC");
                continue;
            }
        };
        let key = DecodingKey::from_jwk(jwk).map_err(|source| JwtError::BadKey {
            path: path.to_path_buf(),
            kid: jwk.common.key_id.clone(),
            source,
        })?;
        keys.push(PublicKey {
            kid: jwk.common.key_id.clone(),
            algorithm,
            key,
        });
    }
    if keys.is_empty() {
        return Err(JwtError::NoUsableKey {
            path: path.to_path_buf(),
        });
    }
    Ok(keys)
}

fn read(path: &Path, what: &'static str) -> Result<Vec<u8>, JwtError> {
    std::fs::read(path).map_err(|source| JwtError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}
