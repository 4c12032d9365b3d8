//! `polygw load`: drive chat calls through the gateway as configured in the environment, from
//! many concurrent callers, and print a JSON summary. A load generator for your own
//! configuration — and, with the Redis backend, several of these processes share one quota.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use polygateway::{ChatRequest, GatewayClient, GatewayError, Scope};
use serde_json::json;

use crate::{runtime, string_value, usage, usage_error};

pub(crate) fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut concurrency = 16usize;
    let mut duration = Duration::from_secs(10);
    let mut calls: Option<u64> = None;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("concurrency") => {
                concurrency = number(&string_value(&mut args, "--concurrency")?, "--concurrency")?
            }
            Long("duration") => {
                duration = Duration::from_secs(number(
                    &string_value(&mut args, "--duration")?,
                    "--duration",
                )?)
            }
            Long("calls") => calls = Some(number(&string_value(&mut args, "--calls")?, "--calls")?),
            other => return Err(usage(format!("load: unexpected {}", other.unexpected()))),
        }
    }
    runtime()?.block_on(async move {
        let client = GatewayClient::from_env(Scope::Llm)?;
        let started = Instant::now();
        let remaining = Arc::new(std::sync::atomic::AtomicU64::new(calls.unwrap_or(u64::MAX)));
        let stop = Arc::new(AtomicBool::new(false));
        let totals: Arc<std::sync::Mutex<BTreeMap<&'static str, u64>>> = Arc::default();
        let mut callers = tokio::task::JoinSet::new();
        for caller in 0..concurrency {
            let (client, remaining, stop, tally) = (
                client.clone(),
                remaining.clone(),
                stop.clone(),
                totals.clone(),
            );
            callers.spawn(async move {
                let mut n = 0u64;
                while !stop.load(Ordering::Relaxed)
                    && remaining
                        .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |r| r.checked_sub(1))
                        .is_ok()
                {
                    let request = ChatRequest::from_prompt(format!("caller {caller} call {n}"));
                    n += 1;
                    let kind = match client.chat(request).await {
                        Ok(_) => "ok",
                        Err(e) => e.kind().as_str(),
                    };
                    *tally
                        .lock()
                        .unwrap_or_else(|e| e.into_inner())
                        .entry(kind)
                        .or_default() += 1;
                }
            });
        }
        // Stop at the duration: callers still waiting for quota are cancelled (they hold
        // nothing: S1), the rest finish their call.
        let _ = tokio::time::timeout(duration, async {
            while callers.join_next().await.is_some() {}
        })
        .await;
        stop.store(true, Ordering::Relaxed);
        callers.abort_all();
        while callers.join_next().await.is_some() {}
        client.shutdown().await;
        let mut totals = totals.lock().unwrap_or_else(|e| e.into_inner()).clone();
        println!(
            "{}",
            json!({
                "elapsed_ms": u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
                "ok": totals.remove("ok").unwrap_or(0),
                "failed": totals,
            })
        );
        Ok(())
    })
}

fn number<T: std::str::FromStr>(text: &str, flag: &str) -> Result<T, GatewayError> {
    text.parse()
        .map_err(|_| usage(format!("{flag} {text:?}: expected a whole number")))
}
