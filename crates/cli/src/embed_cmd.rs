//! `polygw embed`: texts from arguments, a text file (one per line) or JSON lines; vectors out
//! as JSON lines `{"index": i, "embedding": […]}` in input order.

use std::path::PathBuf;
use std::time::Duration;

use polygateway::{CallDeadline, CallOptions, ConfigError, EmbeddingClient, GatewayError};
use serde_json::json;

use crate::progress::Progress;
use crate::{runtime, string_value, usage, usage_error};

/// Texts per `embed` call: each chunk is one logical call, so a huge file shows progress and
/// a failure loses at most one chunk's work.
const CHUNK: usize = 1024;

pub(crate) fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut texts: Vec<String> = Vec::new();
    let mut file: Option<PathBuf> = None;
    let mut jsonl: Option<PathBuf> = None;
    let mut deadline: Option<Duration> = None;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("file") => file = Some(PathBuf::from(string_value(&mut args, "--file")?)),
            Long("jsonl") => jsonl = Some(PathBuf::from(string_value(&mut args, "--jsonl")?)),
            Long("deadline") => {
                let text = string_value(&mut args, "--deadline")?;
                deadline = Some(CallDeadline::parse_secs(&text, "--deadline")?.duration());
            }
            Value(text) => texts.push(
                text.into_string()
                    .map_err(|_| usage("texts must be UTF-8".to_owned()))?,
            ),
            other => return Err(usage(format!("embed: unexpected {}", other.unexpected()))),
        }
    }
    if let Some(path) = &file {
        texts.extend(read(path, "--file")?.lines().map(str::to_owned));
    }
    if let Some(path) = &jsonl {
        for (n, line) in read(path, "--jsonl")?
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
        {
            texts.push(jsonl_text(line).ok_or_else(|| {
                GatewayError::from(ConfigError::invalid(
                    format!("--jsonl {}:{}", path.display(), n + 1),
                    "<line>",
                    "expected a JSON string or an object with a \"text\" string",
                ))
            })?);
        }
    }
    if texts.is_empty() {
        return Err(usage(
            "embed: no texts (give TEXT arguments, --file or --jsonl)".to_owned(),
        ));
    }
    runtime()?.block_on(async {
        let client = EmbeddingClient::from_env()?;
        let options = CallOptions {
            call_deadline: deadline,
            ..CallOptions::default()
        };
        let total = texts.len();
        let progress = (total > CHUNK).then(|| Progress::new(total, false));
        let mut index = 0;
        let mut out = std::io::BufWriter::new(std::io::stdout().lock());
        for chunk in texts.chunks(CHUNK) {
            let vectors = match client.embed_with(chunk.to_vec(), options).await {
                Ok(vectors) => vectors,
                Err(error) => {
                    client.shutdown().await;
                    return Err(error);
                }
            };
            for vector in vectors {
                use std::io::Write;
                writeln!(out, "{}", json!({"index": index, "embedding": vector}))
                    .map_err(|e| usage(format!("cannot write to stdout: {e}")))?;
                index += 1;
            }
            if let Some(p) = &progress {
                p.show(index, 0);
            }
        }
        if let Some(p) = &progress {
            p.finish(index, 0);
        }
        client.shutdown().await;
        Ok(())
    })
}

fn read(path: &PathBuf, flag: &str) -> Result<String, GatewayError> {
    std::fs::read_to_string(path).map_err(|e| {
        ConfigError::invalid(
            flag,
            path.display().to_string(),
            format!("cannot read: {e}"),
        )
        .into()
    })
}

/// A JSON-lines input line: a string, or an object with a `text` string.
fn jsonl_text(line: &str) -> Option<String> {
    match serde_json::from_str::<serde_json::Value>(line).ok()? {
        serde_json::Value::String(text) => Some(text),
        serde_json::Value::Object(map) => map.get("text")?.as_str().map(str::to_owned),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jsonl_lines_are_strings_or_text_objects() {
        assert_eq!(jsonl_text(r#""plain""#).as_deref(), Some("plain"));
        assert_eq!(
            jsonl_text(r#"{"text": "x", "id": 3}"#).as_deref(),
            Some("x")
        );
        assert_eq!(jsonl_text(r#"{"body": "x"}"#), None);
        assert_eq!(jsonl_text("not json"), None);
    }
}
