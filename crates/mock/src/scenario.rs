//! What the mock does, per route and source: a script of steps, then a weighted mix.
//!
//! A scenario is plain serde data, so `polygw mock --scenario FILE` reads the same thing a test
//! builds in code. See `docs/mock-upstream.md` for the file format.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// The endpoints the mock speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// `POST …/chat/completions`
    Chat,
    /// `POST …/embeddings`
    Embeddings,
    /// `POST …/ocr/text`
    OcrText,
    /// `POST …/parse?return_type=…`
    Parse,
}

impl Route {
    /// `chat`, `embeddings`, `ocr_text`, `parse`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Route::Chat => "chat",
            Route::Embeddings => "embeddings",
            Route::OcrText => "ocr_text",
            Route::Parse => "parse",
        }
    }
}

/// How long a step waits before it answers: fixed, or uniform in `[min, max]`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Latency {
    /// No wait.
    #[default]
    None,
    /// Exactly this many milliseconds.
    Fixed(u64),
    /// Uniformly random milliseconds in `[min, max]`.
    Range([u64; 2]),
}

impl Latency {
    pub(crate) fn pick(self, random: u64) -> Duration {
        match self {
            Latency::None => Duration::ZERO,
            Latency::Fixed(ms) => Duration::from_millis(ms),
            Latency::Range([min, max]) if max > min => {
                Duration::from_millis(min + random % (max - min + 1))
            }
            Latency::Range([min, _]) => Duration::from_millis(min),
        }
    }
}

/// One answer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Behaviour {
    /// A well-formed success. `usage` is `[prompt, completion]`; `null` omits usage from the
    /// body; absent derives it from the request (≈ 4 characters per token).
    Ok {
        /// `[prompt_tokens, completion_tokens]`, or `None` to send no usage at all.
        #[serde(default = "derived_usage")]
        usage: Option<UsageChoice>,
    },
    /// An error status with an optional `Retry-After`, `retry-after-ms` and body.
    Status {
        /// The HTTP status.
        status: u16,
        /// The `Retry-After` header, verbatim.
        #[serde(default)]
        retry_after: Option<String>,
        /// The `retry-after-ms` header, verbatim.
        #[serde(default)]
        retry_after_ms: Option<String>,
        /// The body (JSON error bodies in OpenAI's shape are typical); empty when absent.
        #[serde(default)]
        body: Option<String>,
    },
    /// Never answer; the request ends when the client goes away.
    Hang,
    /// Send `200` headers, then never send the body.
    HangAfterHeaders,
    /// Announce a body and close the connection half-way through it.
    Truncated,
    /// `200` with a body that is not JSON.
    Malformed,
    /// `200` with `content-type: text/html` and an HTML body.
    WrongContentType,
    /// `200` JSON without `choices` / `data` / `success` (with a usage when `usage` is given).
    MissingFields {
        /// Usage to report although the result is unusable.
        #[serde(default)]
        usage: Option<[u64; 2]>,
    },
    /// `200` with a JSON-looking body of this many bytes.
    Huge {
        /// The body size.
        bytes: u64,
        /// Send it chunked, without a `Content-Length`, so the client only finds out while
        /// reading.
        #[serde(default)]
        chunked: bool,
    },
    /// OCR only: `200` with `success: false` and this message.
    OcrFailure {
        /// The service's message.
        message: String,
    },
}

fn derived_usage() -> Option<UsageChoice> {
    Some(UsageChoice::Derived)
}

/// Where an `Ok` answer's usage comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UsageChoice {
    /// Exactly `[prompt_tokens, completion_tokens]`.
    Fixed([u64; 2]),
    /// From the request: prompt ≈ characters / 4, completion 16 (chat) or 0 (embeddings).
    #[serde(skip)]
    Derived,
}

impl Behaviour {
    /// A success with usage derived from the request.
    pub fn ok() -> Self {
        Behaviour::Ok {
            usage: Some(UsageChoice::Derived),
        }
    }

    /// A success with this usage.
    pub fn ok_with_usage(prompt: u64, completion: u64) -> Self {
        Behaviour::Ok {
            usage: Some(UsageChoice::Fixed([prompt, completion])),
        }
    }

    /// An error status with an empty body.
    pub fn status(status: u16) -> Self {
        Behaviour::Status {
            status,
            retry_after: None,
            retry_after_ms: None,
            body: None,
        }
    }

    /// A 429 with this `Retry-After`.
    pub fn rate_limited(retry_after: &str) -> Self {
        Behaviour::Status {
            status: 429,
            retry_after: Some(retry_after.to_owned()),
            retry_after_ms: None,
            body: Some(openai_error(
                "Rate limit reached",
                "requests",
                "rate_limit_exceeded",
            )),
        }
    }
}

/// An OpenAI-shaped error body.
pub fn openai_error(message: &str, kind: &str, code: &str) -> String {
    serde_json::json!({"error": {"message": message, "type": kind, "code": code}}).to_string()
}

/// A behaviour and how long to wait before it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// The answer.
    #[serde(flatten)]
    pub behaviour: Behaviour,
    /// The wait before answering.
    #[serde(default)]
    pub latency_ms: Latency,
}

impl From<Behaviour> for Step {
    fn from(behaviour: Behaviour) -> Self {
        Step {
            behaviour,
            latency_ms: Latency::None,
        }
    }
}

impl Step {
    /// This step after `latency`.
    #[must_use]
    pub fn after(mut self, latency: Latency) -> Self {
        self.latency_ms = latency;
        self
    }
}

/// A step with a weight in a mix.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Weighted {
    /// Relative weight (> 0).
    pub weight: u32,
    /// The step.
    #[serde(flatten)]
    pub step: Step,
}

/// The steps of one route: `sequence` in order (one per request), then `then` for every
/// request after — a weighted random mix (one entry = always that step).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Script {
    /// Steps taken in order, one per request.
    #[serde(default)]
    pub sequence: Vec<Step>,
    /// The mix after the sequence; empty means a plain success.
    #[serde(default)]
    pub then: Vec<Weighted>,
}

impl Script {
    /// Always `step`.
    pub fn always(step: impl Into<Step>) -> Self {
        Script {
            sequence: Vec::new(),
            then: vec![Weighted {
                weight: 1,
                step: step.into(),
            }],
        }
    }

    /// `steps` in order, then plain successes.
    pub fn sequence(steps: impl IntoIterator<Item = Step>) -> Self {
        Script {
            sequence: steps.into_iter().collect(),
            then: Vec::new(),
        }
    }

    /// The mix after the sequence.
    #[must_use]
    pub fn then(mut self, mix: impl IntoIterator<Item = (u32, Step)>) -> Self {
        self.then = mix
            .into_iter()
            .map(|(weight, step)| Weighted { weight, step })
            .collect();
        self
    }
}

/// One rule: which requests it applies to, and its script. The first matching rule wins.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rule {
    /// The source (first path segment); `None` matches every source.
    #[serde(default)]
    pub source: Option<String>,
    /// The route; `None` matches every route.
    #[serde(default)]
    pub route: Option<Route>,
    /// What to do.
    #[serde(flatten)]
    pub script: Script,
}

/// Everything the mock does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Scenario {
    /// Rules, first match wins; a request no rule matches gets a plain success.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// When set, requests must carry `Authorization: Bearer <this>`; others get a 401 whose
    /// message echoes the key presented, as real providers do (tests check the gateway
    /// redacts it).
    #[serde(default)]
    pub api_key: Option<String>,
    /// Dimensions of the embedding vectors (default 8).
    #[serde(default)]
    pub embedding_dims: Option<usize>,
    /// Keep a per-request log for the per-window counters (default on; benchmarks turn it off).
    #[serde(default)]
    pub no_request_log: bool,
    /// Seed of the random choices (latency ranges, mixes), for repeatable runs.
    #[serde(default)]
    pub seed: Option<u64>,
}

impl Scenario {
    /// A scenario with one rule for `source` and `route`.
    #[must_use]
    pub fn with_rule(mut self, source: Option<&str>, route: Option<Route>, script: Script) -> Self {
        self.rules.push(Rule {
            source: source.map(str::to_owned),
            route,
            script,
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scenario_files_read_as_documented() {
        let json = r#"{
            "api_key": "sk-test",
            "rules": [
                {"source": "A", "route": "chat",
                 "sequence": [{"kind": "status", "status": 429, "retry_after": "1"},
                              {"kind": "ok", "usage": [10, 5], "latency_ms": [5, 10]}],
                 "then": [{"weight": 3, "kind": "ok"}, {"weight": 1, "kind": "hang"}]},
                {"then": [{"weight": 1, "kind": "ok", "usage": null, "latency_ms": 3}]}
            ]
        }"#;
        let scenario: Scenario = serde_json::from_str(json).expect("valid scenario");
        let first = &scenario.rules[0];
        assert_eq!(first.source.as_deref(), Some("A"));
        assert_eq!(first.route, Some(Route::Chat));
        assert_eq!(
            first.script.sequence[0].behaviour,
            Behaviour::Status {
                status: 429,
                retry_after: Some("1".into()),
                retry_after_ms: None,
                body: None
            }
        );
        assert_eq!(first.script.sequence[1].latency_ms, Latency::Range([5, 10]));
        assert_eq!(
            first.script.sequence[1].behaviour,
            Behaviour::ok_with_usage(10, 5)
        );
        assert_eq!(first.script.then[0].step.behaviour, Behaviour::ok());
        assert_eq!(first.script.then[1].step.behaviour, Behaviour::Hang);
        let second = &scenario.rules[1].script.then[0].step;
        assert_eq!(second.behaviour, Behaviour::Ok { usage: None });
        assert_eq!(second.latency_ms, Latency::Fixed(3));
    }
}
