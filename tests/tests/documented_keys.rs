//! House rule: every configuration key the library reads is documented in
//! `docs/configuration.md` and listed in `.env.example` (SPEC §3).

use std::path::Path;

fn read(relative: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    std::fs::read_to_string(root.join(relative)).unwrap_or_else(|e| panic!("{relative}: {e}"))
}

#[test]
fn every_key_is_in_the_configuration_reference_and_env_example() {
    let reference = read("docs/configuration.md");
    let example = read(".env.example");
    let keys = polygateway::config::all_keys();
    assert!(
        keys.len() > 60,
        "expected every scope's keys, got {}",
        keys.len()
    );
    let undocumented: Vec<&String> = keys
        .iter()
        .filter(|k| !reference.contains(k.as_str()))
        .collect();
    assert_eq!(
        undocumented,
        Vec::<&String>::new(),
        "missing from docs/configuration.md"
    );
    // .env.example writes a concrete source name; compare with <NAME> replaced by it.
    let unlisted: Vec<&String> = keys
        .iter()
        .filter(|k| {
            let concrete = k.replace("<NAME>", "EXAMPLE");
            !example.lines().any(|line| {
                let line = line.trim_start_matches('#').trim_start();
                line.starts_with(&format!("{concrete}="))
            })
        })
        .collect();
    assert_eq!(unlisted, Vec::<&String>::new(), "missing from .env.example");
}

#[test]
fn the_env_example_is_itself_a_valid_configuration_when_uncommented() {
    // Every line of .env.example with a value, uncommented, must load for each scope.
    let example = read(".env.example");
    let pairs: Vec<(String, String)> = example
        .lines()
        .map(|l| l.trim_start_matches('#').trim())
        .filter_map(|l| l.split_once('='))
        .filter(|(k, v)| {
            !v.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_')
        })
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    let env = polygateway::config::Env::from_pairs(pairs);
    for scope in polygateway::Scope::ALL {
        polygateway::config::GatewaySettings::from_env(scope, &env)
            .unwrap_or_else(|e| panic!("{scope}: {e}"));
    }
}
