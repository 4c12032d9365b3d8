//! The server: accept loop, routing, the scripted answers and the counters.

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::header::{CONTENT_LENGTH, CONTENT_TYPE, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use crate::body::MockBody;
use crate::multipart;
use crate::scenario::{Behaviour, Route, Scenario, Step, UsageChoice};

/// Largest request body the mock reads (OCR uploads included).
const MAX_REQUEST_BYTES: usize = 64 * 1024 * 1024;
const JSON: &str = "application/json";

/// A running mock upstream. Dropping it stops the server and every connection.
pub struct MockUpstream {
    addr: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Drop for MockUpstream {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl MockUpstream {
    /// Start on a free loopback port with `scenario`, on the current tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves nothing running.
    pub async fn start(scenario: Scenario) -> std::io::Result<MockUpstream> {
        MockUpstream::bind(SocketAddr::from(([127, 0, 0, 1], 0)), scenario).await
    }

    /// Start on `addr` with `scenario`, on the current tokio runtime.
    ///
    /// # Cancel safety
    ///
    /// Dropping the future before it completes leaves nothing running.
    pub async fn bind(addr: SocketAddr, scenario: Scenario) -> std::io::Result<MockUpstream> {
        let listener = TcpListener::bind(addr).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State::new(scenario));
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        Ok(MockUpstream {
            addr,
            state,
            accept,
        })
    }

    /// The address the server listens on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The OpenAI-style base URL for `source`: `http://ADDR/{source}/v1`.
    pub fn base_url(&self, source: &str) -> String {
        format!("http://{}/{source}/v1", self.addr)
    }

    /// The MonkeyOCR base URL for `source`: `http://ADDR/{source}`.
    pub fn ocr_base_url(&self, source: &str) -> String {
        format!("http://{}/{source}", self.addr)
    }

    /// Replace the scenario; scripts start again from their first step.
    pub fn set_scenario(&self, scenario: Scenario) {
        self.state.set_scenario(scenario);
    }

    /// A snapshot of the counters.
    pub fn counters(&self) -> Counters {
        self.state.counters()
    }

    /// The most requests and tokens `source` received within any window of `window`
    /// (a sliding window over the request log, aligned to each request's arrival).
    pub fn window_peak(&self, source: &str, window: Duration) -> WindowPeak {
        self.state.window_peak(source, window)
    }

    /// Wait until the mock has received at least `n` requests in all — the explicit "entered"
    /// signal for cancellation tests (no sleeping and hoping).
    ///
    /// # Cancel safety
    ///
    /// Dropping the future stops the waiting; nothing else changes.
    pub async fn until_received(&self, n: u64) {
        let mut received = self.state.received.subscribe();
        let _ = received.wait_for(|total| *total >= n).await;
    }
}

/// A snapshot of what the mock received.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct Counters {
    /// Every request, whatever its path.
    pub total: u64,
    /// Requests per (source, route).
    pub requests: BTreeMap<(String, Route), u64>,
    /// Requests now being answered (including hangs).
    pub in_flight: u64,
    /// Hanging requests that ended because the client went away.
    pub hangs_released: u64,
    /// OCR uploads refused by the strict multipart parser.
    pub multipart_rejected: u64,
    /// Requests refused for a wrong or missing API key.
    pub unauthorized: u64,
    /// Requests that arrived over HTTP/2.
    pub http2: u64,
}

impl Counters {
    /// Requests received by `source` on `route`.
    pub fn requests(&self, source: &str, route: Route) -> u64 {
        self.requests
            .get(&(source.to_owned(), route))
            .copied()
            .unwrap_or(0)
    }
}

/// The most a source received within one window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WindowPeak {
    /// Most requests in any window.
    pub requests: u64,
    /// Most tokens (the usage the mock reported) in any window.
    pub tokens: u64,
}

struct Compiled {
    scenario: Scenario,
    cursors: Vec<AtomicUsize>,
}

struct LogEntry {
    at: Duration,
    source: Arc<str>,
    tokens: u64,
}

struct State {
    compiled: RwLock<Arc<Compiled>>,
    started: Instant,
    random: AtomicU64,
    total: AtomicU64,
    in_flight: AtomicU64,
    hangs_released: AtomicU64,
    multipart_rejected: AtomicU64,
    unauthorized: AtomicU64,
    http2: AtomicU64,
    requests: Mutex<BTreeMap<(String, Route), u64>>,
    log: Mutex<Vec<LogEntry>>,
    /// Requests received, for [`MockUpstream::until_received`].
    received: tokio::sync::watch::Sender<u64>,
}

impl State {
    fn new(scenario: Scenario) -> State {
        let seed = scenario.seed.unwrap_or(0x5eed_5eed_5eed_5eed);
        State {
            compiled: RwLock::new(Arc::new(compile(scenario))),
            started: Instant::now(),
            random: AtomicU64::new(seed),
            total: AtomicU64::new(0),
            in_flight: AtomicU64::new(0),
            hangs_released: AtomicU64::new(0),
            multipart_rejected: AtomicU64::new(0),
            unauthorized: AtomicU64::new(0),
            http2: AtomicU64::new(0),
            requests: Mutex::new(BTreeMap::new()),
            log: Mutex::new(Vec::new()),
            received: tokio::sync::watch::Sender::new(0),
        }
    }

    fn set_scenario(&self, scenario: Scenario) {
        *self.compiled.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(compile(scenario));
    }

    fn scenario(&self) -> Arc<Compiled> {
        self.compiled
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// splitmix64 over a shared counter: lock-free and good enough for latencies and mixes.
    fn next_random(&self) -> u64 {
        let mut z = self
            .random
            .fetch_add(0x9e37_79b9_7f4a_7c15, Ordering::Relaxed)
            .wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn record(&self, source: &str, route: Route, tokens: u64, keep_log: bool) {
        self.received.send_modify(|n| *n += 1);
        let mut requests = self.requests.lock().unwrap_or_else(|e| e.into_inner());
        match requests.get_mut(&(source.to_owned(), route)) {
            Some(n) => *n += 1,
            None => {
                requests.insert((source.to_owned(), route), 1);
            }
        }
        drop(requests);
        if keep_log {
            let entry = LogEntry {
                at: self.started.elapsed(),
                source: source.into(),
                tokens,
            };
            self.log
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(entry);
        }
    }

    fn counters(&self) -> Counters {
        Counters {
            total: self.total.load(Ordering::SeqCst),
            requests: self
                .requests
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
            in_flight: self.in_flight.load(Ordering::SeqCst),
            hangs_released: self.hangs_released.load(Ordering::SeqCst),
            multipart_rejected: self.multipart_rejected.load(Ordering::SeqCst),
            unauthorized: self.unauthorized.load(Ordering::SeqCst),
            http2: self.http2.load(Ordering::SeqCst),
        }
    }

    fn window_peak(&self, source: &str, window: Duration) -> WindowPeak {
        let log = self.log.lock().unwrap_or_else(|e| e.into_inner());
        let entries: Vec<(Duration, u64)> = log
            .iter()
            .filter(|e| &*e.source == source)
            .map(|e| (e.at, e.tokens))
            .collect();
        drop(log);
        let mut peak = WindowPeak::default();
        let (mut start, mut tokens) = (0, 0u64);
        for end in 0..entries.len() {
            tokens += entries[end].1;
            while entries[end].0 - entries[start].0 >= window {
                tokens -= entries[start].1;
                start += 1;
            }
            peak.requests = peak.requests.max((end - start + 1) as u64);
            peak.tokens = peak.tokens.max(tokens);
        }
        peak
    }
}

fn compile(scenario: Scenario) -> Compiled {
    let cursors = scenario.rules.iter().map(|_| AtomicUsize::new(0)).collect();
    Compiled { scenario, cursors }
}

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    let mut connections = tokio::task::JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(accepted) => accepted,
            // Out of file descriptors and the like: back off instead of spinning.
            Err(_) => {
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        connections.spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(state.clone(), req));
            let _ = auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
        // Reap finished connections so the set does not grow without bound.
        while connections.try_join_next().is_some() {}
    }
}

/// Counts a request in flight; a hang that is dropped (the client went away) is counted as
/// released.
struct InFlight<'a> {
    state: &'a State,
    hanging: bool,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
        if self.hanging {
            self.state.hangs_released.fetch_add(1, Ordering::SeqCst);
        }
    }
}

async fn handle(
    state: Arc<State>,
    req: Request<Incoming>,
) -> Result<Response<MockBody>, Infallible> {
    if req.uri().path() == STATS_PATH {
        // Reading the counters is not traffic: it counts in nothing, itself included.
        return Ok(stats_response(&state));
    }
    state.total.fetch_add(1, Ordering::Relaxed);
    if req.version() == hyper::Version::HTTP_2 {
        state.http2.fetch_add(1, Ordering::Relaxed);
    }
    state.in_flight.fetch_add(1, Ordering::SeqCst);
    let mut guard = InFlight {
        state: &state,
        hanging: false,
    };
    let response = answer(&state, req, &mut guard).await;
    drop(guard);
    Ok(response)
}

async fn answer(
    state: &State,
    req: Request<Incoming>,
    guard: &mut InFlight<'_>,
) -> Response<MockBody> {
    let path = req.uri().path().to_owned();
    let Some((source, route)) = route_of(&path) else {
        return json_response(
            StatusCode::NOT_FOUND,
            crate::openai_error("no such route", "invalid_request_error", "not_found"),
        );
    };
    if req.method() != Method::POST {
        return json_response(
            StatusCode::METHOD_NOT_ALLOWED,
            crate::openai_error("use POST", "invalid_request_error", "method"),
        );
    }
    let compiled = state.scenario();
    if let Some(expected) = &compiled.scenario.api_key {
        let presented = req
            .headers()
            .get(hyper::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "))
            .unwrap_or("");
        if presented != expected {
            state.unauthorized.fetch_add(1, Ordering::Relaxed);
            state.record(&source, route, 0, !compiled.scenario.no_request_log);
            // Real providers echo (part of) the key they were given; this one echoes all of it.
            let message = format!(
                "Incorrect API key provided: {presented}. You can find your API key in your account settings."
            );
            return json_response(
                StatusCode::UNAUTHORIZED,
                crate::openai_error(&message, "invalid_request_error", "invalid_api_key"),
            );
        }
    }
    let content_type = req
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    let declared = req
        .headers()
        .get(CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > MAX_REQUEST_BYTES) {
        return json_response(
            StatusCode::PAYLOAD_TOO_LARGE,
            crate::openai_error("request too large", "invalid_request_error", "too_large"),
        );
    }
    let body = match req.into_body().collect().await {
        Ok(collected) => collected.to_bytes(),
        Err(_) => {
            return json_response(
                StatusCode::BAD_REQUEST,
                crate::openai_error("unreadable body", "invalid_request_error", "bad_body"),
            );
        }
    };

    let step = pick_step(state, &compiled, &source, route);
    let delay = step.latency_ms.pick(state.next_random());
    if !delay.is_zero() {
        tokio::time::sleep(delay).await;
    }
    let keep_log = !compiled.scenario.no_request_log;
    match &step.behaviour {
        Behaviour::Ok { usage } => {
            let request = match Parsed::new(route, &body, &content_type, &query) {
                Ok(request) => request,
                Err(why) => {
                    if matches!(route, Route::OcrText | Route::Parse) {
                        state.multipart_rejected.fetch_add(1, Ordering::Relaxed);
                    }
                    state.record(&source, route, 0, keep_log);
                    return json_response(
                        StatusCode::BAD_REQUEST,
                        json!({"detail": why}).to_string(),
                    );
                }
            };
            let dims = compiled.scenario.embedding_dims.unwrap_or(8);
            let (reported, tokens) = request.usage(*usage);
            state.record(&source, route, tokens, keep_log);
            json_response(StatusCode::OK, request.success_body(reported, dims))
        }
        Behaviour::Status {
            status,
            retry_after,
            retry_after_ms,
            body,
        } => {
            state.record(&source, route, 0, keep_log);
            let status = StatusCode::from_u16(*status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
            let mut response = json_response(status, body.clone().unwrap_or_default());
            let headers = response.headers_mut();
            for (name, value) in [
                ("retry-after", retry_after),
                ("retry-after-ms", retry_after_ms),
            ] {
                if let Some(value) = value.as_deref().and_then(|v| HeaderValue::from_str(v).ok()) {
                    headers.insert(name, value);
                }
            }
            response
        }
        Behaviour::Hang => {
            state.record(&source, route, 0, keep_log);
            guard.hanging = true;
            std::future::pending::<()>().await;
            unreachable!("a pending future never completes")
        }
        Behaviour::HangAfterHeaders => {
            state.record(&source, route, 0, keep_log);
            let mut response = Response::new(MockBody::Pending);
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            response
        }
        Behaviour::Truncated => {
            state.record(&source, route, 0, keep_log);
            let mut response =
                Response::new(MockBody::truncated(b"{\"id\":\"cut\",\"choices\":[{\"mes"));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            headers.insert(CONTENT_LENGTH, HeaderValue::from_static("400"));
            response
        }
        Behaviour::Malformed => {
            state.record(&source, route, 0, keep_log);
            json_response(
                StatusCode::OK,
                "{\"id\": \"x\", \"choices\": [{\"message\": ".to_owned(),
            )
        }
        Behaviour::WrongContentType => {
            state.record(&source, route, 0, keep_log);
            let mut response =
                Response::new(MockBody::full("<html><body>Bad gateway page</body></html>"));
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static("text/html"));
            response
        }
        Behaviour::MissingFields { usage } => {
            let tokens = usage.map_or(0, |[p, c]| p + c);
            state.record(&source, route, tokens, keep_log);
            let mut body = json!({"id": "missing", "object": "unknown"});
            if let Some([p, c]) = usage {
                body["usage"] =
                    json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c});
            }
            json_response(StatusCode::OK, body.to_string())
        }
        Behaviour::Huge { bytes, chunked } => {
            state.record(&source, route, 0, keep_log);
            let mut response = Response::new(MockBody::Huge {
                remaining: *bytes,
                announced: !chunked,
            });
            response
                .headers_mut()
                .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
            response
        }
        Behaviour::OcrFailure { message } => {
            state.record(&source, route, 0, keep_log);
            json_response(
                StatusCode::OK,
                json!({"success": false, "task_type": "text", "content": "", "message": message})
                    .to_string(),
            )
        }
    }
}

/// The step for this request: the first matching rule's next sequence step, else a draw from
/// its mix; a plain success when no rule matches.
fn pick_step(state: &State, compiled: &Compiled, source: &str, route: Route) -> Step {
    let rule = compiled
        .scenario
        .rules
        .iter()
        .enumerate()
        .find(|(_, rule)| {
            rule.source.as_deref().is_none_or(|s| s == source)
                && rule.route.is_none_or(|r| r == route)
        });
    let Some((index, rule)) = rule else {
        return Step::from(Behaviour::ok());
    };
    let script = &rule.script;
    if !script.sequence.is_empty() {
        let n = compiled.cursors[index].fetch_add(1, Ordering::SeqCst);
        if let Some(step) = script.sequence.get(n) {
            return step.clone();
        }
    }
    let total: u64 = script.then.iter().map(|w| u64::from(w.weight)).sum();
    if total == 0 {
        return Step::from(Behaviour::ok());
    }
    let mut draw = state.next_random() % total;
    for weighted in &script.then {
        let weight = u64::from(weighted.weight);
        if draw < weight {
            return weighted.step.clone();
        }
        draw -= weight;
    }
    Step::from(Behaviour::ok())
}

const STATS_PATH: &str = "/__mock/stats";

/// `GET /__mock/stats`: the counters as JSON.
fn stats_response(state: &State) -> Response<MockBody> {
    let counters = state.counters();
    let requests: BTreeMap<String, u64> = counters
        .requests
        .iter()
        .map(|((source, route), n)| (format!("{source}/{}", route.as_str()), *n))
        .collect();
    json_response(
        StatusCode::OK,
        json!({"total": counters.total, "in_flight": counters.in_flight, "requests": requests})
            .to_string(),
    )
}

/// `/{source}/v1/chat/completions` → (`source`, `Chat`); no prefix → `default`.
fn route_of(path: &str) -> Option<(String, Route)> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (route, suffix_len) = match segments.as_slice() {
        [.., "chat", "completions"] => (Route::Chat, 2),
        [.., "embeddings"] => (Route::Embeddings, 1),
        [.., "ocr", "text"] => (Route::OcrText, 2),
        [.., "parse"] => (Route::Parse, 1),
        _ => return None,
    };
    let prefix = &segments[..segments.len() - suffix_len];
    let source = match prefix {
        [] | ["v1"] => "default",
        [source, ..] => source,
    };
    Some((source.to_owned(), route))
}

fn json_response(status: StatusCode, body: String) -> Response<MockBody> {
    let mut response = Response::new(if body.is_empty() {
        MockBody::empty()
    } else {
        MockBody::full(body)
    });
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static(JSON));
    response
}

/// A request the mock understood.
enum Parsed {
    Chat {
        prompt_chars: usize,
        last: String,
        model: String,
    },
    Embeddings {
        inputs: Vec<String>,
        model: String,
    },
    Ocr {
        bytes: usize,
        filename: String,
    },
    Parse {
        bytes: usize,
        filename: String,
        markdown: bool,
    },
}

impl Parsed {
    fn new(route: Route, body: &Bytes, content_type: &str, query: &str) -> Result<Parsed, String> {
        match route {
            Route::Chat => {
                let value: Value =
                    serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
                let messages = value["messages"].as_array().ok_or("missing messages")?;
                let mut prompt_chars = 0;
                let mut last = String::new();
                for message in messages {
                    let content = message["content"].as_str().unwrap_or_default();
                    prompt_chars += content.chars().count();
                    content.clone_into(&mut last);
                }
                let model = value["model"].as_str().ok_or("missing model")?.to_owned();
                Ok(Parsed::Chat {
                    prompt_chars,
                    last,
                    model,
                })
            }
            Route::Embeddings => {
                let value: Value =
                    serde_json::from_slice(body).map_err(|e| format!("invalid JSON: {e}"))?;
                let inputs = match &value["input"] {
                    Value::String(s) => vec![s.clone()],
                    Value::Array(items) => items
                        .iter()
                        .map(|v| {
                            v.as_str()
                                .map(str::to_owned)
                                .ok_or("input items must be strings")
                        })
                        .collect::<Result<_, _>>()?,
                    _ => return Err("missing input".to_owned()),
                };
                let model = value["model"].as_str().ok_or("missing model")?.to_owned();
                Ok(Parsed::Embeddings { inputs, model })
            }
            Route::OcrText | Route::Parse => {
                let boundary = multipart::boundary(content_type)?;
                let parts = multipart::parse(body, &boundary)?;
                let files: Vec<&multipart::Part> =
                    parts.iter().filter(|p| p.name == "file").collect();
                let [file] = files.as_slice() else {
                    return Err(format!(
                        "expected exactly one part named file, got {}",
                        files.len()
                    ));
                };
                let filename = file
                    .filename
                    .clone()
                    .ok_or("the file part has no filename")?;
                if file.content_type.is_none() {
                    return Err("the file part has no content type".to_owned());
                }
                if file.data.is_empty() {
                    return Err("the file is empty".to_owned());
                }
                let bytes = file.data.len();
                if route == Route::OcrText {
                    return Ok(Parsed::Ocr { bytes, filename });
                }
                let markdown = match query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix("return_type="))
                {
                    Some("markdown") | None => true,
                    Some("json") => false,
                    Some(other) => return Err(format!("unknown return_type {other}")),
                };
                Ok(Parsed::Parse {
                    bytes,
                    filename,
                    markdown,
                })
            }
        }
    }

    /// The usage to put in the body (if any) and the tokens to count as received.
    fn usage(&self, choice: Option<UsageChoice>) -> (Option<[u64; 2]>, u64) {
        let derived = match self {
            Parsed::Chat { prompt_chars, .. } => [(*prompt_chars as u64).div_ceil(4).max(1), 16],
            Parsed::Embeddings { inputs, .. } => [
                inputs
                    .iter()
                    .map(|s| (s.chars().count() as u64).div_ceil(4).max(1))
                    .sum(),
                0,
            ],
            Parsed::Ocr { .. } | Parsed::Parse { .. } => [0, 0],
        };
        let reported = match choice {
            Some(UsageChoice::Fixed(usage)) => Some(usage),
            Some(UsageChoice::Derived) => Some(derived),
            None => None,
        };
        let counted = reported.unwrap_or(derived);
        (reported, counted[0] + counted[1])
    }

    fn success_body(&self, usage: Option<[u64; 2]>, dims: usize) -> String {
        let usage_json = usage.map(
            |[p, c]| json!({"prompt_tokens": p, "completion_tokens": c, "total_tokens": p + c}),
        );
        match self {
            Parsed::Chat { last, model, .. } => {
                let echo: String = last.chars().take(40).collect();
                let mut body = json!({
                    "id": "chatcmpl-mock",
                    "object": "chat.completion",
                    "model": model,
                    "choices": [{"index": 0, "message": {"role": "assistant", "content": format!("mock answer to: {echo}")}, "finish_reason": "stop"}],
                });
                if let Some(u) = usage_json {
                    body["usage"] = u;
                }
                body.to_string()
            }
            Parsed::Embeddings { inputs, model } => {
                let data: Vec<Value> = inputs
                    .iter()
                    .enumerate()
                    .map(|(i, text)| json!({"object": "embedding", "index": i, "embedding": vector(text, dims)}))
                    .collect();
                let mut body = json!({"object": "list", "model": model, "data": data});
                if let Some(u) = usage_json {
                    body["usage"] = json!({"prompt_tokens": u["prompt_tokens"], "total_tokens": u["prompt_tokens"]});
                }
                body.to_string()
            }
            Parsed::Ocr { bytes, filename } => json!({
                "success": true, "task_type": "text",
                "content": format!("text of {filename} ({bytes} bytes)"), "message": "ok"
            })
            .to_string(),
            Parsed::Parse {
                bytes,
                filename,
                markdown,
            } => {
                let (content, content_type) = if *markdown {
                    (
                        json!(format!("# {filename}\n\n{bytes} bytes parsed")),
                        "markdown",
                    )
                } else {
                    (
                        json!([{"type": "title", "text": filename}, {"type": "text", "text": format!("{bytes} bytes parsed")}]),
                        "json",
                    )
                };
                json!({"success": true, "message": "ok", "content": content, "content_type": content_type, "files": [], "download_url": null}).to_string()
            }
        }
    }
}

/// A deterministic unit-ish vector for `text`, so tests can check order: component 0 encodes
/// the text's length.
pub(crate) fn vector(text: &str, dims: usize) -> Vec<f32> {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in text.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3);
    }
    (0..dims.max(1))
        .map(|i| {
            if i == 0 {
                text.chars().count() as f32
            } else {
                h = h.rotate_left(7).wrapping_mul(0x9e37_79b9_7f4a_7c15);
                ((h >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn routes_and_sources_come_from_the_path() {
        assert_eq!(
            route_of("/A/v1/chat/completions"),
            Some(("A".into(), Route::Chat))
        );
        assert_eq!(
            route_of("/v1/embeddings"),
            Some(("default".into(), Route::Embeddings))
        );
        assert_eq!(
            route_of("/OCR1/ocr/text"),
            Some(("OCR1".into(), Route::OcrText))
        );
        assert_eq!(route_of("/parse"), Some(("default".into(), Route::Parse)));
        assert_eq!(route_of("/A/v1/models"), None);
    }

    #[test]
    fn window_peak_slides_over_the_log() {
        let state = State::new(Scenario::default());
        let mut log = state.log.lock().expect("lock");
        for (ms, tokens) in [(0, 10), (500, 20), (999, 30), (1000, 40), (2500, 5)] {
            log.push(LogEntry {
                at: Duration::from_millis(ms),
                source: "A".into(),
                tokens,
            });
        }
        log.push(LogEntry {
            at: Duration::from_millis(10),
            source: "B".into(),
            tokens: 1000,
        });
        drop(log);
        let peak = state.window_peak("A", Duration::from_secs(1));
        assert_eq!(
            peak,
            WindowPeak {
                requests: 3,
                tokens: 90
            }
        );
    }
}
