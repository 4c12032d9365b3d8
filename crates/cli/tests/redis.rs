//! The Redis backend seen from processes: state shared through Redis, read by another process;
//! a process killed while holding permits; and 4 processes × 64 callers sharing two sources
//! under binding TPM and RPM limits.

#![allow(clippy::print_stderr)] // the proof reports its figures

use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use polygateway_mock::{Behaviour, MockUpstream, Scenario, Script};

fn redis_url() -> String {
    std::env::var("POLYGATEWAY_TEST_REDIS_URL").unwrap_or_else(|_| {
        panic!("POLYGATEWAY_TEST_REDIS_URL is not set: run the tests with `cargo xtask ci`, which starts a redis-server")
    })
}

fn prefix(name: &str) -> String {
    format!("cli-{name}-{}", std::process::id())
}

fn polygw(env: &[(String, String)], args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .current_dir(std::env::temp_dir())
        .output()
        .expect("polygw runs")
}

fn stats(env: &[(String, String)]) -> serde_json::Value {
    let out = polygw(env, &["stats", "--json"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("stats JSON")
}

fn env(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), v.clone()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_deadline_cut_call_leaves_nothing_in_flight_and_its_estimate_in_another_process_view() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let env = env(&[
        ("LLM__BACKEND", "redis".into()),
        ("REDIS_URL", redis_url()),
        ("REDIS_KEY_PREFIX", prefix("deadline")),
        ("LLM__SOURCE__S__BASE_URL", mock.base_url("S")),
        ("LLM__SOURCE__S__MODEL", "m".into()),
        ("LLM__SOURCE__S__EST_TOKENS", "77".into()),
        ("LLM__CALL_DEADLINE_S", "0.5".into()),
    ]);
    let out = polygw(&env, &["chat", "hello"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).starts_with("error: CallDeadlineExceeded: "));
    let stats = stats(&env);
    let source = &stats["scopes"]["LLM"][0];
    assert_eq!(source["inflight"], 0, "{stats}");
    assert_eq!(
        source["tpm_used"], 77,
        "the estimate, settled (S3): {stats}"
    );
    assert_eq!(source["rpm_used"], 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_process_killed_holding_a_permit_stops_holding_it_when_the_lease_ends() {
    let mock = MockUpstream::start(Scenario::default().with_rule(
        None,
        None,
        Script::always(Behaviour::Hang),
    ))
    .await
    .expect("mock");
    let env = env(&[
        ("LLM__BACKEND", "redis".into()),
        ("REDIS_URL", redis_url()),
        ("REDIS_KEY_PREFIX", prefix("crash")),
        ("LLM__SOURCE__S__BASE_URL", mock.base_url("S")),
        ("LLM__SOURCE__S__MODEL", "m".into()),
        ("LLM__SOURCE__S__MAX_CONCURRENCY", "1".into()),
        ("LLM__SOURCE__S__TIMEOUT_S", "3".into()), // lease: 3 s + 5 s margin
    ]);
    let mut child = Command::new(env!("CARGO_BIN_EXE_polygw"))
        .args(["chat", "hold this"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("polygw chat starts");
    mock.until_received(1).await; // entered: the permit is held and the request is upstream
    child.kill().expect("SIGKILL");
    child.wait().expect("reaped");
    let killed = Instant::now();
    assert_eq!(
        stats(&env)["scopes"]["LLM"][0]["inflight"],
        1,
        "the dead process still holds its slot"
    );
    loop {
        if stats(&env)["scopes"]["LLM"][0]["inflight"] == 0 {
            break;
        }
        assert!(
            killed.elapsed() < Duration::from_secs(20),
            "the lease never ran out"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        killed.elapsed() >= Duration::from_secs(4),
        "freed by the lease, not earlier"
    );
}

/// SPEC §6 / issue 6: 4 OS processes × 64 concurrent callers share 2 sources in one Redis. A
/// binds on RPM, B on TPM. The mock counts what it receives; in no 60-second window may it
/// exceed either limit, and the binding limit must be reached to at least 90 %.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_processes_share_binding_quotas_without_exceeding_them() {
    const RPM_A: u64 = 120;
    const TPM_B: u64 = 3000;
    const USAGE: u64 = 30; // the mock reports 20 + 10 for every call (0 for C)
    const RPM_C: u64 = 600;
    let scenario = Scenario {
        no_request_log: false,
        ..Scenario::default()
    }
    .with_rule(
        Some("C"),
        None,
        Script::always(Behaviour::ok_with_usage(0, 0)),
    )
    .with_rule(None, None, Script::always(Behaviour::ok_with_usage(20, 10)));
    let mock = MockUpstream::start(scenario).await.expect("mock");
    let env = env(&[
        ("LLM__BACKEND", "redis".into()),
        ("REDIS_URL", redis_url()),
        ("REDIS_KEY_PREFIX", prefix("share")),
        ("LLM__STALL_WINDOW_S", "300".into()),
        ("LLM__MAX_ATTEMPTS", "3".into()),
        ("LLM__SOURCE__A__BASE_URL", mock.base_url("A")),
        ("LLM__SOURCE__A__MODEL", "m".into()),
        ("LLM__SOURCE__A__RPM", RPM_A.to_string()),
        ("LLM__SOURCE__A__TPM", "1000000".into()),
        ("LLM__SOURCE__A__EST_TOKENS", USAGE.to_string()),
        ("LLM__SOURCE__B__BASE_URL", mock.base_url("B")),
        ("LLM__SOURCE__B__MODEL", "m".into()),
        ("LLM__SOURCE__B__TPM", TPM_B.to_string()),
        ("LLM__SOURCE__B__RPM", "100000".into()),
        ("LLM__SOURCE__B__EST_TOKENS", USAGE.to_string()),
        // C reports 0 tokens: 61 s in, its entries age out freeing 0 tokens — the case that once
        // made the script send HINCRBY "-0", which Redis 7.0 refuses.
        ("LLM__SOURCE__C__BASE_URL", mock.base_url("C")),
        ("LLM__SOURCE__C__MODEL", "m".into()),
        ("LLM__SOURCE__C__RPM", RPM_C.to_string()),
        ("LLM__SOURCE__C__EST_TOKENS", "1".into()),
    ]);
    let started = Instant::now();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            Command::new(env!("CARGO_BIN_EXE_polygw"))
                .args(["load", "--concurrency", "64", "--duration", "70"])
                .env_clear()
                .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("polygw load starts")
        })
        .collect();
    let summaries: Vec<serde_json::Value> = workers
        .into_iter()
        .map(|w| {
            let out = w.wait_with_output().expect("worker ends");
            assert_eq!(
                out.status.code(),
                Some(0),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
            serde_json::from_slice(&out.stdout).expect("summary JSON")
        })
        .collect();
    let elapsed = started.elapsed();
    let window = Duration::from_secs(60);
    let a = mock.window_peak("A", window);
    let b = mock.window_peak("B", window);
    let served: Vec<u64> = summaries
        .iter()
        .map(|s| s["ok"].as_u64().unwrap_or(0))
        .collect();
    eprintln!(
        "shared quota proof: {elapsed:?}; A peak {} requests / {} tokens per 60 s (RPM {RPM_A}); B peak {} requests / {} tokens per 60 s (TPM {TPM_B}); served per process {served:?}; total received {}",
        a.requests,
        a.tokens,
        b.requests,
        b.tokens,
        mock.counters().total
    );
    assert!(
        a.requests <= RPM_A,
        "A received {} requests in one minute (RPM {RPM_A})",
        a.requests
    );
    assert!(
        b.tokens <= TPM_B,
        "B received {} tokens in one minute (TPM {TPM_B})",
        b.tokens
    );
    assert!(
        a.requests * 10 >= RPM_A * 9,
        "A reached only {} of {RPM_A} requests per minute",
        a.requests
    );
    assert!(
        b.tokens * 10 >= TPM_B * 9,
        "B reached only {} of {TPM_B} tokens per minute",
        b.tokens
    );
    assert!(
        served.iter().all(|n| *n > 0),
        "every process was served: {served:?}"
    );
    let c = mock.window_peak("C", window);
    assert!(
        c.requests <= RPM_C,
        "C received {} requests in one minute (RPM {RPM_C})",
        c.requests
    );
    let c_total = mock.counters().requests("C", polygateway_mock::Route::Chat);
    assert!(
        c_total > RPM_C,
        "C kept serving into its second minute (its zero-token entries aged out cleanly): {c_total} requests"
    );
    let failed: Vec<&serde_json::Value> = summaries.iter().map(|s| &s["failed"]).collect();
    assert!(
        failed
            .iter()
            .all(|f| f.as_object().is_some_and(serde_json::Map::is_empty)),
        "no call failed (the backend stayed healthy past the first minute): {failed:?}"
    );
}
