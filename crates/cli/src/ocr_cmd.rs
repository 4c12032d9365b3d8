//! `polygw ocr [--layout [--markdown]] FILE…`: the text of each file, or its layout as JSON
//! lines `{"file", "content_type", "content"}`.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use polygateway::{CallDeadline, ConfigError, GatewayError, OcrClient, OcrOptions, OcrReturnType};
use serde_json::json;

use crate::progress::Progress;
use crate::{runtime, string_value, usage, usage_error};

/// Files in flight at once.
const CONCURRENCY: usize = 4;

pub(crate) fn run(mut args: lexopt::Parser) -> Result<(), GatewayError> {
    use lexopt::prelude::*;
    let mut files: Vec<PathBuf> = Vec::new();
    let mut layout = false;
    let mut markdown = false;
    let mut deadline: Option<Duration> = None;
    while let Some(arg) = args.next().map_err(usage_error)? {
        match arg {
            Long("layout") => layout = true,
            Long("markdown") => markdown = true,
            Long("deadline") => {
                let text = string_value(&mut args, "--deadline")?;
                deadline = Some(CallDeadline::parse_secs(&text, "--deadline")?.duration());
            }
            Value(path) => files.push(PathBuf::from(path)),
            other => return Err(usage(format!("ocr: unexpected {}", other.unexpected()))),
        }
    }
    if files.is_empty() {
        return Err(usage("ocr: no FILE given".to_owned()));
    }
    let documents = files
        .iter()
        .map(|path| {
            std::fs::read(path).map_err(|e| {
                GatewayError::from(ConfigError::invalid(
                    "FILE",
                    path.display().to_string(),
                    format!("cannot read: {e}"),
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let return_type = if markdown {
        OcrReturnType::Markdown
    } else {
        OcrReturnType::Json
    };
    runtime()?.block_on(async {
        let client = OcrClient::from_env()?;
        let progress = Arc::new((files.len() >= 10).then(|| Progress::new(files.len(), false)));
        let semaphore = Arc::new(tokio::sync::Semaphore::new(CONCURRENCY));
        let mut tasks = tokio::task::JoinSet::new();
        for (i, (path, document)) in files.iter().zip(documents).enumerate() {
            let (client, semaphore) = (client.clone(), semaphore.clone());
            let options = OcrOptions {
                call_deadline: deadline,
                filename: path.file_name().map(|n| n.to_string_lossy().into_owned()),
            };
            let name = path.display().to_string();
            tasks.spawn(async move {
                let _permit = semaphore.acquire_owned().await.expect("the semaphore is never closed");
                let line = if layout {
                    let parsed = client.parse_layout_with(document, return_type, options).await?;
                    json!({"file": name, "content_type": parsed.content_type, "content": parsed.content}).to_string()
                } else {
                    let text = client.recognize_text_with(document, options).await?;
                    format!("# {name}\n{}", text.content)
                };
                Ok::<_, GatewayError>((i, line))
            });
        }
        let mut lines: Vec<Option<String>> = vec![None; files.len()];
        let mut done = 0;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok((i, line))) => lines[i] = Some(line),
                Ok(Err(error)) => {
                    tasks.abort_all();
                    client.shutdown().await;
                    return Err(error);
                }
                // Tasks are only aborted after an error has returned, so this is a panic: a bug,
                // and it should look like one.
                Err(join) => std::panic::resume_unwind(join.into_panic()),
            }
            done += 1;
            if let Some(p) = progress.as_ref() {
                p.show(done, 0);
            }
        }
        if let Some(p) = progress.as_ref() {
            p.finish(done, 0);
        }
        client.shutdown().await;
        for line in lines.into_iter().flatten() {
            println!("{line}");
        }
        Ok(())
    })
}
