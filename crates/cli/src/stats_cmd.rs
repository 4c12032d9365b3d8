//! `polygw stats [--json]`: per scope and source, `tpm_used`, `rpm_used`, `inflight`,
//! `breaker` (SPEC §18), for every scope the environment configures. With the memory backend a
//! new process holds nothing, so it shows zeros; the Redis backend shows what every process
//! together holds.

use std::collections::BTreeMap;
use std::path::Path;

use polygateway::config::{DOTENV_FILE, Env, GatewaySettings};
use polygateway::{ClientBuilder, GatewayError, Scope, SourceStats};
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
    let env = Env::from_process_and_dotenv(Path::new(DOTENV_FILE))?;
    runtime()?.block_on(async {
        let mut all: BTreeMap<&'static str, Vec<SourceStats>> = BTreeMap::new();
        for scope in Scope::ALL.into_iter().filter(|s| env.mentions(*s)) {
            let builder = ClientBuilder::new(GatewaySettings::from_env(scope, &env)?);
            let stats = match scope {
                Scope::Llm => builder.build()?.stats().await?,
                Scope::Embedding => builder.build_embedding()?.stats().await?,
                Scope::Ocr => builder.build_ocr()?.stats().await?,
            };
            all.insert(scope.as_str(), stats);
        }
        if out.json {
            let scopes: serde_json::Map<String, serde_json::Value> = all
                .iter()
                .map(|(scope, stats)| {
                    let sources = stats
                        .iter()
                        .map(|s| {
                            json!({
                                "source": s.name,
                                "tpm_used": s.tpm_used,
                                "rpm_used": s.rpm_used,
                                "inflight": s.inflight,
                                "breaker": s.breaker.as_str(),
                            })
                        })
                        .collect();
                    ((*scope).to_owned(), serde_json::Value::Array(sources))
                })
                .collect();
            println!("{}", json!({ "scopes": scopes }));
        } else {
            println!(
                "{:<10} {:<16} {:>10} {:>9} {:>9} breaker",
                "scope", "source", "tpm_used", "rpm_used", "inflight"
            );
            for (scope, stats) in &all {
                for s in stats {
                    println!(
                        "{:<10} {:<16} {:>10} {:>9} {:>9} {}",
                        scope,
                        s.name,
                        s.tpm_used,
                        s.rpm_used,
                        s.inflight,
                        s.breaker.as_str()
                    );
                }
            }
        }
        Ok(())
    })
}
