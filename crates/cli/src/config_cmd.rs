//! `polygw config`: validate the configuration and print it, secrets elided.

use polygateway::{GatewayError, Scope};

/// Validate and print each scope's configuration. Asked for every scope, a scope with no
/// source at all is reported as unconfigured rather than an error.
pub(crate) fn run(scopes: &[Scope]) -> Result<(), GatewayError> {
    let env = polygateway::config::Env::from_process_and_dotenv(std::path::Path::new(
        polygateway::config::DOTENV_FILE,
    ))?;
    let only_one = scopes.len() == 1;
    for &scope in scopes {
        if !only_one && !env.mentions(scope) {
            println!("{scope}: not configured");
            continue;
        }
        match polygateway::config::GatewaySettings::from_env(scope, &env) {
            Ok(config) => {
                println!(
                    "{scope}: backend={} max_attempts={} call_deadline={}",
                    config.backend.as_str(),
                    config.max_attempts,
                    config
                        .call_deadline
                        .map_or_else(|| "none".to_owned(), |d| format!("{:?}", d.duration()))
                );
                for s in &config.sources {
                    println!(
                        "  {} kind={} base_url={} model={} api_key={} tpm={} rpm={} max_concurrency={} timeout={:?}",
                        s.name,
                        s.kind,
                        polygateway::config::redacted_url(&s.base_url),
                        if s.model.is_empty() { "-" } else { &s.model },
                        if s.api_key.is_some() {
                            "<set>"
                        } else {
                            "<unset>"
                        },
                        opt(s.limits.tpm),
                        opt(s.limits.rpm),
                        opt(s.limits.max_concurrency),
                        s.timeout,
                    );
                }
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

fn opt<T: std::fmt::Display>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_owned(), |v| v.to_string())
}
