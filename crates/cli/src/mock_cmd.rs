//! `polygw mock`: run the mock upstream standalone, with a scenario from flags or a file.

use std::net::SocketAddr;
use std::path::PathBuf;

use polygateway::{ConfigError, GatewayError};
use polygateway_mock::{Behaviour, Latency, MockUpstream, Scenario, Script, Step};

use crate::{string_value, usage, usage_error};

pub(crate) const HELP: &str = "\
usage: polygw mock [--listen ADDR] [--scenario FILE | flags…]

Runs the mock upstream until interrupted. Sources are path prefixes: configure
  {SCOPE}__SOURCE__<NAME>__BASE_URL=http://ADDR/<NAME>/v1   (chat, embeddings)
  OCR__SOURCE__<NAME>__BASE_URL=http://ADDR/<NAME>          (MonkeyOCR)
GET http://ADDR/__mock/stats shows the counters.

options:
  --listen ADDR          where to listen (default 127.0.0.1:8080)
  --scenario FILE        a JSON scenario (docs/mock-upstream.md); excludes the flags below
  --latency-ms N|A..B    wait before every answer: fixed, or uniform in [A, B]
  --sequence S,S,…       statuses for the first requests, in order (200 = success)
  --retry-after VALUE    Retry-After header sent with 429 and 503 answers
  --error-rate P         after the sequence, answer 429 with probability P
  --hang-rate P          after the sequence, never answer with probability P
  --api-key KEY          require Authorization: Bearer KEY (others get 401)
  --no-request-log       keep counters only (for long benchmarks)
  --seed N               seed of the random choices";

#[derive(Default)]
struct Flags {
    listen: Option<SocketAddr>,
    scenario_file: Option<PathBuf>,
    latency: Latency,
    sequence: Vec<u16>,
    retry_after: Option<String>,
    error_rate: f64,
    hang_rate: f64,
    api_key: Option<String>,
    no_request_log: bool,
    seed: Option<u64>,
    shaped_by_flags: bool,
}

pub(crate) fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut flags = Flags::default();
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("help") | Short('h') => {
                println!("{HELP}");
                return Ok(());
            }
            Long("listen") => {
                let text = string_value(&mut args, "--listen")?;
                flags.listen = Some(text.parse().map_err(|_| {
                    invalid("--listen", &text, "expected IP:PORT, e.g. 127.0.0.1:8080")
                })?);
            }
            Long("scenario") => {
                flags.scenario_file = Some(PathBuf::from(string_value(&mut args, "--scenario")?))
            }
            Long("latency-ms") => {
                let text = string_value(&mut args, "--latency-ms")?;
                flags.latency = parse_latency(&text)?;
                flags.shaped_by_flags = true;
            }
            Long("sequence") => {
                let text = string_value(&mut args, "--sequence")?;
                flags.sequence = text
                    .split(',')
                    .map(|s| {
                        s.trim()
                            .parse::<u16>()
                            .ok()
                            .filter(|n| (100..=599).contains(n))
                            .ok_or_else(|| {
                                invalid(
                                    "--sequence",
                                    &text,
                                    "expected HTTP statuses separated by commas",
                                )
                            })
                    })
                    .collect::<Result<_, _>>()?;
                flags.shaped_by_flags = true;
            }
            Long("retry-after") => {
                flags.retry_after = Some(string_value(&mut args, "--retry-after")?);
                flags.shaped_by_flags = true;
            }
            Long("error-rate") => {
                flags.error_rate =
                    parse_rate("--error-rate", &string_value(&mut args, "--error-rate")?)?;
                flags.shaped_by_flags = true;
            }
            Long("hang-rate") => {
                flags.hang_rate =
                    parse_rate("--hang-rate", &string_value(&mut args, "--hang-rate")?)?;
                flags.shaped_by_flags = true;
            }
            Long("api-key") => flags.api_key = Some(string_value(&mut args, "--api-key")?),
            Long("no-request-log") => flags.no_request_log = true,
            Long("seed") => {
                let text = string_value(&mut args, "--seed")?;
                flags.seed = Some(
                    text.parse()
                        .map_err(|_| invalid("--seed", &text, "expected a whole number"))?,
                );
            }
            other => return Err(usage(format!("mock: unexpected {}", other.unexpected()))),
        }
    }
    let scenario = scenario(&flags)?;
    let listen = flags
        .listen
        .unwrap_or_else(|| SocketAddr::from(([127, 0, 0, 1], 8080)));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| {
            invalid(
                "polygw mock",
                "runtime",
                &format!("cannot start the runtime: {e}"),
            )
        })?;
    runtime.block_on(async move {
        let mock = MockUpstream::bind(listen, scenario).await.map_err(|e| {
            invalid(
                "--listen",
                &listen.to_string(),
                &format!("cannot listen: {e}"),
            )
        })?;
        let addr = mock.addr();
        // A closed stdout (the reader went away) must not stop the server: ignore write errors.
        let say = |line: String| {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}").and_then(|()| out.flush());
        };
        say(format!("mock upstream listening on http://{addr}"));
        say(format!(
            "  chat / embeddings base URL: http://{addr}/<SOURCE>/v1"
        ));
        say(format!(
            "  MonkeyOCR base URL:         http://{addr}/<SOURCE>"
        ));
        say(format!(
            "  counters:                   http://{addr}/__mock/stats"
        ));
        let _ = tokio::signal::ctrl_c().await;
        say(format!(
            "mock upstream stopped after {} requests",
            mock.counters().total
        ));
        Ok(())
    })
}

fn scenario(flags: &Flags) -> Result<Scenario, GatewayError> {
    let mut scenario = match &flags.scenario_file {
        Some(path) => {
            if flags.shaped_by_flags {
                return Err(usage("--scenario cannot be combined with --latency-ms, --sequence, --retry-after, --error-rate or --hang-rate".to_owned()));
            }
            let text = std::fs::read_to_string(path).map_err(|e| {
                invalid(
                    "--scenario",
                    &path.display().to_string(),
                    &format!("cannot read: {e}"),
                )
            })?;
            serde_json::from_str(&text).map_err(|e| {
                invalid(
                    "--scenario",
                    &path.display().to_string(),
                    &format!("not a valid scenario: {e}"),
                )
            })?
        }
        None => Scenario::default().with_rule(None, None, script_from_flags(flags)?),
    };
    if flags.api_key.is_some() {
        scenario.api_key.clone_from(&flags.api_key);
    }
    scenario.no_request_log |= flags.no_request_log;
    if flags.seed.is_some() {
        scenario.seed = flags.seed;
    }
    Ok(scenario)
}

fn script_from_flags(flags: &Flags) -> Result<Script, GatewayError> {
    if flags.error_rate + flags.hang_rate > 1.0 {
        return Err(invalid(
            "--error-rate",
            &flags.error_rate.to_string(),
            "--error-rate and --hang-rate together must not exceed 1",
        ));
    }
    let status = |code: u16| -> Step {
        let behaviour = match code {
            200..=299 => Behaviour::ok(),
            429 | 503 => match &flags.retry_after {
                Some(value) if code == 429 => Behaviour::rate_limited(value),
                value => Behaviour::Status {
                    status: code,
                    retry_after: value.clone(),
                    retry_after_ms: None,
                    body: None,
                },
            },
            other => Behaviour::status(other),
        };
        Step::from(behaviour).after(flags.latency)
    };
    // Weights in thousandths, so rates like 0.05 are exact.
    let errors = (flags.error_rate * 1000.0).round() as u32;
    let hangs = (flags.hang_rate * 1000.0).round() as u32;
    let mut mix = vec![(1000 - errors - hangs, status(200))];
    if errors > 0 {
        mix.push((errors, status(429)));
    }
    if hangs > 0 {
        mix.push((hangs, Step::from(Behaviour::Hang)));
    }
    Ok(Script::sequence(flags.sequence.iter().map(|&s| status(s))).then(mix))
}

fn parse_latency(text: &str) -> Result<Latency, GatewayError> {
    let bad = || invalid("--latency-ms", text, "expected N or A..B milliseconds");
    match text.split_once("..") {
        Some((a, b)) => {
            let (a, b) = (
                a.trim().parse().map_err(|_| bad())?,
                b.trim().parse().map_err(|_| bad())?,
            );
            if a > b {
                return Err(bad());
            }
            Ok(Latency::Range([a, b]))
        }
        None => Ok(Latency::Fixed(text.trim().parse().map_err(|_| bad())?)),
    }
}

fn parse_rate(name: &str, text: &str) -> Result<f64, GatewayError> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|p| (0.0..=1.0).contains(p))
        .ok_or_else(|| invalid(name, text, "expected a probability between 0 and 1"))
}

fn invalid(key: &str, value: &str, problem: &str) -> GatewayError {
    ConfigError::invalid(key, value, problem).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_build_the_documented_script() {
        let flags = Flags {
            sequence: vec![429, 429, 200],
            retry_after: Some("2".into()),
            error_rate: 0.2,
            hang_rate: 0.05,
            latency: Latency::Range([1, 3]),
            ..Flags::default()
        };
        let script = script_from_flags(&flags).expect("valid");
        assert_eq!(script.sequence.len(), 3);
        assert_eq!(script.sequence[0].behaviour, Behaviour::rate_limited("2"));
        assert_eq!(script.sequence[2].behaviour, Behaviour::ok());
        assert_eq!(script.sequence[0].latency_ms, Latency::Range([1, 3]));
        let weights: Vec<u32> = script.then.iter().map(|w| w.weight).collect();
        assert_eq!(weights, [750, 200, 50]);
        assert_eq!(script.then[2].step.behaviour, Behaviour::Hang);
    }

    #[test]
    fn bad_flags_are_usage_errors() {
        assert!(parse_latency("5..1").is_err());
        assert_eq!(parse_latency("5..9").ok(), Some(Latency::Range([5, 9])));
        assert!(parse_rate("--error-rate", "1.5").is_err());
        let flags = Flags {
            error_rate: 0.7,
            hang_rate: 0.5,
            ..Flags::default()
        };
        assert!(script_from_flags(&flags).is_err());
    }
}
