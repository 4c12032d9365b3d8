//! The `polygw` binary's output contract (SPEC §18), run as a real process.

use std::path::PathBuf;
use std::process::{Command, Output};

const SECRET: &str = "sk-cli-secret-987654321";

/// A fresh working directory, so no stray `.env` is read.
fn workdir(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("polygw-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

fn polygw(dir: &PathBuf, env: &[(&str, &str)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .current_dir(dir)
        .output()
        .expect("polygw runs")
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

const VALID: &[(&str, &str)] = &[
    ("LLM__SOURCE__A__BASE_URL", "http://127.0.0.1:9/v1"),
    ("LLM__SOURCE__A__MODEL", "m"),
    ("LLM__SOURCE__A__API_KEY", SECRET),
];

#[test]
fn config_prints_sources_without_secrets() {
    let dir = workdir("valid");
    let out = polygw(&dir, VALID, &["config", "--scope", "llm"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.starts_with("LLM: backend=memory max_attempts=4 call_deadline=none\n"),
        "{stdout}"
    );
    assert!(
        stdout.contains(
            "  A kind=openai_compat base_url=http://127.0.0.1:9/v1 model=m api_key=<set>"
        ),
        "{stdout}"
    );
    assert!(!stdout.contains(SECRET));
}

#[test]
fn a_bad_deadline_is_a_config_error_exit_2_naming_key_and_value() {
    let dir = workdir("deadline");
    for value in ["0", "-1", "nan", "inf", "abc"] {
        let mut env = VALID.to_vec();
        env.push(("LLM__CALL_DEADLINE_S", value));
        let out = polygw(&dir, &env, &["config", "--scope", "LLM"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{value}: {stderr}");
        let first = stderr.lines().next().unwrap_or_default();
        assert_eq!(
            first,
            format!(
                "error: Config: invalid configuration: LLM__CALL_DEADLINE_S = {value:?}: expected a \
                 finite number of seconds greater than 0"
            )
        );
        assert!(!stderr.contains(SECRET));
    }
}

#[test]
fn the_environment_wins_over_dotenv() {
    let dir = workdir("dotenv");
    std::fs::write(
        dir.join(".env"),
        "LLM__SOURCE__A__BASE_URL=http://127.0.0.1:9\nLLM__SOURCE__A__MODEL=from-file\nLLM__MAX_ATTEMPTS=3\n",
    )
    .expect("write .env");
    let out = polygw(
        &dir,
        &[("LLM__SOURCE__A__MODEL", "from-env")],
        &["config", "--scope", "LLM"],
    );
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(stdout.contains("max_attempts=3"), "{stdout}");
    assert!(stdout.contains("model=from-env"), "{stdout}");
}

#[test]
fn every_scope_is_listed_and_unconfigured_ones_say_so() {
    let dir = workdir("all");
    let out = polygw(&dir, VALID, &["config"]);
    let stdout = text(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        stdout.contains("EMBEDDING: not configured\nOCR: not configured\n"),
        "{stdout}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let dir = workdir("usage");
    for args in [
        &["frobnicate"][..],
        &["config", "--scope", "chat"],
        &["config", "--bogus"],
    ] {
        let out = polygw(&dir, &[], args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(
            text(&out.stderr).starts_with("error: Config: invalid configuration: "),
            "{args:?}"
        );
    }
}
