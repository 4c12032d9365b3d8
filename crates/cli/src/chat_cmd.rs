//! `polygw chat [--json] [--deadline SECONDS] PROMPT` (SPEC §18).

use std::time::Duration;

use polygateway::{CallDeadline, CallOptions, ChatRequest, GatewayClient, GatewayError, Scope};
use serde_json::json;

use crate::{Output, runtime, string_value, usage, usage_error};

pub(crate) fn run(mut args: lexopt::Parser, out: &mut Output) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut deadline: Option<Duration> = None;
    let mut prompt: Option<String> = None;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("json") => out.json = true,
            Long("deadline") => {
                let text = string_value(&mut args, "--deadline")?;
                deadline = Some(CallDeadline::parse_secs(&text, "--deadline")?.duration());
            }
            Value(text) if prompt.is_none() => {
                prompt = Some(
                    text.into_string()
                        .map_err(|_| usage("the prompt must be UTF-8".to_owned()))?,
                );
            }
            other => return Err(usage(format!("chat: unexpected {}", other.unexpected()))),
        }
    }
    let prompt = prompt.ok_or_else(|| usage("chat: missing PROMPT".to_owned()))?;
    runtime()?.block_on(async {
        let client = GatewayClient::from_env(Scope::Llm)?;
        let options = CallOptions {
            call_deadline: deadline,
            ..CallOptions::default()
        };
        let result = client.chat_with(ChatRequest::from_prompt(prompt), options).await;
        client.shutdown().await;
        let answer = result?;
        if out.json {
            let usage = answer.usage.unwrap_or_default();
            println!(
                "{}",
                json!({
                    "content": answer.content,
                    "source": answer.source,
                    "model": answer.model,
                    "attempts": answer.attempts,
                    "usage": {"prompt_tokens": usage.prompt_tokens, "completion_tokens": usage.completion_tokens},
                    "latency_ms": answer.latency_ms,
                    "logical_call_id": answer.logical_call_id,
                })
            );
        } else {
            println!("{}", answer.content);
        }
        Ok(())
    })
}
