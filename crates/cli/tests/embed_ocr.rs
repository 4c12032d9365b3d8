//! `polygw embed` and `polygw ocr` end to end against `polygw mock`, all real processes.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Output, Stdio};

/// `polygw mock` on a free port, stopped on drop (its stdout kept open).
struct Mock(Child, #[allow(dead_code)] BufReader<ChildStdout>, String);

impl Drop for Mock {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn mock(args: &[&str]) -> Mock {
    let mut child = Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(["mock", "--listen", "127.0.0.1:0", "--no-request-log"])
        .args(args)
        .stdout(Stdio::piped())
        .spawn()
        .expect("polygw mock starts");
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout"));
    let mut first = String::new();
    stdout.read_line(&mut first).expect("a line");
    let addr = first
        .trim()
        .strip_prefix("mock upstream listening on http://")
        .expect("address line")
        .to_owned();
    Mock(child, stdout, addr)
}

fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polygw-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("workdir");
    dir
}

fn polygw(dir: &Path, env: &[(&str, String)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (*k, v.as_str())))
        .current_dir(dir)
        .output()
        .expect("polygw runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn embed_a_10_000_line_file_in_order() {
    let mock = mock(&["--latency-ms", "0..3"]);
    let dir = workdir("embed");
    let lines: Vec<String> = (0..10_000).map(|i| "w".repeat(1 + i % 50)).collect();
    std::fs::write(dir.join("texts.txt"), lines.join("\n") + "\n").expect("write");
    let env = vec![
        (
            "EMBEDDING__SOURCE__E__BASE_URL",
            format!("http://{}/E/v1", mock.2),
        ),
        ("EMBEDDING__SOURCE__E__MODEL", "embed".to_owned()),
        ("EMBEDDING__SOURCE__E__MAX_BATCH", "64".to_owned()),
        ("EMBEDDING__BATCH_CONCURRENCY", "8".to_owned()),
    ];
    let out = polygw(&dir, &env, &["embed", "--file", "texts.txt"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    let rows: Vec<serde_json::Value> = stdout
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(rows.len(), 10_000);
    for (i, row) in rows.iter().enumerate() {
        assert_eq!(row["index"], i);
        assert_eq!(
            row["embedding"][0].as_f64(),
            Some((1 + i % 50) as f64),
            "row {i} out of order"
        );
    }
    assert_eq!(
        text(&out.stderr),
        "",
        "on a pipe the progress bar stays silent: stderr carries the error contract"
    );

    let out = polygw(&dir, &env, &["embed", "alpha", "be"]);
    let stdout = text(&out.stdout);
    assert_eq!(stdout.lines().count(), 2, "{stdout}");
    std::fs::write(dir.join("texts.jsonl"), "\"abc\"\n{\"text\": \"abcdef\"}\n").expect("write");
    let out = polygw(&dir, &env, &["embed", "--jsonl", "texts.jsonl"]);
    assert!(
        text(&out.stdout).contains(r#""embedding":[6.0"#),
        "{}",
        text(&out.stdout)
    );
}

#[test]
fn ocr_50_images_and_their_layouts() {
    let mock = mock(&[]);
    let dir = workdir("ocr");
    let mut files = Vec::new();
    for i in 0..50 {
        let name = format!("page-{i:02}.png");
        let mut bytes = b"\x89PNG\r\n\x1a\n".to_vec();
        bytes.extend(std::iter::repeat_n(7u8, i));
        std::fs::write(dir.join(&name), bytes).expect("write");
        files.push(name);
    }
    let env = vec![("OCR__SOURCE__M__BASE_URL", format!("http://{}/M", mock.2))];
    let mut args = vec!["ocr"];
    args.extend(files.iter().map(String::as_str));
    let out = polygw(&dir, &env, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    for (i, name) in files.iter().enumerate() {
        assert!(
            stdout.contains(&format!("# {name}\ntext of {name} ({} bytes)\n", 8 + i)),
            "{name}: {stdout}"
        );
    }
    assert_eq!(text(&out.stderr), "");

    args.insert(1, "--layout");
    let out = polygw(&dir, &env, &args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let rows: Vec<serde_json::Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("JSON line"))
        .collect();
    assert_eq!(rows.len(), 50);
    assert_eq!(rows[3]["file"], "page-03.png");
    assert_eq!(rows[3]["content_type"], "json");

    std::fs::write(dir.join("notes.txt"), "not an image").expect("write");
    let out = polygw(&dir, &env, &["ocr", "notes.txt"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).starts_with(
            "error: Config: invalid configuration: OcrClient::recognize_text(document)"
        ),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn stats_covers_every_configured_scope() {
    let mock = mock(&[]);
    let dir = workdir("stats");
    let env = vec![
        (
            "LLM__SOURCE__A__BASE_URL",
            format!("http://{}/A/v1", mock.2),
        ),
        ("LLM__SOURCE__A__MODEL", "m".to_owned()),
        ("OCR__SOURCE__M__BASE_URL", format!("http://{}/M", mock.2)),
    ];
    let out = polygw(&dir, &env, &["stats", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let scopes: Vec<&String> = json["scopes"].as_object().expect("object").keys().collect();
    assert_eq!(scopes, ["LLM", "OCR"]);
    assert_eq!(json["scopes"]["OCR"][0]["source"], "M");
}
