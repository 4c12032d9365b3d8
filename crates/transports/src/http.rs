//! The one pooled HTTP client every transport shares: hyper-util's pooled client over rustls
//! (ring provider), HTTP/1.1 and HTTP/2 (ALPN over TLS, or prior knowledge on plain TCP), a
//! connect timeout, a per-attempt timeout until the whole body is read, and a response size
//! cap.
//!
//! Sending and reading the body are separate steps ([`HttpClient::send`] returns the head with
//! the body still unread, [`read_capped`] collects it), so server-sent events can consume the
//! same `Incoming` body frame by frame without reworking this layer.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::Incoming;
use hyper::header::{AUTHORIZATION, CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Request, Response, Uri};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioTimer};
use polygateway_errors::{AttemptFailure, FailureKind};
use polygateway_ports::Secret;

/// Settings of the shared HTTP client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpConfig {
    /// Bound on establishing a TCP (and TLS) connection.
    pub connect_timeout: Duration,
    /// Largest response body read; a larger one is a classified failure, never read whole.
    pub max_response_bytes: usize,
    /// Speak HTTP/2 without negotiation on plain `http://` URLs (h2c). Over TLS, HTTP/2 is
    /// negotiated by ALPN whatever this says.
    pub http2_prior_knowledge: bool,
    /// How long an idle pooled connection is kept.
    pub pool_idle_timeout: Duration,
    /// Idle connections kept per host.
    pub pool_max_idle_per_host: usize,
}

/// Default [`HttpConfig::max_response_bytes`]: 16 MiB, room for 64 embeddings of 3072
/// dimensions as JSON (≈ 2.5 MiB) many times over, small enough that a runaway body is cut.
pub const DEFAULT_MAX_RESPONSE_BYTES: usize = 16 * 1024 * 1024;

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            connect_timeout: Duration::from_secs(10),
            max_response_bytes: DEFAULT_MAX_RESPONSE_BYTES,
            http2_prior_knowledge: false,
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 256,
        }
    }
}

/// The pooled client. Cheap to clone; clones share the pool.
#[derive(Clone)]
pub struct HttpClient {
    client: Client<HttpsConnector<HttpConnector>, Full<Bytes>>,
    max_response_bytes: usize,
}

impl std::fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpClient")
            .field("max_response_bytes", &self.max_response_bytes)
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client with `config`, trusting the platform's root certificates. On a machine with
    /// none, `https://` sources fail their TLS handshake (classified `Transient`, code
    /// `connect`) while `http://` sources work; a warning says so once.
    pub fn new(config: &HttpConfig) -> HttpClient {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = hyper_rustls::HttpsConnectorBuilder::new();
        let builder = match builder.with_provider_and_native_roots(provider.clone()) {
            Ok(builder) => builder,
            Err(error) => {
                tracing::warn!(%error, "no platform root certificates: https sources cannot be verified");
                let tls = rustls::ClientConfig::builder_with_provider(provider)
                    .with_safe_default_protocol_versions()
                    .map(|b| {
                        b.with_root_certificates(rustls::RootCertStore::empty())
                            .with_no_client_auth()
                    })
                    .expect("the ring provider supports the default protocol versions");
                hyper_rustls::HttpsConnectorBuilder::new().with_tls_config(tls)
            }
        };
        let mut http = HttpConnector::new();
        http.set_connect_timeout(Some(config.connect_timeout));
        http.set_nodelay(true);
        http.enforce_http(false);
        let connector = builder
            .https_or_http()
            .enable_http1()
            .enable_http2()
            .wrap_connector(http);
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .timer(TokioTimer::new())
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .http2_only(config.http2_prior_knowledge)
            .build(connector);
        HttpClient {
            client,
            max_response_bytes: config.max_response_bytes,
        }
    }

    /// The response size cap.
    pub fn max_response_bytes(&self) -> usize {
        self.max_response_bytes
    }

    /// Send a `POST` to `url` with `body` and return the response head, its body unread.
    ///
    /// Failures before a response arrived are classified here: `connect` (the request was
    /// not sent — safe to retry anywhere) and `io` (the connection failed after the request
    /// may have been sent), both `Transient`.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future drops the request; hyper closes or returns the connection.
    pub async fn send(
        &self,
        url: &str,
        content_type: &str,
        api_key: Option<&Secret>,
        body: Bytes,
    ) -> Result<Response<Incoming>, AttemptFailure> {
        let uri: Uri = url.parse().map_err(|_| {
            AttemptFailure::new(
                FailureKind::SourceDead,
                "bad_url",
                "cannot build a request URL from the source's base URL",
            )
        })?;
        let mut request = Request::post(uri);
        let headers = request
            .headers_mut()
            .expect("a fresh request builder has headers");
        headers.insert(
            CONTENT_TYPE,
            HeaderValue::from_str(content_type).map_err(|_| {
                AttemptFailure::new(
                    FailureKind::RequestRejected,
                    "bad_content_type",
                    "invalid content type",
                )
            })?,
        );
        headers.insert(CONTENT_LENGTH, HeaderValue::from(body.len()));
        if let Some(key) = api_key {
            let mut value =
                HeaderValue::from_str(&format!("Bearer {}", key.expose())).map_err(|_| {
                    // Never echo the key: say only that it cannot be a header.
                    AttemptFailure::new(
                        FailureKind::SourceDead,
                        "bad_api_key",
                        "the API key contains characters not allowed in a header",
                    )
                })?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let request = request
            .body(Full::new(body))
            .expect("method, URI and headers were validated above");
        self.client.request(request).await.map_err(|error| {
            if error.is_connect() {
                AttemptFailure::new(
                    FailureKind::Transient,
                    "connect",
                    format!("cannot connect: {}", root_cause(&error)),
                )
            } else {
                AttemptFailure::new(
                    FailureKind::Transient,
                    "io",
                    format!("connection failed: {}", root_cause(&error)),
                )
            }
        })
    }
}

/// Why reading a body failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BodyError {
    /// The body is larger than the cap (announced or found while reading).
    TooLarge {
        /// The cap.
        cap: usize,
    },
    /// The connection failed before the body was complete.
    Truncated(String),
}

/// Read the whole body, refusing more than `cap` bytes: an announced `Content-Length` above
/// the cap is refused before reading anything, and a body that grows past it is abandoned at
/// the cap, so memory stays bounded whatever the upstream sends.
pub async fn read_capped(response: Response<Incoming>, cap: usize) -> Result<Bytes, BodyError> {
    let announced = response
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if announced.is_some_and(|n| n > cap as u64) {
        return Err(BodyError::TooLarge { cap });
    }
    match Limited::new(response.into_body(), cap).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.downcast_ref::<LengthLimitError>().is_some() => {
            Err(BodyError::TooLarge { cap })
        }
        Err(error) => Err(BodyError::Truncated(root_cause(error.as_ref()))),
    }
}

/// The innermost cause of an error, which is where hyper puts the useful words.
fn root_cause(error: &(dyn std::error::Error + 'static)) -> String {
    let mut current = error;
    let mut text = current.to_string();
    while let Some(source) = current.source() {
        current = source;
        text = format!("{text}: {current}");
    }
    text
}
