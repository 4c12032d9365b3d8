//! `polygw stats [--json]`: per scope and source, `tpm_used`, `rpm_used`, `inflight`,
//! `breaker` (SPEC §18). With the memory backend a new process holds nothing, so it shows
//! zeros; the Redis backend shows what every process together holds.

use polygateway::{BreakerState, GatewayClient, GatewayError, Scope};
use serde_json::json;

use crate::{Output, runtime, usage, usage_error};

pub(crate) fn run(mut args: lexopt::Parser, out: &mut Output) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("json") => out.json = true,
            other => return Err(usage(format!("stats: unexpected {}", other.unexpected()))),
        }
    }
    runtime()?.block_on(async {
        // The chat scope is the one with a client today; the others join with theirs.
        let client = GatewayClient::from_env(Scope::Llm)?;
        let stats = client.stats().await?;
        if out.json {
            let sources: Vec<_> = stats
                .iter()
                .map(|s| {
                    json!({
                        "source": s.name,
                        "tpm_used": s.tpm_used,
                        "rpm_used": s.rpm_used,
                        "inflight": s.inflight,
                        "breaker": breaker(s.breaker),
                    })
                })
                .collect();
            println!("{}", json!({"scopes": {"LLM": sources}}));
        } else {
            println!(
                "{:<6} {:<16} {:>10} {:>9} {:>9} breaker",
                "scope", "source", "tpm_used", "rpm_used", "inflight"
            );
            for s in &stats {
                println!(
                    "{:<6} {:<16} {:>10} {:>9} {:>9} {}",
                    "LLM",
                    s.name,
                    s.tpm_used,
                    s.rpm_used,
                    s.inflight,
                    breaker(s.breaker)
                );
            }
        }
        Ok(())
    })
}

fn breaker(state: BreakerState) -> &'static str {
    state.as_str()
}
